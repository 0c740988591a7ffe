#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (run as root, or with sudo available):
#   tools/setup.sh demo   install what is missing, build, run the whole release on a generated model:
#                         inspect → rank → splice → audit → estimate → card; with GGUF_REAP_LLAMA_BIN (llama.cpp's
#                         bin directory) and the trained fixture, from texts on a model llama.cpp runs:
#                         calibrate → rank → splice → audit → eval → card
#   tools/setup.sh test   install what is missing, build (normal + ASan/UBSan), run every test and fuzz smoke
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}

PACKAGES=(cmake ninja-build g++ pkg-config libcli11-dev nlohmann-json3-dev libspdlog-dev
          libgtest-dev libzip-dev libssl-dev python3 python3-numpy clang libclang-rt-14-dev clang-format
          librsvg2-bin libcurl4-openssl-dev help2man dpkg-dev file)

install_missing() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "setup: installing ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {  # build DIR [cmake args...] [-- targets...]
    local dir=$1; shift
    local args=() targets=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    [ "${1:-}" = -- ] && { shift; targets=("$@"); }
    cmake -S "$ROOT" -B "$dir" -G Ninja -DGGUF_REAP_WERROR=ON "${args[@]}" >/dev/null
    cmake --build "$dir" -j "$JOBS" ${targets[@]:+--target "${targets[@]}"}
}

# The release from texts (GGUF_REAP_LLAMA_BIN set): the trained fixture, a small MoE model llama.cpp runs,
# and its calibration and held-out texts (../shared/fixtures/trained, or $GGUF_REAP_TRAINED).
demo_llama() {
    local trained=$1 out=$2 r=build/gguf-reap
    local m=$trained/models/tiny-qwen3moe-trained-A-Q8_0.gguf texts=()
    for d in c changelog legal markdown python; do texts+=(--text "$d=$trained/corpora/$d.calib.txt"); done
    echo "== calibrate (llama-imatrix, every text cut to its first 8,192 tokens)"
    $r calibrate --model "$m" "${texts[@]}" --ctx 128 --tokens 8192 -o "$out/imatrix"
    local ims=()
    for d in c changelog legal markdown python; do ims+=(--imatrix "$d=$out/imatrix/$d.imatrix.gguf"); done
    echo "== rank";    $r rank --model "$m" "${ims[@]}" --keep 12 -o "$out/rank"
    echo "== splice";  $r splice "$m" --keeplist "$out/rank/keeplist.json" -o "$out/pruned"
    echo "== audit";   $r audit "$out/pruned.gguf" --source "$m" --manifest-out "$out/pruned.manifest.json"
    $r -q audit "$out/pruned.gguf" --source "$m" --json >"$out/audit.json"
    echo "== eval (llama-perplexity)"
    $r eval --source "$m" "$out/pruned.gguf" --text python="$trained/corpora/python.heldout.txt" \
        --text legal="$trained/corpora/legal.heldout.txt" --ctx 128 --chunks 16 --cache-dir "$out/kld" -o "$out/eval.json"
    echo "== card";    $r card "$out/pruned.gguf" --source "$m" --rank "$out/rank" --audit "$out/audit.json" \
                          --manifest "$out/pruned.manifest.json" --eval "$out/eval.json" \
                          --base-model example/tiny-qwen3moe-trained -o "$out/README.md"
    sed -n '1,60p' "$out/README.md"
    echo "demo outputs in $out (the model card: $out/README.md)"
}

