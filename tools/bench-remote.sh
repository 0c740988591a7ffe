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
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-$ROOT/build}
BIN=$BUILD/gguf-reap
GEN=$BUILD/gguf-reap-gen
REPS=${REPS:-3}
DELAY_MS=${DELAY_MS:-40}
DIR=${BENCH_DIR:-/work/bench-remote.$$}
mkdir -p "$DIR/srv" "$DIR/out"
SERVER_PID=
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT

"$GEN" model --skeleton --preset tiny --embd 1024 --expert-ff 1024 --experts 32 --used 4 --blocks 5 --shards 3 \
    -o "$DIR/srv/model" >/dev/null
/usr/bin/python3 - "$DIR/keep.json" <<'PY'
import json, random, sys
random.seed(7)
json.dump({"drop": {str(b): sorted(random.sample(range(32), 8)) for b in range(1, 5)}}, open(sys.argv[1], "w"))
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
