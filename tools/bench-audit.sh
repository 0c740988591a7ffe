#!/usr/bin/env bash
# Benchmark of `gguf-reap audit`, side by side with plain baselines on the same bytes:
#   byte audit      gguf-reap audit OUT --source SRC     vs  cmp of every output shard with a copy of itself
#   manifest hash   gguf-reap audit OUT --manifest-out   vs  sha256sum of every output shard
#   source manifest gguf-reap audit OUT --source-manifest SRC.json  vs  the same cmp (target <= 0.55:
#                   only the output is read)
# Both sides run cold: before every timed run every file involved (output, its copy, source) is flushed
# and dropped from the page cache with posix_fadvise(DONTNEED) (`dd iflag=nocache count=0`), the way
# audit drops the output itself. Byte audit reads the output once and the kept source slabs once; cmp
# reads the output and an equal-sized copy: the same number of bytes.
#
#   tools/bench-audit.sh [small|big]      small (default): 4.4 GB kimi-k3 grid, 247,296 slabs of 17 KiB
#                                          big: 11.5 GB, 4,992 slabs of 2.1 MiB
# Peak RSS of `audit --source` and of `audit --source-manifest` (target: within 10 % of it) is measured
# once each with /usr/bin/time -v at the end (memory, unlike time, does not depend on a busy machine).
# Environment: BUILD (default build), BENCH_DIR (default /tmp/gguf-reap-bench-audit), RUNS (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-$ROOT/build}
DIR=${BENCH_DIR:-/tmp/gguf-reap-bench-audit}
RUNS=${RUNS:-3}
SIZE=${1:-small}
BIN=$BUILD/gguf-reap
GEN=$BUILD/gguf-reap-gen
[ -x "$BIN" ] && [ -x "$GEN" ] || { echo "build first: $BIN, $GEN" >&2; exit 2; }

case "$SIZE" in
    small) GEN_ARGS=(--skeleton --preset kimi-k3 --embd 256 --expert-ff 64 --type-exps Q8_0 --shards 4) ;;
    big) GEN_ARGS=(--skeleton --preset kimi-k3 --blocks 14 --experts 128 --used 8 --embd 2048 --expert-ff 1024 --type-exps Q8_0
                   --shards 4) ;;
    *) echo "usage: tools/bench-audit.sh [small|big]" >&2; exit 2 ;;
esac
mkdir -p "$DIR/$SIZE"
cd "$DIR/$SIZE"

# The source model (kept between runs: generating it is the slow part) and a keeplist that keeps every
# even expert — no two kept slabs adjacent, the hardest gather.
if [ ! -f src.args ] || [ "$(cat src.args)" != "${GEN_ARGS[*]}" ]; then
    rm -f src-*.gguf src.args
    echo "bench: generating the source model (${GEN_ARGS[*]})" >&2
    "$GEN" model "${GEN_ARGS[@]}" -o src >/dev/null
    echo "${GEN_ARGS[*]}" >src.args
fi
SRC=$(ls src-00001-of-*.gguf)
"$BIN" inspect --json "$SRC" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
e = d["moe"]["experts"]
json.dump({"drop": {str(b): list(range(1, e, 2)) for b in d["moe_layers"]}}, open("keep.json", "w"))'
echo "bench: splicing" >&2
rm -f out-*.gguf copy-*.gguf
"$BIN" splice "$SRC" --keeplist keep.json -o out -q --force >/dev/null
OUT=(out-*.gguf)
for f in "${OUT[@]}"; do cp "$f" "copy-$f"; done
sync

