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
    local i
    for i in $(seq 100); do
        [ -s "$WORK/port" ] && break
        sleep 0.05
    done
    PORT=$(cat "$WORK/port")
    URL=http://127.0.0.1:$PORT
}
# fault JSON: the server's faults from now on (its counters restart).
fault() { printf '%s' "$1" >"$CONTROL.tmp" && mv "$CONTROL.tmp" "$CONTROL"; sleep 0.01; }
no_fault() { rm -f "$CONTROL"; }
# clear_log: forget the requests so far.
clear_log() { : >"$SLOG"; }
# served_bytes: body bytes the server sent since clear_log.
served_bytes() { /usr/bin/python3 -c 'import json,sys; print(sum(json.loads(l)["sent"] for l in open(sys.argv[1])))' "$SLOG"; }
