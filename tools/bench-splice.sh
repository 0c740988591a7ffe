#!/usr/bin/env bash
# Benchmark: `gguf-reap splice` against `cp` of the same number of output bytes on the same disk,
# side by side in one run, with peak RSS from /usr/bin/time -v.
#
#   tools/bench-splice.sh [BUILD_DIR]        (default BUILD_DIR: build)
#
# Environment:
#   BENCH_DIR   scratch directory (default /work/bench-splice.$$; removed at the end)
#   REPS        repetitions of each measurement (default 3; medians are reported)
#   MODELS      which models: "k3 big" (default), any of "k3 big width"
#   CACHES      "warm cold" (default): warm = source in the page cache; cold = `sync` and
#               drop_caches before every timed command (needs root), so both read from the disk
#   KEEP        fraction of experts kept per block, chosen at random (default 0.5)
#   SETTLE_MIB  memory touched and freed again before every timed command (default: the output's size
#               plus 1 GiB, at most half of MemAvailable; 0: none). See "Settling" below.
#
# Models (docs/fixture-generator.md):
#   k3   Kimi-K3-shaped: 93 blocks (92 MoE), 896 experts, 247,296 expert slabs of ~17 KiB, 4.4 GB
#   big  large slabs: 14 blocks, 128 experts, slabs of 2.1 MiB, 11.5 GB in 4 shards
#   width  a width cut of a quantized model: big's shape with 8 blocks (6.6 GB in 2 shards), KEEP of the
#        experts and a `plan-width --granularity block` plan keeping 512 of 1024 channels, so every
#        ffn_down_exps row (32 Q8_0 blocks of 34 bytes) is gathered from 16 whole blocks
#
# Each timed command starts after `sync`, so no run pays for the previous one's writeback. splice
# fsyncs its outputs before renaming them; cp does not. So there are two like-for-like pairs: splice
# against `cp && sync FILE` (durable on disk), and `splice --no-fsync` against `cp` (left to the
# kernel's writeback). Both ratios are printed.
#
# Settling: on a VM with free page reporting (virtio-balloon; /sys/module/page_reporting), memory freed
# by the previous command (its output file deleted, caches dropped) is handed back to the host, and the
# next command to write pays a host page fault on every page it touches first: on the development VM
# that spread the same `cp` from 0.6 s to 4.3 s. Touching SETTLE_MIB of memory and freeing it just
# before each timed command gives every command, splice and cp alike, memory the host still backs.
# The minimum and the median of the repetitions are both printed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-$ROOT/build}
BIN=$BUILD/gguf-reap
GEN=$BUILD/gguf-reap-gen
DIR=${BENCH_DIR:-/work/bench-splice.$$}
REPS=${REPS:-3}
MODELS=${MODELS:-k3 big}
CACHES=${CACHES:-warm cold}
KEEP=${KEEP:-0.5}
TIME=/usr/bin/time

[ -x "$BIN" ] && [ -x "$GEN" ] || { echo "bench-splice: build first ($BIN, $GEN)" >&2; exit 2; }
[ -x "$TIME" ] || { echo "bench-splice: needs GNU time (apt-get install time)" >&2; exit 2; }
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT
avail=$(df --output=avail -B1 "$DIR" | tail -1)
need=$((36 * 1000 * 1000 * 1000))
[ "$avail" -ge "$need" ] || { echo "bench-splice: $DIR has $avail bytes free, needs $need" >&2; exit 3; }

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"\
     "$(free -g | awk '/Mem:/ {print $2}') GiB RAM, kernel $(uname -r)"
echo "# disk: $(findmnt -no SOURCE,FSTYPE,OPTIONS -T "$DIR"), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# gguf-reap: $("$BIN" --version), cp: $(cp --version | head -1)"

drop_caches() { [ "$1" = cold ] && { sync; echo 3 >/proc/sys/vm/drop_caches; } || sync; }
SETTLE=${SETTLE_MIB:-}
settle() { [ "${SETTLE:-0}" -gt 0 ] && /usr/bin/python3 -c "b'\\x01' * ($SETTLE << 20)" || true; }