drop() {  # flush and drop the page cache of every file given
    for f in "$@"; do dd if="$f" iflag=nocache count=0 status=none; done
}
ALL=(src-*.gguf out-*.gguf copy-*.gguf)
# seconds RUN...: wall time of one command, after dropping every file's pages.
seconds() {
    drop "${ALL[@]}"
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cmp_all() { for f in "${OUT[@]}"; do cmp -s "$f" "copy-$f"; done; }
cat_all() { cat "${OUT[@]}" copy-out-*.gguf >/dev/null; }

# The source's manifest, made once (what a release makes once and reuses for every prune ratio).
T_SRCMAN=$(seconds "$BIN" audit "$SRC" --manifest-out src-manifest.json --force)
SRCMAN_BYTES=$(stat -c %s src-manifest.json)

declare -a T_AUDIT T_CMP T_MAN T_SHA T_CAT T_SMAN
for i in $(seq "$RUNS"); do
    T_CAT+=("$(seconds cat_all)")
    T_CMP+=("$(seconds cmp_all)")
    T_AUDIT+=("$(seconds "$BIN" audit "${OUT[0]}" --source "$SRC")")
    T_SHA+=("$(seconds sha256sum "${OUT[@]}")")
    T_MAN+=("$(seconds "$BIN" audit "${OUT[0]}" --manifest-out manifest.json --force)")
    T_SMAN+=("$(seconds "$BIN" audit "${OUT[0]}" --source-manifest src-manifest.json)")
    echo "bench: run $i: cat ${T_CAT[-1]} s, cmp ${T_CMP[-1]} s, audit ${T_AUDIT[-1]} s, sha256sum ${T_SHA[-1]} s, manifest ${T_MAN[-1]} s, source manifest ${T_SMAN[-1]} s" >&2
done

OUT_BYTES=$(stat -c %s "${OUT[@]}" | paste -sd+ | bc)
SRC_BYTES=$(stat -c %s src-*.gguf | paste -sd+ | bc)
J=$("$BIN" audit "${OUT[0]}" --source "$SRC" --json)
READ=$(echo "$J" | /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print(s["bytes_read"], s["source_bytes_read"], s["slabs"], s["tensors"])')
read -r A_OUT A_SRC SLABS TENSORS <<<"$READ"
m_cat=$(median "${T_CAT[@]}"); m_cmp=$(median "${T_CMP[@]}"); m_audit=$(median "${T_AUDIT[@]}")
m_sha=$(median "${T_SHA[@]}"); m_man=$(median "${T_MAN[@]}"); m_sman=$(median "${T_SMAN[@]}")
gbps() { echo "scale=2; $1 / $2 / 1000000000" | bc -l; }

echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"\
     "$(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(df -T . | awk 'NR==2 {print $2}') on $(df . | awk 'NR==2 {print $1}')"
echo "model:   $SIZE: source $SRC_BYTES bytes, output ${#OUT[@]} shards $OUT_BYTES bytes, $TENSORS tensors, $SLABS kept slabs"
echo "cold:    every file flushed and dropped from the page cache before every run; median of $RUNS runs"
echo
printf '%-44s %10s %12s %9s\n' "run" "seconds" "bytes read" "GB/s"
printf '%-44s %10.2f %12s %9s\n' "(reference) cat output shards and copies" "$m_cat" $((2 * OUT_BYTES)) "$(gbps $((2 * OUT_BYTES)) "$m_cat")"
printf '%-44s %10.2f %12s %9s\n' "cmp output shards with copies" "$m_cmp" $((2 * OUT_BYTES)) "$(gbps $((2 * OUT_BYTES)) "$m_cmp")"
printf '%-44s %10.2f %12s %9s\n' "gguf-reap audit --source" "$m_audit" $((A_OUT + A_SRC)) "$(gbps $((A_OUT + A_SRC)) "$m_audit")"
printf '%-44s %10.2f %12s %9s\n' "sha256sum output shards" "$m_sha" "$OUT_BYTES" "$(gbps "$OUT_BYTES" "$m_sha")"
printf '%-44s %10.2f %12s %9s\n' "gguf-reap audit --manifest-out (+ tensors)" "$m_man" "$OUT_BYTES" "$(gbps "$OUT_BYTES" "$m_man")"
printf '%-44s %10.2f %12s %9s\n' "gguf-reap audit --source-manifest" "$m_sman" "$OUT_BYTES" "$(gbps "$OUT_BYTES" "$m_sman")"
printf '%-44s %10.2f %12s %9s\n' "(once) audit SRC --manifest-out (+ slabs)" "$T_SRCMAN" "$SRC_BYTES" "$(gbps "$SRC_BYTES" "$T_SRCMAN")"
echo "source manifest: $SRCMAN_BYTES bytes"
echo
echo "byte audit / cmp          = $(echo "scale=3; $m_audit / $m_cmp" | bc -l)   (target <= 1.1)"
echo "manifest / sha256sum      = $(echo "scale=3; $m_man / $m_sha" | bc -l)   (target <= 1.0)"
echo "source manifest / cmp     = $(echo "scale=3; $m_sman / $m_cmp" | bc -l)   (target <= 0.55)"

# peak_kib CMD...: the peak resident set of one run, in KiB.
peak_kib() { /usr/bin/time -v "$@" 2>&1 >/dev/null | awk -F': ' '/Maximum resident set size/ {print $2}'; }
RSS_SRC=$(peak_kib "$BIN" audit "${OUT[0]}" --source "$SRC")
RSS_SMAN=$(peak_kib "$BIN" audit "${OUT[0]}" --source-manifest src-manifest.json)
echo
echo "peak RSS: audit --source $((RSS_SRC / 1024)) MiB, audit --source-manifest $((RSS_SMAN / 1024)) MiB"
echo "source manifest RSS / --source RSS = $(echo "scale=3; $RSS_SMAN / $RSS_SRC" | bc -l)   (target <= 1.10)"
