#!/usr/bin/env bash
# How fast eval --prompts generates, against the same requests sent by hand: curl in a loop, K loops at once,
# to a llama-server started with the very command eval used (same slots, same context), on the same panel.
#
#   tools/behaviour-speed.sh GGUF_REAP LLAMA_BIN SOURCE OUT PANEL GEN_TOKENS K [REPS]
#
# Each repetition runs `gguf-reap eval --source SOURCE OUT --prompts p=PANEL --gen-tokens N --parallel K` and
# reads the source's panel time and tokens from eval.json (behaviour[0].seconds: from the first request to the
# last reply, the server already loaded), then starts llama-server with behaviour[0].server_command (on
# another free port), waits for /health, and times K shell loops of `curl -s -d @body URL` over the same
# request bodies (prompt i goes to loop i mod K), summing the tokens of the replies. Prints tokens/s of both
# and their ratio per repetition, then the medians. The server it starts is stopped by its pid.
set -euo pipefail
BIN=$1 LLAMA=$2 SRC=$3 OUT=$4 PANEL=$5 N=$6 K=$7 REPS=${8:-3}
W=$(mktemp -d "${TMPDIR:-/tmp}/behaviour-speed.XXXXXX")
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
py() { python3 - "$@"; }

# The request bodies, exactly as eval sends them (generation.request + the prompt).
bodies() {
    py "$W/eval.json" "$PANEL" "$W/bodies" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1])); req = d["generation"]["request"]
os.makedirs(sys.argv[3], exist_ok=True)
prompts = [p.rstrip("\r") for p in open(sys.argv[2], encoding="utf-8").read().split("\n") if p.strip(" \t\r")]
for i, p in enumerate(prompts):
    json.dump(dict(req, prompt=p), open(f"{sys.argv[3]}/{i}.json", "w"))
print(len(prompts))
PY
}

rows=()
for rep in $(seq "$REPS"); do
    rm -rf "$W/cache" "$W/eval.json"
    "$BIN" -q eval --source "$SRC" "$OUT" --prompts p="$PANEL" --gen-tokens "$N" --parallel "$K" \
        --llama-bin "$LLAMA" --cache-dir "$W/cache" -o "$W/eval.json" >/dev/null
    read -r ev_tokens ev_seconds < <(py "$W/eval.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["behaviour"][0]
print(b["tokens"], b["seconds"])
PY
)
    P=$(bodies)
    port=$(py <<'PY'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
)
    mapfile -t cmd < <(py "$W/eval.json" "$port" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["behaviour"][0]["server_command"]
c[c.index("--port") + 1] = sys.argv[2]
print("\n".join(c))
PY
)
    "${cmd[@]}" >"$W/server.log" 2>&1 &
    SERVER_PID=$!
    until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.1; done
    start=$(date +%s.%N)
    for k in $(seq 0 $((K - 1))); do
        (for ((i = k; i < P; i += K)); do
            curl -s -H 'Content-Type: application/json' -d @"$W/bodies/$i.json" "http://127.0.0.1:$port/completion" >"$W/reply.$i"
        done) &
    done
    wait $(jobs -p | grep -v "^$SERVER_PID$") 2>/dev/null || true
    end=$(date +%s.%N)
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
    curl_tokens=$(py "$W" "$P" <<'PY'
import json, sys
print(sum(len(json.load(open(f"{sys.argv[1]}/reply.{i}"))["tokens"]) for i in range(int(sys.argv[2]))))
PY
)
    row=$(py "$ev_tokens" "$ev_seconds" "$curl_tokens" "$start" "$end" <<'PY'
import sys
et, es, ct, s, e = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
a, b = et / es, ct / (e - s)
print(f"{a:.1f} {b:.1f} {a / b:.3f}")
PY
)
    echo "rep $rep: eval $(cut -d' ' -f1 <<<"$row") tok/s, curl $(cut -d' ' -f2 <<<"$row") tok/s, ratio $(cut -d' ' -f3 <<<"$row")"
    rows+=("$row")
done
py "${rows[@]}" <<'PY'
import statistics, sys
r = [list(map(float, l.split())) for l in sys.argv[1:]]
print("median: eval %.1f tok/s, curl %.1f tok/s, ratio %.3f" % tuple(statistics.median(c) for c in zip(*r)))
PY