demo() {
    # Only the two programs the demo runs (the tests are most of the build: tools/setup.sh test), and the
    # man pages when help2man is there, so that `cmake --install build` installs them too.
    local targets=(gguf-reap gguf-reap-gen)
    command -v help2man >/dev/null && targets+=(man)
    build build -- "${targets[@]}"
    local out=${DEMO_DIR:-$ROOT/out/demo}
    rm -rf "$out" && mkdir -p "$out"
    local r=build/gguf-reap
    local trained=${GGUF_REAP_TRAINED:-$ROOT/../shared/fixtures/trained}
    if [ -n "${GGUF_REAP_LLAMA_BIN:-}" ]; then
        if [ -f "$trained/models/tiny-qwen3moe-trained-A-Q8_0.gguf" ]; then
            demo_llama "$trained" "$out"
            return
        fi
        echo "demo: GGUF_REAP_LLAMA_BIN is set, but there is no trained fixture in $trained (set GGUF_REAP_TRAINED):" \
            "the demo from texts needs a model llama.cpp runs; running the generated-model demo instead" >&2
    fi
    # A small synthetic Kimi-K2-shaped MoE model (2 shards) and two calibration domains, made on the fly.
    build/gguf-reap-gen model --preset demo --shards 2 -o "$out/model"
    build/gguf-reap-gen imatrix --model "$out/model-00001-of-00002.gguf" --domain chat --seed 7 --dead-per-block 2 -o "$out/chat.imatrix.gguf"
    build/gguf-reap-gen imatrix --model "$out/model-00001-of-00002.gguf" --domain code --seed 7 --dead-per-block 2 -o "$out/code.imatrix.gguf"
    echo "== inspect"; $r inspect "$out/model-00001-of-00002.gguf"
    echo "== rank";    $r rank --model "$out/model-00001-of-00002.gguf" --imatrix chat="$out/chat.imatrix.gguf" \
                          --imatrix code="$out/code.imatrix.gguf" --ratio 25% -o "$out/rank"
    echo "== splice";  $r splice "$out/model-00001-of-00002.gguf" --keeplist "$out/rank/keeplist.json" -o "$out/pruned"
    echo "== audit";   $r audit "$out/pruned-00001-of-00002.gguf" --source "$out/model-00001-of-00002.gguf" \
                          --manifest-out "$out/pruned.manifest.json"
    # The card reads the audit's report as JSON: the same audit again (the model is small).
    $r -q audit "$out/pruned-00001-of-00002.gguf" --source "$out/model-00001-of-00002.gguf" --json >"$out/audit.json"
    echo "== estimate"; $r estimate "$out/model-00001-of-00002.gguf" --keeplist "$out/rank/keeplist.json" --tp 2,4
    echo "== card";    $r card "$out/pruned-00001-of-00002.gguf" --source "$out/model-00001-of-00002.gguf" \
                          --rank "$out/rank" --audit "$out/audit.json" --manifest "$out/pruned.manifest.json" \
                          --base-model example/Kimi-K2-demo --tp 2,4 -o "$out/README.md"
    sed -n '1,40p' "$out/README.md"
    echo "demo outputs in $out (the model card: $out/README.md)"
}

# The live llama.cpp tests (GGUF_REAP_LLAMA_BIN: .ci/run sets it to ../shared/llama.cpp/bin). Probed once
# on a tiny generated model, with a timeout: a build for a CPU this one is not (AVX-512 on a CPU without it
# dies by SIGILL), a tool that crashes or hangs, or a missing tool turns the live parts off, said in one
# line, as when it is not set. Prints the build it uses.
probe_llama() {
    local bin=${GGUF_REAP_LLAMA_BIN:-} why="" t log rc
    if [ -z "$bin" ]; then
        echo "setup: live llama.cpp tests skipped: GGUF_REAP_LLAMA_BIN is not set" >&2
        return 0
    fi
    for t in llama-perplexity llama-tokenize llama-completion llama-simple llama-embedding llama-imatrix \
        llama-server; do
        [ -x "$bin/$t" ] || { why="$bin has no $t"; break; }
    done
    # A copy whose library symlinks arrived as text files (../shared) runs from a repaired copy in build/.
    if [ -z "$why" ] && ! bin=$(tools/llama-bin.sh "$bin" "$ROOT/build/llama.cpp-bin" 2>"$ROOT/build/llama-bin.log"); then
        why=$(tail -n 1 "$ROOT/build/llama-bin.log")
    fi
    if [ -z "$why" ]; then
        log=$(mktemp -d)
        build/gguf-reap-gen model --preset demo -o "$log/probe.gguf" >/dev/null
        # (in a command substitution, so that the shell's own "Illegal instruction" notice is not printed)
        rc=$({ timeout 120 "$bin/llama-completion" -m "$log/probe.gguf" -n 1 -p Hello -no-cnv -t 1 --no-warmup \
            -c 64 >"$log/out" 2>&1 </dev/null; } 2>/dev/null; echo $?)
        if [ $rc = 124 ]; then
            why="llama-completion did not finish a 1-token run on a tiny model within 120 s"
        elif [ $rc -gt 128 ]; then
            why="llama-completion dies by SIG$(kill -l $((rc - 128))) on a tiny model"
            if [ $((rc - 128)) = 4 ]; then
                grep -q avx512f /proc/cpuinfo && why="$why: built for a CPU feature this one lacks" ||
                    why="$why: built for AVX-512, which this CPU lacks"
            fi
        elif [ $rc != 0 ]; then
            why="llama-completion fails on a tiny model (exit $rc): $(tail -n 1 "$log/out")"
        fi
        rm -rf "$log"
    fi
    if [ -n "$why" ]; then
        echo "setup: live llama.cpp tests skipped: $why" >&2
        unset GGUF_REAP_LLAMA_BIN
        return 0
    fi
    local what
    what=$(sed -n '1s/^# *//p' "$GGUF_REAP_LLAMA_BIN/../README.md" 2>/dev/null)
    [ "$bin" = "$GGUF_REAP_LLAMA_BIN" ] || echo "setup: $(tail -n 1 "$ROOT/build/llama-bin.log")" >&2
    echo "setup: live llama.cpp tests use $bin: ${what:+$what, }$("$bin/llama-completion" --version 2>&1 | grep -m1 '^version')" >&2
    export GGUF_REAP_LLAMA_BIN=$bin
}