# timed CACHE OUTFILE CMD...: runs CMD under /usr/bin/time -v, prints "seconds max_rss_kib disk_read_bytes"
# (the last from "File system inputs", 512-byte blocks the kernel read from the disk for the command:
# after drop_caches, what it really read, the kept bytes plus whatever the gaps between them cost).
timed() {
    local cache=$1 log=$2
    shift 2
    drop_caches "$cache"
    settle
    "$TIME" -v -o "$log" "$@" >/dev/null
    awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]}
                /Maximum resident set size/ {m = $2} /File system inputs/ {r = $2 * 512}
                END {printf "%.3f %d %.0f\n", s, m, r}' "$log"
}

div() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
minimum() { sort -g | head -1; }

# A keeplist keeping KEEP of the experts of every MoE block, at random (seeded).
make_keeplist() {
    "$BIN" inspect --json "$1" | /usr/bin/python3 -c '
import json, random, sys
d = json.load(sys.stdin)
keep, E = float(sys.argv[1]), d["moe"]["experts"]
rng = random.Random(1)
n_drop = E - max(d["moe"]["used"], round(E * keep))
print(json.dumps({"drop": {str(b): sorted(rng.sample(range(E), n_drop)) for b in d["moe_layers"]}}))' "$KEEP"
}

