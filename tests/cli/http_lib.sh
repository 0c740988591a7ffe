# The test HTTP server (tests/remote/http_server.py) for CLI tests: start_server ROOT [OPTIONS...] sets
# PORT, URL (http://127.0.0.1:PORT), SLOG (its request log) and CONTROL (its fault file); stop_server
# stops it by pid. It listens on 127.0.0.1 only, and the EXIT trap stops it whatever happens.
SERVER_PY=$(cd "$(dirname "${BASH_SOURCE[0]}")/../remote" && pwd)/http_server.py
SERVER_PID=
stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
        SERVER_PID=
    fi
}
trap 'stop_server; rm -rf "$WORK"' EXIT
start_server() {
    local root=$1
    shift
    stop_server
    SLOG=$WORK/server.log
    CONTROL=$WORK/control.json
    rm -f "$WORK/port" "$SLOG" "$CONTROL"
    /usr/bin/python3 "$SERVER_PY" --root "$root" --port-file "$WORK/port" --log "$SLOG" --control "$CONTROL" "$@" &
    SERVER_PID=$!
    # Listening once it has written its port (5 s had been the limit; a loaded machine may take longer).
    wait_until [ -s "$WORK/port" ] || { echo "the test HTTP server did not start"; exit 1; }
    PORT=$(cat "$WORK/port")
    URL=http://127.0.0.1:$PORT
}
# fault JSON: the server's faults from now on (its counters restart, even for the same faults again:
# each setting is numbered). The server reads the file at every request, so the next request sees it.
FAULT_GEN=0
fault() {
    FAULT_GEN=$((FAULT_GEN + 1))
    printf '{"gen": %d, %s' "$FAULT_GEN" "${1#\{}" >"$CONTROL.tmp" && mv "$CONTROL.tmp" "$CONTROL"
}
no_fault() { rm -f "$CONTROL"; }
# clear_log: forget the requests so far.
clear_log() { : >"$SLOG"; }
# settle: returns once the server has logged every request of the clients that have exited (it
# answers when no other connection is open). Call it before reading the log after a run.
settle() {
    /usr/bin/python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/.settle", timeout=130).read()' "$URL"
}
# served_bytes: body bytes the server sent since clear_log.
served_bytes() {
    settle
    /usr/bin/python3 -c 'import json,sys; print(sum(json.loads(l)["sent"] for l in open(sys.argv[1])))' "$SLOG"
}
# log_has PYTHON_EXPR: true when EXPR holds, with `rows` the requests logged since clear_log.
log_has() {
    /usr/bin/python3 - "$SLOG" "$1" <<'PY'
import json, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.endswith("\n")]
except OSError:
    rows = []
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
# wait_until CMD ARGS...: waits for an event, polling CMD until it succeeds; false if it never does
# within 120 s (a safety net for a broken run, not a time the test relies on).
wait_until() {
    local i
    for i in $(seq 2400); do
        "$@" && return 0
        sleep 0.05
    done
    return 1
}
