#!/usr/bin/env bash
# Benchmark: `gguf-reap splice` from a URL against curl fetching the same source from the same server,
# and against itself with 40 ms added before every response (docs/performance.md, "Remote").
#
#   tools/bench-remote.sh [BUILD_DIR]        (default BUILD_DIR: build)
#
# Environment:
#   BENCH_DIR  scratch directory (default /work/bench-remote.$$; removed at the end)
#   REPS       repetitions of each measurement (default 3; medians are reported)
#   DELAY_MS   the added latency (default 40)
#   MODEL      "small" (default: the model below, every measurement) or "k3": memory at scale only (below)
#   K3_BLOCKS  with MODEL=k3, the blocks of the model (default 93, Kimi-K3's; fewer make a smaller model
#              with the same slabs, to see how the peak grows with the extent count)
#
# The server is tests/remote/http_server.py on 127.0.0.1 (sendfile, HTTP/1.1 keep-alive), started and
# stopped by pid here. The model: 3 shards, 5 blocks (4 MoE) of 32 experts with 1.1 MiB slabs, 0.45 GB;
# a quarter of the experts of every block are dropped at random (seed 7).
#
# Measured, each after `sync`:
#   curl    all shards fetched in parallel into files (curl --parallel), then `sync` of those files:
#           the plain way to get the same bytes onto the disk durably; its time per source byte
#   splice  gguf-reap splice URL (durable, as by default): its time per byte fetched, the ratio of the
#           two (the goal: at most 1.25), and bytes fetched over bytes written (at most 1.10)
#   +40ms   the same splice with DELAY_MS before every response: its time over splice's (at most 1.5)
#   RSS     peak RSS of one splice from the URL (/usr/bin/time)
#   inspect bytes fetched by inspect and estimate --fit of the same URL (headers only: at most 4 MiB a shard)
#
# MODEL=k3 (issue 41, "memory stays flat at scale"): a Kimi-K3-shaped model, 93 blocks (92 MoE) of 896
# experts with 52 KiB Q8_0 slabs (embd 256, expert FFN 192), 13.0 GB in 3 shards; a quarter of the
# experts of every block dropped at random (seed 7): about 77,000 kept extents. Measured: one splice
# from the URL, REPS times, under /usr/bin/time: its peak RSS (goal <= 64 MiB), time, extents, requests
# and bytes fetched. It needs about 23 GB in BENCH_DIR and takes minutes (the Python server answers a few
# hundred requests a second).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-$ROOT/build}
BIN=$BUILD/gguf-reap
GEN=$BUILD/gguf-reap-gen
REPS=${REPS:-3}
DELAY_MS=${DELAY_MS:-40}
DIR=${BENCH_DIR:-/work/bench-remote.$$}
MODEL=${MODEL:-small}
K3_BLOCKS=${K3_BLOCKS:-93}
case $MODEL in
    small | k3) ;;
    *) echo "bench-remote: unknown MODEL '$MODEL' (small, k3)" >&2; exit 2 ;;
esac
mkdir -p "$DIR/srv" "$DIR/out"
SERVER_PID=
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT

if [ "$MODEL" = k3 ]; then
    avail=$(df --output=avail -B1 "$DIR" | tail -1)
    need=$((24 * 1000 * 1000 * 1000 * K3_BLOCKS / 93))
    [ "$avail" -ge "$need" ] || { echo "bench-remote: $DIR has $avail bytes free, needs $need" >&2; exit 3; }
    "$GEN" model --skeleton --preset kimi-k3 --blocks "$K3_BLOCKS" --embd 256 --expert-ff 192 --type-exps Q8_0 \
        --shards 3 -o "$DIR/srv/model" >/dev/null
    EXPERTS=896 MOE_BLOCKS=$((K3_BLOCKS - 1))
else
    "$GEN" model --skeleton --preset tiny --embd 1024 --expert-ff 1024 --experts 32 --used 4 --blocks 5 --shards 3 \
        -o "$DIR/srv/model" >/dev/null
    EXPERTS=32 MOE_BLOCKS=4
