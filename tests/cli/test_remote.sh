# Models read over HTTP (issue 34, docs/remote.md), from the test server tests/remote/http_server.py on
# 127.0.0.1: inspect and estimate fetch headers only; splice and audit --source from a URL give the
# local splice's bytes and fetch little more than they keep; every fault the server can make is
# retried or refused as docs/remote.md says.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

# A 3-shard model of 7.3 MiB shards with 139 KiB expert slabs; its headers are a few KiB.
mkdir -p "$WORK/srv"
"$GEN" model --skeleton --preset tiny --embd 256 --expert-ff 512 --shards 3 -o "$WORK/srv/model" >/dev/null ||
    { echo "gen failed"; exit 1; }
LOCAL=$WORK/srv/model-00001-of-00003.gguf
printf '{"drop": {"1": [0, 1, 5], "2": [2, 3, 9], "3": [14, 15, 7]}}' >"$WORK/drop.json"
"$BIN" splice "$LOCAL" --keeplist "$WORK/drop.json" -o "$WORK/local" -q >/dev/null || { echo "local splice failed"; exit 1; }
export GGUF_REAP_HTTP_BACKOFF_MS=20 GGUF_REAP_HTTP_RETRIES=3
start_server "$WORK/srv" --hold-cap 30
M=$URL/model-00002-of-00003.gguf
# py CODE: Python with json and sys, once the server has logged every request of the runs so far.
py() { settle && /usr/bin/python3 -c "import json, sys; $1"; }
# same_as_local PREFIX: PREFIX's three shards are byte for byte the local splice's.
same_as_local() {
    local i ok=0
    for i in 1 2 3; do cmp -s "$WORK/local-0000$i-of-00003.gguf" "$1-0000$i-of-00003.gguf" || ok=1; done
    [ $ok -eq 0 ] && _pass || _fail "$1 differs from the local splice"
}

case_ "inspect on a URL: the whole set from one shard's URL, headers only"
clear_log
run "$BIN" inspect --json "$M"
expect_code 0
expect_json "d['expert_count'] == 16 and len(d['shards']) == 3 and d['tensor_count'] == 51"
py "
rows = [json.loads(l) for l in open('$SLOG')]
per = {}
for r in rows: per[r['path']] = per.get(r['path'], 0) + r['sent']
assert len(per) == 3 and all(v <= 4 << 20 for v in per.values()), per
assert all(r['method'] == 'HEAD' or r['status'] == 206 for r in rows), rows
" && _pass || _fail "inspect fetched more than 4 MiB of a shard, or not by ranges"
run "$BIN" inspect --json "$LOCAL"
cp "$OUT" "$WORK/inspect.local.json"
run "$BIN" inspect --json "$M"
py "
a = json.load(open('$WORK/inspect.local.json')); b = json.load(open('$OUT'))
strip = lambda d: {k: v for k, v in d.items() if k not in ('path', 'shards', 'model')}
assert strip(a) == strip(b)
" && _pass || _fail "inspect of the URL says something else than inspect of the file"

case_ "estimate --fit and --sweep on a URL"
clear_log
run "$BIN" estimate "$M" --fit size=15M --json
expect_code 0
expect_json "d['fit']['k'] == 9"
[ "$(served_bytes)" -le $((3 * 4 << 20)) ] && _pass || _fail "estimate fetched $(served_bytes) bytes"
run "$BIN" estimate "$M" --sweep
expect_code 0
expect_out "19,215,104"

case_ "splice from a URL: the local splice's bytes, fetching at most 1.10x what it writes"
clear_log
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/r" --json
expect_code 0
same_as_local "$WORK/r"
SENT=$(served_bytes)
# What the server sent is what splice counts as fetched, plus at most one read-ahead request (4 MiB) that
# was stopped when splice had what it needed (seen on a loaded machine: 256 KiB more sent than counted).
expect_json "d['bytes_fetched'] <= $SENT <= d['bytes_fetched'] + (4 << 20) and d['bytes_fetched'] <= 1.10 * d['bytes_written'] and d['http_requests'] > 3"
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/r" --force
expect_code 0
expect_out "fetched  "
expect_out "HTTP requests"

case_ "audit --source a URL passes, with a manifest"
run "$BIN" audit "$WORK/r-00001-of-00003.gguf" --source "$M" --keeplist "$WORK/drop.json"
expect_code 0
expect_out "PASS: 3 shard(s)"

case_ "transient faults are retried: 500, 429 with Retry-After, a body cut short, a stalled answer"
for f in '{"status": 500, "count": 2}' '{"status": 429, "count": 1, "retry_after": 2}' '{"cut": 3}' '{"status": 503, "count": 1}'; do
    fault "$f"
    clear_log
    run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/f" --force --json
    CASE="fault $f" expect_code 0
    CASE="fault $f" same_as_local "$WORK/f"
    CASE="fault $f" expect_json "d['http_retries'] >= 1"
    settle && cp "$SLOG" "$WORK/log.$(echo "$f" | tr -dc 'a-z0-9')"