# Each step of the test run says how long it took (stderr), so that a CI run over its budget shows where.
STEP_START=0
took() {
    echo "setup: $1 took $((SECONDS - STEP_START)) s" >&2
    STEP_START=$SECONDS
}

run_tests() {
    STEP_START=$SECONDS
    # A Release (-O3) build, warnings as errors: what users build, and the build whose warnings
    # (-Wrestrict and friends only show at -O3) must stay clean. The live llama.cpp parts run here, once.
    build build -DCMAKE_BUILD_TYPE=Release
    took "the Release build"
    probe_llama
    (cd build && ctest --output-on-failure -j "$JOBS")
    took "the Release tests"
    # The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, at -O1 with line
    # tables: that compiles in 40 % of the time -O2 -g takes under the sanitizers and still gives
    # symbolized reports (docs/performance.md, "CI").
    # (-Werror stays in the build above: g++ 12's flow warnings are unreliable under ASan instrumentation,
    #  e.g. a false -Wmaybe-uninitialized inside std::regex)
    build build-asan -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DGGUF_REAP_SANITIZE=ON \
        -DGGUF_REAP_WERROR=OFF
    took "the ASan/UBSan build"
    # Without llama.cpp: its live parts ran in the Release pass, and under ASan they would take as long
    # again to test llama.cpp rather than gguf-reap. GGUF_REAP_TEST_PASS tells the tests so, and their skip
    # lines say it (tests/cli/lib.sh, live_why).
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1 env -u GGUF_REAP_LLAMA_BIN GGUF_REAP_TEST_PASS=sanitizers \
        ctest --output-on-failure -j "$JOBS")
    took "the ASan/UBSan tests"
    # libFuzzer smoke: each parser target for a short fixed time.
    # (only the fuzz targets: they compile the parsers themselves, instrumented for coverage)
    cmake -S "$ROOT" -B build-fuzz -G Ninja -DGGUF_REAP_WERROR=ON -DCMAKE_CXX_COMPILER=clang++ \
        -DGGUF_REAP_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
    cmake --build build-fuzz -j "$JOBS" --target fuzz_gguf_header fuzz_imatrix fuzz_keeplist fuzz_plan_npz fuzz_manifest fuzz_external_plan
    took "the fuzz build"
    tools/fuzz-smoke.sh build-fuzz "${FUZZ_SECONDS:-8}"
    took "the fuzz smoke"
}

install_missing
case "${1:-}" in
    demo) demo ;;
    test) run_tests ;;
    *) echo "usage: tools/setup.sh demo|test" >&2; exit 2 ;;
esac
