#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS seconds on a scratch copy of its seed corpus and fails on
# any crash, sanitizer report, leak, timeout or out-of-memory. (docs/fuzzing.md)
#   tools/fuzz-smoke.sh BUILD_DIR SECONDS
# BUILD_DIR is a tree configured with -DCMAKE_CXX_COMPILER=clang++ -DGGUF_REAP_FUZZ=ON.
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: tools/fuzz-smoke.sh BUILD_DIR SECONDS" >&2
    exit 2
fi
BUILD=$1
SECONDS_EACH=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGETS=(fuzz_gguf_header fuzz_imatrix fuzz_keeplist fuzz_plan_npz fuzz_manifest fuzz_external_plan)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gguf-reap-fuzz.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# fuzz_one TARGET: exits 1 when the target failed, after saying so and keeping its reproducers.
fuzz_one() {
    local t=$1 bin=$BUILD/tests/fuzz/$1
    # Work on a copy: new inputs the fuzzer finds must not land in the source tree.
    mkdir -p "$WORK/$t/corpus" "$WORK/$t/artifacts"
    cp "$ROOT/tests/fuzz/corpus/$t/"* "$WORK/$t/corpus/"
    local dict=()
    [ -f "$ROOT/tests/fuzz/$t.dict" ] && dict=(-dict="$ROOT/tests/fuzz/$t.dict")
    echo "fuzz-smoke: $t for ${SECONDS_EACH}s" >&2
    if "$bin" "${dict[@]}" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -print_final_stats=1 -artifact_prefix="$WORK/$t/artifacts/" "$WORK/$t/corpus" \
        >"$WORK/$t/log" 2>&1; then
        grep -E '^stat::number_of_executed_units' "$WORK/$t/log" | sed "s/^/fuzz-smoke: $t: /" >&2 || true
        return 0
    fi
    # One block on stderr, so that two targets' reports do not interleave.
    {
        echo "fuzz-smoke: $t FAILED; last lines of its log:"
        tail -n 40 "$WORK/$t/log"
        for a in "$WORK/$t/artifacts/"*; do
            [ -e "$a" ] || continue
            keep="$BUILD/fuzz-artifacts/$t"
            mkdir -p "$keep" && cp "$a" "$keep/"
            echo "fuzz-smoke: reproducer kept as $keep/$(basename "$a") (run: $bin $keep/$(basename "$a"))"
        done
    } >"$WORK/$t/report" 2>&1
    cat "$WORK/$t/report" >&2
    return 1
}

for t in "${TARGETS[@]}"; do
    if [ ! -x "$BUILD/tests/fuzz/$t" ]; then
        echo "fuzz-smoke: $BUILD/tests/fuzz/$t is missing (configure with -DGGUF_REAP_FUZZ=ON and build it)" >&2
        exit 2
    fi
done
# Two targets at a time: each fuzzer is one thread, and CI has two cores.
failed=0
pids=()
for t in "${TARGETS[@]}"; do
    fuzz_one "$t" &
    pids+=($!)
    if [ ${#pids[@]} -eq 2 ]; then
        wait "${pids[0]}" || failed=1
        pids=("${pids[1]}")
    fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