bench() {  # bench NAME MODEL_FIRST_FILE [SPLICE_OPTION...]
    local name=$1 model=$2
    shift 2
    local extra=("$@")
    make_keeplist "$model" >"$DIR/keep.json"
    local plan bytes
    plan=$("$BIN" splice "$model" --keeplist "$DIR/keep.json" "${extra[@]}" -o "$DIR/out" --dry-run --json)
    bytes=$(echo "$plan" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes_written"])')
    echo "$plan" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print("## %s: %d source shard(s), %d MoE blocks, %d -> %d experts; %d output shard(s), %d tensors, "
      "{:,} slabs in {:,} extents, {:,} bytes".format(d["slabs"], d["extents"], d["bytes_written"])
      % (sys.argv[1], d["source"]["shards"], d["moe_blocks"], d["source"]["expert_count"], d["expert_count"],
         d["shards"], d["tensors"]))' "$name"
    # The cp baseline: a file of exactly the output's size, on the same disk.
    local prefix=${model%-00001-of-*.gguf}
    # (cat dies of SIGPIPE once head has enough: not an error)
    { if [ "$prefix" != "$model" ]; then cat "$prefix"-0*-of-*.gguf; else cat "$model"; fi; } 2>/dev/null |
        head -c "$bytes" >"$DIR/ref.bin" || true
    [ "$(stat -c %s "$DIR/ref.bin")" -eq "$bytes" ] || { echo "bench-splice: source smaller than output" >&2; exit 3; }
    if [ -z "${SETTLE_MIB:-}" ]; then
        local avail_mib
        avail_mib=$(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
        SETTLE=$((bytes / 1048576 + 1024))
        [ "$SETTLE" -le $((avail_mib / 2)) ] || SETTLE=$((avail_mib / 2))
    fi
    echo "# settle: ${SETTLE} MiB touched and freed before every timed command"
    for cache in $CACHES; do
        : >"$DIR/splice.t"; : >"$DIR/nosync.t"; : >"$DIR/cp.t"; : >"$DIR/cpsync.t"
        for _ in $(seq 1 "$REPS"); do
            rm -f "$DIR"/out*.gguf "$DIR/copy.bin"
            timed "$cache" "$DIR/log" "$BIN" splice "$model" --keeplist "$DIR/keep.json" "${extra[@]}" -o "$DIR/out" -q \
                >>"$DIR/splice.t"
            rm -f "$DIR"/out*.gguf
            # --no-fsync: as durable as cp (the kernel writes back later), so the like-for-like pair.
            timed "$cache" "$DIR/log" "$BIN" splice "$model" --keeplist "$DIR/keep.json" "${extra[@]}" -o "$DIR/out" -q \
                --no-fsync >>"$DIR/nosync.t"
            rm -f "$DIR"/out*.gguf
            timed "$cache" "$DIR/log" cp "$DIR/ref.bin" "$DIR/copy.bin" >>"$DIR/cp.t"
            rm -f "$DIR/copy.bin"
            timed "$cache" "$DIR/log" sh -c "cp '$DIR/ref.bin' '$DIR/copy.bin' && sync '$DIR/copy.bin'" >>"$DIR/cpsync.t"
        done
        local s ns c cs rss stat
        rss=$(cut -d' ' -f2 "$DIR/splice.t" "$DIR/nosync.t" | sort -n | tail -1)
        for stat in median minimum; do
            s=$(cut -d' ' -f1 "$DIR/splice.t" | $stat)
            ns=$(cut -d' ' -f1 "$DIR/nosync.t" | $stat)
            c=$(cut -d' ' -f1 "$DIR/cp.t" | $stat)
            cs=$(cut -d' ' -f1 "$DIR/cpsync.t" | $stat)
            printf '%-4s %-5s %-7s splice %7.2f s  cp+sync %7.2f s  ratio %.3f | splice --no-fsync %7.2f s  cp %7.2f s  ratio %.3f\n' \
                "$name" "$cache" "$stat" "$s" "$cs" "$(div "$s" "$cs")" "$ns" "$c" "$(div "$ns" "$c")"
        done
        printf '%-4s %-5s splice peak RSS %.1f MiB  [splice: %s| cp+sync: %s| --no-fsync: %s| cp: %s]\n' \
            "$name" "$cache" "$(div "$rss" 1024)" \
            "$(cut -d' ' -f1 "$DIR/splice.t" | tr '\n' ' ')" "$(cut -d' ' -f1 "$DIR/cpsync.t" | tr '\n' ' ')" \
            "$(cut -d' ' -f1 "$DIR/nosync.t" | tr '\n' ' ')" "$(cut -d' ' -f1 "$DIR/cp.t" | tr '\n' ' ')"
        if [ "$cache" = cold ]; then
            # The physical limit of a cold run: what the disk had to deliver. cp reads exactly the output's
            # bytes; splice reads the kept extents, plus readahead into the dropped slabs between them.
            local sr cr
            sr=$(cut -d' ' -f3 "$DIR/splice.t" | median)
            cr=$(cut -d' ' -f3 "$DIR/cpsync.t" | median)
            printf '%-4s cold  read from the disk (median): splice %.0f bytes (%.3f x the output), cp %.0f bytes; splice against cp+sync per byte read: %.3f\n' \
                "$name" "$sr" "$(div "$sr" "$bytes")" "$cr" \
                "$(div "$(div "$(cut -d' ' -f1 "$DIR/splice.t" | median)" "$sr")" "$(div "$(cut -d' ' -f1 "$DIR/cpsync.t" | median)" "$cr")")"
        fi
    done
    rm -f "$DIR"/out*.gguf "$DIR/copy.bin" "$DIR/ref.bin"
}

for m in $MODELS; do
    case $m in
        k3)
            "$GEN" model --skeleton --preset kimi-k3 --embd 256 --expert-ff 64 --type-exps Q8_0 -o "$DIR/k3.gguf" >/dev/null
            bench k3 "$DIR/k3.gguf"
            rm -f "$DIR/k3.gguf" ;;
        big)
            "$GEN" model --skeleton --preset kimi-k3 --blocks 14 --experts 128 --used 8 --embd 2048 --expert-ff 1024 \
                --type-exps Q8_0 --shards 4 -o "$DIR/big" >/dev/null
            bench big "$DIR/big-00001-of-00004.gguf"
            rm -f "$DIR"/big-*.gguf ;;
        width)
            "$GEN" model --skeleton --preset kimi-k3 --blocks 8 --experts 128 --used 8 --embd 2048 --expert-ff 1024 \
                --type-exps Q8_0 --shards 2 -o "$DIR/width" >/dev/null
            "$GEN" imatrix --model "$DIR/width-00001-of-00002.gguf" -o "$DIR/width.imatrix.gguf" >/dev/null
            "$BIN" plan-width --model "$DIR/width-00001-of-00002.gguf" --imatrix "$DIR/width.imatrix.gguf" --k 512 \
                --granularity block -o "$DIR/width-plan.npz" >/dev/null
            bench width "$DIR/width-00001-of-00002.gguf" --neuron-plan "$DIR/width-plan.npz"
            rm -f "$DIR"/width-*.gguf "$DIR"/width*.npz "$DIR"/width*.json "$DIR/width.imatrix.gguf" ;;
        *) echo "bench-splice: unknown model '$m' (k3, big, width)" >&2; exit 2 ;;
    esac
done