done
# Retry-After is honoured, not merely a retry counted: the server's clock says the 429'd range was asked
# again no sooner than 2 s after the 429 (the backoff alone would have waited 20 ms). A lower bound only:
# however slow the machine, a retry cannot come early.
py "
rows = [json.loads(l) for l in open('$WORK/log.status429count1retryafter2')]
first = [r for r in rows if r['status'] == 429]
assert len(first) == 1, first
f = first[0]
again = [r['arrived'] - f['arrived'] for r in rows
         if r['path'] == f['path'] and r['range'] == f['range'] and r['arrived'] > f['arrived']]
assert again and min(again) >= 2.0, (f, again)
" && _pass || _fail "the 429's range was asked again before its Retry-After of 2 s"

# The stall timeout: an answer that does not come, and a body that stops halfway. The server holds each
# until gguf-reap hangs up (it gives up after 30 s and then answers: without the timeout, a slow success
# with no retry). GGUF_REAP_HTTP_TIMEOUT=1: a second without a byte is a stall.
for f in '{"stall": 1}' '{"stall_mid": 1}'; do
    fault "$f"
    clear_log
    GGUF_REAP_HTTP_TIMEOUT=1 run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/f" --force --json
    CASE="$f" expect_code 0
    CASE="$f" same_as_local "$WORK/f"
    CASE="$f" expect_json "d['http_retries'] >= 1"
    # The stalled request was given up by gguf-reap, and the rest of its range asked again.
    py "
rows = [json.loads(l) for l in open('$SLOG')]
st = [r for r in rows if r.get('stalled')]
assert len(st) == 1, st
s = st[0]
a, b = map(int, s['range'][6:].split('-'))
rest = 'bytes=%d-%d' % (a + s['sent'], b)
assert any(r['path'] == s['path'] and r['range'] == rest and r['status'] == 206 for r in rows), (s, rest)
" && _pass || CASE="$f" _fail "the stalled request was not given up and the rest of it asked again"
done
# A cut body resumes at its byte: each cut request is followed by one for the rest of its range, and no
# range is asked twice from its start (the server's log, not a byte count that read-ahead timing moves).
fault '{"cut": 2}'
clear_log
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/f" --force --json
CASE="resume at the byte" expect_code 0
CASE="resume at the byte" same_as_local "$WORK/f"
py "
rows = [json.loads(l) for l in open('$SLOG')]
cut = [r for r in rows if r.get('cut')]
assert len(cut) == 2, cut
for c in cut:
    a, b = map(int, c['range'][6:].split('-'))
    assert 0 < c['sent'] < b - a + 1, c
    rest = 'bytes=%d-%d' % (a + c['sent'], b)
    assert any(r['path'] == c['path'] and r['range'] == rest and r['status'] == 206 for r in rows), (c, rest)
    assert [r for r in rows if r['path'] == c['path'] and r['range'] == c['range']] == [c], c
" && CASE="resume at the byte" _pass || CASE="resume at the byte" _fail "a cut range was not resumed at its byte"
no_fault

case_ "refusals: a changed ETag, a wrong Content-Range or Content-Length, 200 for a range: exit 3, no output"
rm -f "$WORK"/x-*
fault '{"etag_after": 4}'
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/x"
expect_code 3
expect_err "changed on the server while gguf-reap was reading it: ETag "
expect_err_lines 1
fault '{"wrong_range": 1}'
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/x"
expect_code 3
expect_err "the server answered Content-Range 'bytes "
# A 206 with the right Content-Range but a Content-Length one byte short (it sends that many) or long.
for delta in -1 1; do
    fault '{"wrong_length": 1, "length_delta": '$delta'}'
    run "$BIN" inspect "$M"
    CASE="Content-Length $delta" expect_code 3
    CASE="Content-Length $delta" expect_err "$M: asked for 262144 bytes, the server announced Content-Length $((262144 + delta))"
    CASE="Content-Length $delta" expect_err_lines 1
done
fault '{"full200": true}'
run "$BIN" inspect "$M"
expect_code 3
expect_err "the server answered 200 with the whole file"
expect_err "$URL/model-00002-of-00003.gguf"
ls "$WORK"/x-* >/dev/null 2>&1 && _fail "an output exists after a refusal" || _pass
fault '{"status": 500, "count": 1000}'
run "$BIN" inspect "$M"
expect_code 3
expect_err "$M: gave up after 4 attempts: HTTP 500"
no_fault

case_ "a source that changed where only the end-of-run HEAD sees it (ETag, size): exit 3, no output"
# Every GET answers as at the start; each shard's second HEAD (splice's and audit's check before their
# result) shows another ETag, or one more byte.
# The message names the first shard: every shard is asked at once, and the first in shard order reported.
S1=$WORK/srv/model-00001-of-00003.gguf
ETAG1=$(/usr/bin/python3 -c 'import os, sys; st = os.stat(sys.argv[1]); print("\"%x-%x\"" % (st.st_size, st.st_mtime_ns))' "$S1")
SIZE1=$(stat -c %s "$S1")
declare -A CHANGED=([etag]="its ETag went from $ETAG1 to \"changed-$(printf %x "$SIZE1")\""
    [size]="its size went from $SIZE1 to $((SIZE1 + 1)) bytes")
