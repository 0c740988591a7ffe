# Resume of a splice from a URL (issue 34, docs/splice.md "Resume"): killed with SIGKILL at 40 % of what a
# whole run fetches (the server holds it there), the same command continues, fetches at most 0.7x of a
# whole run and writes the local splice's bytes; a changed keeplist or source, --no-resume, or a partial
# file shorter than the journal says, starts over and says so.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

mkdir -p "$WORK/srv"
"$GEN" model --skeleton --preset tiny --embd 512 --expert-ff 1024 --shards 2 -o "$WORK/srv/model" >/dev/null ||
    { echo "gen failed"; exit 1; }
printf '{"drop": {"1": [0, 1, 5], "2": [2, 3, 9], "3": [14, 15, 7]}}' >"$WORK/drop.json"
printf '{"drop": {"1": [0, 1, 6], "2": [2, 3, 9], "3": [14, 15, 7]}}' >"$WORK/other.json"
"$BIN" splice "$WORK/srv/model-00001-of-00002.gguf" --keeplist "$WORK/drop.json" -o "$WORK/local" --split-count 1 -q >/dev/null ||
    { echo "local splice failed"; exit 1; }
# One connection and one output file, so that the server's byte count says how far the splice got.
export GGUF_REAP_HTTP_CONNECTIONS=1
start_server "$WORK/srv"
M=$URL/model-00001-of-00002.gguf
SPLICE=("$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/r" --split-count 1 --json)
JOURNAL=$WORK/.r.gguf-reap-resume.json
PARTIAL=$WORK/.r.gguf.gguf-reap-partial

case_ "a whole run, for reference"
run "${SPLICE[@]}"
expect_code 0
WHOLE=$(/usr/bin/python3 -c "import json; print(json.load(open('$OUT'))['bytes_fetched'])")
WRITTEN=$(/usr/bin/python3 -c "import json; print(json.load(open('$OUT'))['bytes_written'])")
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "differs from the local splice"
[ ! -e "$JOURNAL" ] && _pass || _fail "a finished run left its journal"
rm -f "$WORK/r.gguf"

# journal_done: the bytes the journal says are on the disk (0 without a journal).
journal_done() {
    /usr/bin/python3 -c "import json, sys
try: print(sum(f['done'] for f in json.load(open(sys.argv[1]))['files']))
except (OSError, ValueError): print(0)" "$JOURNAL"
}
# stopped_here MIN_DONE: the server holds a request (nothing more is sent) and the journal vouches for
# at least MIN_DONE bytes (the splice wrote what it had fetched before that request).
stopped_here() { log_has "any(r.get('held') for r in rows)" && [ "$(journal_done)" -ge "$1" ]; }

# kill_at FRACTION [SIGNAL]: starts the splice and SIGKILLs it (or sends SIGNAL) at a point made by the
# server, not by time: once it has sent FRACTION of WHOLE it holds every later request, and the kill
# comes when a request is held and the journal has caught up with what was fetched before it (within
# 10 % of the output: the journal is written every 1/64 of it). KILLED is what the server had sent by
# then, KILL_CODE the splice's exit status, and $WORK/kill.err its stderr.
kill_at() {
    fault '{"hold_after": '"$(/usr/bin/python3 -c "print(int($WHOLE * $1))")"'}'
    clear_log
    "${SPLICE[@]}" >/dev/null 2>"$WORK/kill.err" &
    local pid=$!
    wait_until stopped_here "$(/usr/bin/python3 -c "print(int($WRITTEN * ($1 - 0.1)))")" ||
        _fail "kill_at $1: no request held, or the journal at $(journal_done) of $WRITTEN bytes"
    kill -"${2:-9}" $pid 2>/dev/null
    KILL_CODE=0
    wait $pid 2>/dev/null || KILL_CODE=$?
    KILLED=$(served_bytes)
    no_fault
}

case_ "SIGKILL at 40 %: no output under its name; the same command resumes"
kill_at 0.4
# At 40 %, give or take the requests under way when it was reached (of at most 4 MiB: the pool's one
# connection and a reader that fetches for itself).
/usr/bin/python3 -c "import sys; sys.exit(0 if 0.4 * $WHOLE <= $KILLED <= 0.4 * $WHOLE + (8 << 20) else 1)" && _pass ||
    _fail "the kill landed at $KILLED of $WHOLE bytes, not near 40 %"
