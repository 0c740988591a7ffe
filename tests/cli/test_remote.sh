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
start_server "$WORK/srv"
M=$URL/model-00002-of-00003.gguf
py() { /usr/bin/python3 -c "import json, sys; $1"; }
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
FETCHED=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["bytes_fetched"])' "$OUT")
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
for f in '{"status": 500, "count": 2}' '{"status": 429, "count": 1}' '{"cut": 3}' '{"status": 503, "count": 1}'; do
    fault "$f"
    clear_log
    run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/f" --force --json
    CASE="fault $f" expect_code 0
    CASE="fault $f" same_as_local "$WORK/f"
    CASE="fault $f" expect_json "d['http_retries'] >= 1"
done
fault '{"stall": 1, "stall_s": 3}'
GGUF_REAP_HTTP_TIMEOUT=1 run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/f" --force --json
CASE="stall" expect_code 0
CASE="stall" same_as_local "$WORK/f"
# A cut body resumes at its byte: the bytes fetched are those of a clean run, never a whole range twice.
fault '{"cut": 2}'
clear_log
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/f" --force --json
CASE="resume at the byte" expect_json "d['bytes_fetched'] == $FETCHED"
no_fault

case_ "refusals: a changed ETag, a wrong Content-Range, 200 for a range: exit 3, no output"
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

finish
