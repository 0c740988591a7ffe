#!/usr/bin/env bash
# A/B benchmark of two gguf-reap builds on one splice: the Kimi-K3-shaped model of bench-splice.sh (half
# the experts kept at random), the two binaries run in turn, REPS pairs per cache state, so that a change
# to the copy engine is measured against the build before it in the same minutes on the same disk.
#
#   tools/bench-splice-ab.sh OLD_GGUF_REAP NEW_GGUF_REAP [BUILD_DIR]   (BUILD_DIR: its gguf-reap-gen)
#
# Environment: REPS (default 7), CACHES ("warm cold"; cold drops the page cache, needs root), BENCH_DIR
# (scratch, default /work/bench-ab.$$, removed at the end). Before every run: sync, and 3 GiB of memory
# touched and freed (the "Settling" of bench-splice.sh). Prints each run, then per binary the sorted
# times and the median. Run it on a quiet machine (docs/perf/splice.md).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?old gguf-reap binary} NEW=${2:?new gguf-reap binary}
GEN=${3:-build}/gguf-reap-gen
REPS=${REPS:-7}
CACHES=${CACHES:-warm cold}
D=${BENCH_DIR:-/work/bench-ab.$$}
mkdir -p "$D"
trap 'rm -rf "$D"' EXIT
"$GEN" model --skeleton --preset kimi-k3 --embd 256 --expert-ff 64 --type-exps Q8_0 -o "$D/k3.gguf" >/dev/null
"$NEW" inspect --json "$D/k3.gguf" | /usr/bin/python3 -c '
import json, random, sys
d = json.load(sys.stdin)
E = d["moe"]["experts"]; rng = random.Random(1)
n_drop = E - max(d["moe"]["used"], round(E * 0.5))
print(json.dumps({"drop": {str(b): sorted(rng.sample(range(E), n_drop)) for b in d["moe_layers"]}}))' >"$D/keep.json"
for cache in $CACHES; do
    : >"$D/old.t"; : >"$D/new.t"
    for _ in $(seq "$REPS"); do
        for v in old new; do
            bin=$OLD; [ $v = new ] && bin=$NEW
            rm -f "$D"/out*.gguf
            sync
            [ "$cache" = cold ] && echo 3 >/proc/sys/vm/drop_caches
            /usr/bin/python3 -c "b'\x01' * (3 << 30)"
            /usr/bin/time -f "%e" -o "$D/t" "$bin" splice "$D/k3.gguf" --keeplist "$D/keep.json" -o "$D/out" -q
            cat "$D/t" >>"$D/$v.t"
            echo "$cache $v $(cat "$D/t") s"
        done
    done
    for v in old new; do
        printf '%-4s %-3s sorted: %s median %s s\n' "$cache" "$v" "$(sort -g "$D/$v.t" | tr '\n' ' ')" \
            "$(sort -g "$D/$v.t" | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')"
    done
done