[ ! -e "$WORK/r.gguf" ] && _pass || _fail "an output exists under its final name after the kill"
[ -e "$JOURNAL" ] && _pass || _fail "no journal after the kill"
run "${SPLICE[@]}"
expect_code 0
expect_err "resuming an interrupted run: "
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "the resumed output differs from the local splice"
expect_json "d['bytes_fetched'] <= 0.7 * $WHOLE and d['resumed_bytes'] > 0"
[ ! -e "$PARTIAL" ] && [ ! -e "$JOURNAL" ] && _pass ||
    _fail "the partial file or the journal is left after the resumed run"
rm -f "$WORK/r.gguf"

case_ "SIGTERM (as Ctrl-C): exit 130, the partial file and the journal kept, the next run resumes"
kill_at 0.3 TERM
[ "$KILL_CODE" -eq 130 ] && _pass || _fail "exit $KILL_CODE after SIGTERM, expected 130; stderr: $(grep -v ': info: ' "$WORK/kill.err" | head -n 3)"
[ ! -e "$WORK/r.gguf" ] && [ -e "$PARTIAL" ] && [ -e "$JOURNAL" ] && _pass ||
    _fail "after SIGTERM: an output under its name, or no partial file or journal: $(ls -a "$WORK" | tr "\n" " ")"
run "${SPLICE[@]}"
expect_code 0
expect_err "resuming an interrupted run: "
expect_json "d['resumed_bytes'] > 0"
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "the resumed output differs from the local splice"
rm -f "$WORK/r.gguf"

case_ "a partial file shorter than the journal says: it starts over, and says how much it resumed (none)"
kill_at 0.4
DONE=$(journal_done)
[ "$DONE" -gt 0 ] && _pass || _fail "the journal vouches for no byte"
truncate -s $((DONE / 2)) "$PARTIAL"
run "${SPLICE[@]}"
expect_code 0
expect_err "resuming an interrupted run: 0 B of "
expect_json "d['resumed_bytes'] == 0 and d['bytes_fetched'] >= 0.95 * $WHOLE"
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "differs from the local splice"
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

case_ "-o spelled another way (relative, then absolute from another directory) resumes: the same output"
# Issue 40: "-o r" from $WORK interrupted, then "-o $WORK/r" from /: the same file, so the same plan.
mkdir -p "$WORK/rel"
ABS_BIN=$(realpath "$BIN")
SPLICE=("$ABS_BIN" splice "$M" --keeplist ../drop.json -o ../r --split-count 1 --json)
cd "$WORK/rel"
kill_at 0.4
cd /
SPLICE=("$ABS_BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/r" --split-count 1 --json)
[ -e "$PARTIAL" ] && [ -e "$JOURNAL" ] && _pass || _fail "no partial file or journal after the kill"
run "${SPLICE[@]}"
expect_code 0
expect_err "resuming an interrupted run: "
expect_json "d['resumed_bytes'] > 0 and d['bytes_fetched'] <= 0.7 * $WHOLE"
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "the resumed output differs from the local splice"
cd "$WORK"
rm -f "$WORK/r.gguf"

case_ "--no-resume starts over"
kill_at 0.3
run "${SPLICE[@]}" --no-resume
expect_code 0
expect_err "starting over (--no-resume)"
expect_json "d['resumed_bytes'] == 0 and d['bytes_fetched'] >= 0.95 * $WHOLE"
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "differs from the local splice"
rm -f "$WORK/r.gguf"

case_ "Ctrl-C (SIGINT): exit 130, nothing under a final name, the partial file and the journal kept; the rerun resumes"
# docs/remote.md: an interrupted splice from a URL leaves no output, but keeps what it wrote, by design.
kill_at 0.4 INT
[ "$KILL_CODE" -eq 130 ] && _pass || _fail "exit $KILL_CODE after SIGINT, expected 130"
[ ! -e "$WORK/r.gguf" ] && _pass || _fail "an output exists under its final name after Ctrl-C"
[ -s "$PARTIAL" ] && [ -e "$JOURNAL" ] && _pass || _fail "no partial file or no journal after Ctrl-C"
run "${SPLICE[@]}"
expect_code 0
expect_err "resuming an interrupted run: "
cmp -s "$WORK/local.gguf" "$WORK/r.gguf" && _pass || _fail "the resumed output differs from the local splice"

finish
