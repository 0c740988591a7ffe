# Resume of a splice from a URL (issue 34, docs/splice.md "Resume"): killed with SIGKILL at 40 % of what a
# whole run fetches, the same command continues, fetches at most 0.7x of a whole run and writes the
# local splice's bytes; a changed keeplist or source, or --no-resume, starts over and says so.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

mkdir -p "$WORK/srv"
"$GEN" model --skeleton --preset tiny --embd 512 --expert-ff 1024 --shards 2 -o "$WORK/srv/model" >/dev/null ||
    { echo "gen failed"; exit 1; }
printf '{"drop": {"1": [0, 1, 5], "2": [2, 3, 9], "3": [14, 15, 7]}}' >"$WORK/drop.json"
printf '{"drop": {"1": [0, 1, 6], "2": [2, 3, 9], "3": [14, 15, 7]}}' >"$WORK/other.json"
"$BIN" splice "$WORK/srv/model-00001-of-00002.gguf" --keeplist "$WORK/drop.json" -o "$WORK/local" --split-count 1 -q >/dev/null ||
    { echo "local splice failed"; exit 1; }
# One connection and one output file, paced by the server, so that a kill lands where it is aimed.
export GGUF_REAP_HTTP_CONNECTIONS=1
start_server "$WORK/srv"
M=$URL/model-00001-of-00002.gguf
SPLICE=("$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/r" --split-count 1 --json)

case_ "a whole run, for reference"
run "${SPLICE[@]}"
expect_code 0
WHOLE=$(/usr/bin/python3 -c "import json; print(json.load(open('$OUT'))['bytes_fetched'])")
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "differs from the local splice"
[ ! -e "$WORK/.r.gguf-reap-resume.json" ] && _pass || _fail "a finished run left its journal"
rm -f "$WORK/r.gguf"

# kill_at FRACTION [SIGNAL]: starts the splice and SIGKILLs it (or sends SIGNAL) once the server has sent FRACTION of WHOLE; KILLED
# is what it had sent by then, KILL_CODE its exit status, and $WORK/kill.err its stderr.
kill_at() {
    fault '{"delay_ms": 300}'
    clear_log
    "${SPLICE[@]}" >/dev/null 2>"$WORK/kill.err" &
    local pid=$!
    /usr/bin/python3 - "$SLOG" "$(/usr/bin/python3 -c "print(int($WHOLE * $1))")" <<'PY'
import json, sys, time
for _ in range(3000):
    if sum(json.loads(l)["sent"] for l in open(sys.argv[1])) >= int(sys.argv[2]):
        break
    time.sleep(0.005)
PY
    kill -"${2:-9}" $pid 2>/dev/null
    KILL_CODE=0
    wait $pid 2>/dev/null || KILL_CODE=$?
    KILLED=$(served_bytes)
    no_fault
}

case_ "SIGKILL at 40 %: no output under its name; the same command resumes"
kill_at 0.4
/usr/bin/python3 -c "import sys; sys.exit(0 if $KILLED <= 0.45 * $WHOLE else 1)" && _pass ||
    _fail "the kill landed at $KILLED of $WHOLE bytes, not near 40 %"
[ ! -e "$WORK/r.gguf" ] && _pass || _fail "an output exists under its final name after the kill"
[ -e "$WORK/.r.gguf-reap-resume.json" ] && _pass || _fail "no journal after the kill"
run "${SPLICE[@]}"
expect_code 0
expect_err "resuming an interrupted run: "
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "the resumed output differs from the local splice"
expect_json "d['bytes_fetched'] <= 0.7 * $WHOLE and d['resumed_bytes'] > 0"
[ ! -e "$WORK/.r.gguf.gguf-reap-partial" ] && [ ! -e "$WORK/.r.gguf-reap-resume.json" ] && _pass ||
    _fail "the partial file or the journal is left after the resumed run"
rm -f "$WORK/r.gguf"

case_ "SIGTERM (as Ctrl-C): exit 130, the partial file and the journal kept, the next run resumes"
kill_at 0.3 TERM
[ "$KILL_CODE" -eq 130 ] && _pass || _fail "exit $KILL_CODE after SIGTERM, expected 130; stderr: $(grep -v ': info: ' "$WORK/kill.err" | head -n 3)"
[ ! -e "$WORK/r.gguf" ] && [ -e "$WORK/.r.gguf.gguf-reap-partial" ] && [ -e "$WORK/.r.gguf-reap-resume.json" ] && _pass ||
    _fail "after SIGTERM: an output under its name, or no partial file or journal: $(ls -a "$WORK" | tr "\n" " ")"
run "${SPLICE[@]}"
expect_code 0
expect_err "resuming an interrupted run: "
expect_json "d['resumed_bytes'] > 0"
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "the resumed output differs from the local splice"
rm -f "$WORK/r.gguf"

case_ "another keeplist starts over and says why"
kill_at 0.3
run "$BIN" splice "$M" --keeplist "$WORK/other.json" -o "$WORK/r" --split-count 1 --json
expect_code 0
expect_err "starting over: an interrupted run left a partial output, but the keeplist is not the one it was made with"
expect_json "d['resumed_bytes'] == 0"
rm -f "$WORK/r.gguf"

case_ "a source that changed on the server starts over"
kill_at 0.3
touch -d '2001-01-01' "$WORK/srv/model-00002-of-00002.gguf"
run "${SPLICE[@]}"
expect_code 0
expect_err "model-00002-of-00002.gguf changed on the server (ETag "
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "differs from the local splice"
rm -f "$WORK/r.gguf"

case_ "--no-resume starts over"
kill_at 0.3
run "${SPLICE[@]}" --no-resume
expect_code 0
expect_err "starting over (--no-resume)"
expect_json "d['resumed_bytes'] == 0 and d['bytes_fetched'] >= 0.95 * $WHOLE"
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "differs from the local splice"

finish