fi
/usr/bin/python3 - "$DIR/keep.json" "$EXPERTS" "$MOE_BLOCKS" <<'PY'
import json, random, sys
random.seed(7)
e, blocks = int(sys.argv[2]), int(sys.argv[3])
json.dump({"drop": {str(b): sorted(random.sample(range(e), e // 4)) for b in range(1, blocks + 1)}},
          open(sys.argv[1], "w"))
PY
/usr/bin/python3 "$ROOT/tests/remote/http_server.py" --root "$DIR/srv" --port-file "$DIR/port" \
    --log "$DIR/server.log" --control "$DIR/control.json" &
SERVER_PID=$!
for _ in $(seq 100); do [ -s "$DIR/port" ] && break; sleep 0.05; done
URL=http://127.0.0.1:$(cat "$DIR/port")
SHARDS=(model-00001-of-00003.gguf model-00002-of-00003.gguf model-00003-of-00003.gguf)
SRC_BYTES=$(cat "$DIR"/srv/model-0000* | wc -c)

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
served() { /usr/bin/python3 -c 'import json,sys; print(sum(json.loads(l)["sent"] for l in open(sys.argv[1])))' "$DIR/server.log"; }

time_curl() {
    local args=() s t0 t1
    for s in "${SHARDS[@]}"; do args+=(-o "$DIR/out/$s" "$URL/$s"); done
    sync
    t0=$(now)
    curl -s --fail --parallel --parallel-max 8 "${args[@]}"
    sync "$DIR"/out/model-0000*
    t1=$(now)
    rm -f "$DIR"/out/model-0000*
    echo "$t1 - $t0" | bc -l
}
time_splice() {
    local t0 t1
    sync
    : >"$DIR/server.log"
    t0=$(now)
    "$BIN" splice "$URL/${SHARDS[0]}" --keeplist "$DIR/keep.json" -o "$DIR/out/p" --force --json -q >"$DIR/splice.json"
    t1=$(now)
    echo "$t1 - $t0" | bc -l
}

# MODEL=k3: the peak RSS of the splice at scale, and what it is made of; nothing else.
if [ "$MODEL" = k3 ]; then
    echo "model: Kimi-K3-shaped, $K3_BLOCKS blocks of 896 experts, $SRC_BYTES source bytes in 3 shards; $REPS repetitions"
    for _ in $(seq "$REPS"); do
        sync
        : >"$DIR/server.log"
        /usr/bin/time -f '%M %e' -o "$DIR/time.txt" "$BIN" splice "$URL/${SHARDS[0]}" --keeplist "$DIR/keep.json" \
            -o "$DIR/out/p" --force --json -q >"$DIR/splice.json"
        /usr/bin/python3 - "$DIR/splice.json" "$DIR/time.txt" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
rss, sec = open(sys.argv[2]).read().split()
print(f"splice URL  peak RSS {int(rss) / 1024:.1f} MiB (goal <= 64 MiB)  {float(sec):.1f} s  "
      f"{j['extents']} extents  {j['http_requests']} requests  "
      f"{j['bytes_fetched']} bytes fetched for {j['bytes_written']} written ({j['bytes_fetched'] / j['bytes_written']:.3f}x)")
PY
        rm -f "$DIR"/out/p*
    done
    exit 0
fi

echo "model: $SRC_BYTES source bytes in 3 shards; $REPS repetitions, medians"
rm -f "$DIR/control.json"
CURL=$(for _ in $(seq "$REPS"); do time_curl; done | median)
SPLICE=$(for _ in $(seq "$REPS"); do time_splice; done | median)
FETCHED=$(/usr/bin/python3 -c "import json; print(json.load(open('$DIR/splice.json'))['bytes_fetched'])")
WRITTEN=$(/usr/bin/python3 -c "import json; print(json.load(open('$DIR/splice.json'))['bytes_written'])")
[ "$(served)" -eq "$FETCHED" ] || echo "warning: the server sent $(served) bytes, splice reports $FETCHED"
printf '{"delay_ms": %d}' "$DELAY_MS" >"$DIR/control.json.tmp" && mv "$DIR/control.json.tmp" "$DIR/control.json"
SLOW=$(for _ in $(seq "$REPS"); do time_splice; done | median)
rm -f "$DIR/control.json"
RSS=$(/usr/bin/time -f %M "$BIN" splice "$URL/${SHARDS[0]}" --keeplist "$DIR/keep.json" -o "$DIR/out/p" --force -q 2>&1 >/dev/null | tail -1)
: >"$DIR/server.log"
"$BIN" inspect "$URL/${SHARDS[1]}" >/dev/null
INSPECT=$(served)
: >"$DIR/server.log"
"$BIN" estimate "$URL/${SHARDS[1]}" --fit size=300M >/dev/null
ESTIMATE=$(served)

awk -v c="$CURL" -v s="$SPLICE" -v w="$SLOW" -v src="$SRC_BYTES" -v f="$FETCHED" -v o="$WRITTEN" \
    -v i="$INSPECT" -v e="$ESTIMATE" -v d="$DELAY_MS" -v rss="$RSS" 'BEGIN {
    printf "curl + sync    %7.3f s  %6.0f MB/s  (%d bytes)\n", c, src / c / 1e6, src
    printf "splice URL     %7.3f s  %6.0f MB/s  (%d bytes fetched, %d written: %.3fx)\n", s, f / s / 1e6, f, o, f / o
    printf "splice +%dms   %7.3f s  %6.0f MB/s\n", d, w, f / w / 1e6
    printf "time per byte, splice / curl: %.2f (goal <= 1.25)\n", (s / f) / (c / src)
    printf "with %d ms latency / without: %.2f (goal <= 1.5)\n", d, w / s
    printf "splice peak RSS %.1f MiB (goal <= 64 MiB)\n", rss / 1024
    printf "headers only: inspect %d bytes, estimate --fit %d bytes for 3 shards (goal <= 4 MiB a shard)\n", i, e
}'
