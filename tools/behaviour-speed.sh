#!/usr/bin/env bash
# How fast eval --prompts generates, against the same requests sent by hand: curl in a loop, K loops at once,
# to a llama-server started with the very command eval used (same slots, same context), on the same panel.
#
#   tools/behaviour-speed.sh GGUF_REAP LLAMA_BIN SOURCE OUT PANEL GEN_TOKENS K [REPS]
#
# Each repetition runs `gguf-reap eval --source SOURCE OUT --prompts p=PANEL --gen-tokens N --parallel K
# --json` (the document on stdout keeps the server command's absolute paths, which an eval.json written with
# -o makes relative to itself) and reads the source's panel time and tokens from eval.json (behaviour[0].seconds: from the first request to the
# last reply, the server already loaded), then starts llama-server with behaviour[0].server_command (on
# another free port), waits for /health, and times K shell loops of `curl -s -d @body URL` over the same
# request bodies (prompt i goes to loop i mod K), summing the tokens of the replies. Prints tokens/s of both
# and their ratio per repetition, then the medians. The server it starts is stopped by its pid.
# A .jsonl PANEL may hold chat lines ("messages", "tools"; docs/eval.md, "Chat and tools"): each is sent
# by hand as eval sends it, to /v1/chat/completions with the settings but return_tokens, its tokens
# counted from usage.completion_tokens (as eval counts them). Extra eval arguments go in $EVAL_ARGS (split
# as the shell splits words: `--temp 0.7 --samples 2` ...), llama.cpp's (a template file) in
# $GGUF_REAP_LLAMA_ARGS, which eval reads as its --llama-args.
set -euo pipefail
BIN=$1 LLAMA=$2 SRC=$3 OUT=$4 PANEL=$5 N=$6 K=$7 REPS=${8:-3}
W=$(mktemp -d "${TMPDIR:-/tmp}/behaviour-speed.XXXXXX")
SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
py() { python3 - "$@"; }

# The request bodies, exactly as eval sends them (generation.request + the prompt; a chat line's messages
# and tools with the request but return_tokens), and beside each its endpoint (I.path).
bodies() {
    py "$W/eval.json" "$PANEL" "$W/bodies" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1])); req = d["generation"]["request"]
os.makedirs(sys.argv[3], exist_ok=True)
lines = [p.rstrip("\r") for p in open(sys.argv[2], encoding="utf-8").read().split("\n") if p.strip(" \t\r")]
for i, p in enumerate(lines):
    path = "/completion"
    if sys.argv[2].endswith(".jsonl"):
        j = json.loads(p)
        if "messages" in j:
            path = "/v1/chat/completions"
            body = dict({k: v for k, v in req.items() if k != "return_tokens"},
                        **{k: j[k] for k in ("messages", "tools") if k in j})
        else:
            body = dict(req, prompt=j["prompt"])
    else:
        body = dict(req, prompt=p)
    json.dump(body, open(f"{sys.argv[3]}/{i}.json", "w"))
    open(f"{sys.argv[3]}/{i}.path", "w").write(path)
print(len(lines))
PY
}

rows=()
for rep in $(seq "$REPS"); do
    rm -rf "$W/cache" "$W/eval.json"
    # shellcheck disable=SC2086
    "$BIN" -q eval --source "$SRC" "$OUT" --prompts p="$PANEL" --gen-tokens "$N" --parallel "$K" \
        --llama-bin "$LLAMA" --cache-dir "$W/cache" --json ${EVAL_ARGS:-} >"$W/eval.json"
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
            curl -s -H 'Content-Type: application/json' -d @"$W/bodies/$i.json" \
                "http://127.0.0.1:$port$(<"$W/bodies/$i.path")" >"$W/reply.$i"
        done) &
    done
    wait $(jobs -p | grep -v "^$SERVER_PID$") 2>/dev/null || true
    end=$(date +%s.%N)
    kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
    curl_tokens=$(py "$W" "$P" <<'PY'
import json, sys
def tokens(r):  # a chat reply's count is its usage's; an error (a template error) has none
    return len(r["tokens"]) if "tokens" in r else r.get("usage", {}).get("completion_tokens", 0)
print(sum(tokens(json.load(open(f"{sys.argv[1]}/reply.{i}"))) for i in range(int(sys.argv[2]))))
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