for what in etag size; do
    WANT="gguf-reap: error: $URL/model-00001-of-00003.gguf: changed on the server while gguf-reap was reading it (${CHANGED[$what]}); nothing made from it is kept: run again"
    rm -f "$WORK"/x-* "$WORK"/.x-* "$WORK"/.x.gguf-reap-*
    fault '{"head_change": "'$what'"}'
    clear_log
    run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/x"
    CASE="splice, $what" expect_code 3
    CASE="splice, $what" expect_err "$WANT"
    CASE="splice, $what" expect_err_lines 1
    ls "$WORK"/x-* >/dev/null 2>&1 && CASE="splice, $what" _fail "an output exists under its final name" ||
        _pass
    py "
rows = [json.loads(l) for l in open('$SLOG')]
heads = [r['path'] for r in rows if r['method'] == 'HEAD']
assert sorted(heads) == sorted(['/model-0000%d-of-00003.gguf' % i for i in (1, 2, 3)] * 2), heads
" && _pass || CASE="splice, $what" _fail "not one HEAD per shard at the start and one at the end"
    fault '{"head_change": "'$what'"}'
    run "$BIN" audit "$WORK/r-00001-of-00003.gguf" --source "$M" --keeplist "$WORK/drop.json"
    CASE="audit, $what" expect_code 3
    CASE="audit, $what" expect_err "$WANT"
    CASE="audit, $what" expect_err_lines 1
    grep -q PASS "$OUT" && CASE="audit, $what" _fail "audit gave a verdict" || _pass
done
no_fault
rm -f "$WORK"/.x-* "$WORK"/.x.gguf-reap-*

case_ "404: exit 2 naming the URL; a missing sibling is a missing shard"
run "$BIN" inspect "$URL/nothing-here.gguf"
expect_code 2
expect_err "gguf-reap: error: $URL/nothing-here.gguf: not found (HTTP 404)"
mkdir -p "$WORK/srv/part"
cp "$WORK/srv/model-00001-of-00003.gguf" "$WORK/srv/part/"
run "$BIN" inspect "$URL/part/model-00001-of-00003.gguf"
expect_code 2
expect_err "$URL/part/model-00002-of-00003.gguf: shard: missing shard 2 of 3"

case_ "every shard of a URL's set is pinned once; a wrong name stops the requests for its siblings"
clear_log
run "$BIN" inspect "$M"
expect_code 0
py "
rows = [json.loads(l) for l in open('$SLOG')]
heads = [r['path'] for r in rows if r['method'] == 'HEAD']
assert sorted(heads) == ['/model-0000%d-of-00003.gguf' % i for i in (1, 2, 3)], heads
" && _pass || _fail "each shard was not pinned once"
# A name that says 999 shards for a file of 3: refused as for a file, without asking for 998 siblings.
mkdir -p "$WORK/srv/many"
cp "$WORK/srv/model-00002-of-00003.gguf" "$WORK/srv/many/model-00002-of-00999.gguf"
clear_log
run "$BIN" inspect "$URL/many/model-00002-of-00999.gguf"
expect_code 2
expect_err "split.count is 3 but the file name says -of-00999"
py "
rows = [json.loads(l) for l in open('$SLOG')]
assert len(rows) < 100, len(rows)
" && _pass || _fail "the siblings of a wrong name were all asked for"

case_ "a refused connection being retried says so at least every 10 s: the attempt, the reason, the next try"
# The server's port once it is stopped: nothing listens there, every connect is refused at once. One
# retry after 12 s: silent, that is 12 s without a word.
stop_server
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done; }
T0=$(date +%s.%N)
GGUF_REAP_HTTP_RETRIES=1 GGUF_REAP_HTTP_BACKOFF_MS=12000 "$BIN" inspect "$M" 2>&1 >/dev/null | stamp >"$WORK/stamped"
CODE=${PIPESTATUS[0]}
T1=$(date +%s.%N)
expect_code 3
/usr/bin/python3 - "$WORK/stamped" "$T0" "$T1" "$M" <<'PY' && _pass || _fail "retry notices: $(cat "$WORK/stamped")"
import re, sys
rows = [l.rstrip("\n").split(" ", 1) for l in open(sys.argv[1])]
t0, t1, url = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
times = [t0] + [float(t) for t, _ in rows] + [t1]
gaps = [b - a for a, b in zip(times, times[1:])]
assert max(gaps) <= 10.5, gaps
said = [m for _, m in rows]
assert re.fullmatch(re.escape(f"gguf-reap: warning: {url}: attempt 1 of 2 failed: ") + r".*[Cc]onnect.*; next try in 1[12]\.\d s", said[0]), said
assert re.fullmatch(re.escape(f"gguf-reap: warning: {url}: still waiting to retry (attempt 1 of 2 failed: ") + r".*\); next try in [12]\.\d s", said[1]), said
assert said[-1].startswith(f"gguf-reap: error: {url}: gave up after 2 attempts: "), said
assert len(said) == 3, said
PY

finish
