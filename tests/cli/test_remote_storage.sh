# The Hub's storage as it is (issue 41, item 4; docs/remote.md), against the test server in the Hub's
# layout with a CDN that sends no ETag (--cdn-no-etag) and refuses a GET of a file without a Range header
# (--ranges-only): every command reads by ranges only; a signed CDN URL that expires mid-run is walked
# again from the origin and the splice is byte-identical; the pin is the Hub's X-Linked-Etag and
# X-Linked-Size, whose change is refused as a changed source; the Hub's lfs.oid is each source shard's
# identity in splice --json and in the card.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

R=$WORK/srv/org/repo
mkdir -p "$R/Q8_0"
"$GEN" model --skeleton --preset tiny --shards 3 -o "$R/Q8_0/tiny-Q8_0" >/dev/null || { echo "gen failed"; exit 1; }
printf '{"drop": {"1": [0, 1], "2": [2, 3], "3": [14, 15]}}' >"$WORK/drop.json"
"$BIN" splice "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf" --keeplist "$WORK/drop.json" -o "$WORK/local" -q >/dev/null ||
    { echo "local splice failed"; exit 1; }
COMMIT=89abcdef0123456789abcdef0123456789abcdef
start_server "$WORK/srv" --cdn-host localhost --hub-commit "$COMMIT" --cdn-no-etag --ranges-only
export HF_ENDPOINT=$URL HF_HOME=$WORK/hf-home GGUF_REAP_HTTP_BACKOFF_MS=20
unset HF_TOKEN HF_TOKEN_PATH XDG_CACHE_HOME
M=hf://org/repo:Q8_0
S1=hf://org/repo/Q8_0/tiny-Q8_0-00001-of-00003.gguf@$COMMIT
py() { settle && /usr/bin/python3 -c "import json, sys; rows = [json.loads(l) for l in open('$SLOG')]; $1"; }
same() { # same PREFIX: the three shards of PREFIX are the local splice's
    local i
    for i in 1 2 3; do
        cmp -s "$WORK/local-0000$i-of-00003.gguf" "$1-0000$i-of-00003.gguf" && _pass || _fail "$1: shard $i differs"
    done
}
SHAS=$(cd "$R/Q8_0" && sha256sum tiny-Q8_0-0000?-of-00003.gguf | awk '{printf "%s\"%s\"", (NR > 1 ? ", " : ""), $1}')
LINKED1=\"$(sha256sum "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf" | cut -d' ' -f1)\"

case_ "inspect, estimate, splice and audit --source read files by ranges only (a whole-file GET is answered 400)"
clear_log
run "$BIN" inspect --json "$M"
expect_code 0
run "$BIN" estimate "$M" --fit size=1MB --json
expect_code 0
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/h" --json
expect_code 0
same "$WORK/h"
cp "$OUT" "$WORK/splice.json"
run "$BIN" audit "$WORK/h-00001-of-00003.gguf" --source "$M" --keeplist "$WORK/drop.json" --json
expect_code 0
cp "$OUT" "$WORK/audit.json"
py "
files = [r for r in rows if r['method'] == 'GET' and not r['path'].startswith('/api/')]
assert len(files) > 20 and all(r['range'] for r in files), [r for r in files if not r['range']]
assert not any(r['status'] == 400 for r in rows), rows
" && _pass || _fail "a GET of a file had no Range header"

case_ "splice --json: each source shard's path at the commit, its size and the Hub's lfs.oid"
/usr/bin/python3 - "$WORK/splice.json" "$R/Q8_0" "$COMMIT" <<PY && _pass || _fail "source_shards is not the Hub's record: $(cat "$WORK/splice.json")"
import json, os, sys
d = json.load(open(sys.argv[1]))
want = [{"path": "hf://org/repo/Q8_0/tiny-Q8_0-0000%d-of-00003.gguf@%s" % (i, sys.argv[3]),
         "bytes": os.path.getsize(os.path.join(sys.argv[2], "tiny-Q8_0-0000%d-of-00003.gguf" % i)),
         "sha256": s} for i, s in zip((1, 2, 3), [$SHAS])]
assert d["source_shards"] == want, d["source_shards"]
PY
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/dry" --dry-run
expect_code 0
expect_out "source   $S1 sha256 $(sha256sum "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf" | cut -d' ' -f1) (the Hub's lfs.oid)"

case_ "the card records each source shard's lfs.oid as the source's identity"
"$GEN" imatrix --model "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf" -o "$WORK/im.gguf" >/dev/null
"$BIN" rank --model "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf" --imatrix wiki="$WORK/im.gguf" --prune 2 -o "$WORK/rank" \
    >/dev/null 2>&1 || { echo "rank failed"; exit 1; }
"$BIN" splice "$M" --keeplist "$WORK/rank/keeplist.json" -o "$WORK/c" -q >/dev/null || { echo "splice failed"; exit 1; }
"$BIN" audit "$WORK/c-00001-of-00003.gguf" --source "$M" --keeplist "$WORK/rank/keeplist.json" --json >"$WORK/c-audit.json" ||
    { echo "audit failed"; exit 1; }
run "$BIN" card "$WORK/c-00001-of-00003.gguf" --source "$M" --rank "$WORK/rank" --audit "$WORK/c-audit.json" --json
expect_code 0
expect_json "[f['sha256'] for f in d['source_files']] == [$SHAS] and d['source_files'][0]['path'] == '$S1'"
run "$BIN" card "$WORK/c-00001-of-00003.gguf" --source "$M" --rank "$WORK/rank" --audit "$WORK/c-audit.json"
expect_code 0
expect_out "Source files, with the sha256 the Hub lists for each (its lfs.oid):"
expect_out "| \`$S1\` | $(stat -c %s "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta') | \`$(sha256sum "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf" | cut -d' ' -f1)\` |"

case_ "a local source: no source_shards to record"
run "$BIN" splice "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf" --keeplist "$WORK/drop.json" -o "$WORK/l2" --json
expect_code 0
expect_json "'source_shards' not in d"

# A signed CDN URL serves two ranged GETs, then answers 403, as the Hub's expire after a while: each time,
# the chain is walked again from the origin, which hands out a fresh URL.
case_ "a signed URL that expires mid-run (403): walked again from the origin, the splice byte-identical"
fault '{"expire_after": 2}'
clear_log
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/x" --json
expect_code 0
same "$WORK/x"
py "
cdn = [r for r in rows if r['host'].startswith('localhost:') and r['method'] == 'GET']
expired = [r for r in cdn if r['status'] == 403]
assert len(expired) >= 3, cdn
for e in expired:
    url = e['path']
    assert any(r['path'] == url and r['status'] == 206 and r['arrived'] < e['arrived'] for r in cdn), ('not mid-run', e)
    name = url.split('?')[0].split('/')[-1]
    later = [r for r in rows if r['arrived'] > e['arrived']]
    assert any(r['host'].startswith('127.0.0.1:') and r['method'] == 'GET' and r['status'] == 302 and
               r['path'].endswith('/resolve/$COMMIT/Q8_0/' + name) for r in later), ('no walk from the origin', e)
" && _pass || _fail "no URL expired mid-run, or one was not walked again from the origin"
run "$BIN" audit "$WORK/x-00001-of-00003.gguf" --source "$M" --keeplist "$WORK/drop.json" --json
expect_code 0
expect_json "d['result'] == 'pass'"
no_fault

# The CDN sends no ETag: what pins the file is the X-Linked-Etag and X-Linked-Size of the Hub's redirect.
case_ "no ETag from the CDN: an X-Linked-Etag changed by the end of the run is refused (exit 3), nothing kept"
fault '{"linked_change": "etag"}'
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/y" --json
expect_code 3
expect_err "gguf-reap: error: $S1: changed on the server while gguf-reap was reading it (its X-Linked-Etag went from $LINKED1 to \"ffff"
expect_err "nothing made from it is kept: run again"
ls "$WORK"/y-0000?-of-00003.gguf >/dev/null 2>&1 && _fail "an output is under its final name" || _pass
fault '{"linked_change": "etag"}'  # again: the HEADs are counted anew, so audit pins the first answer
run "$BIN" audit "$WORK/h-00001-of-00003.gguf" --source "$M" --keeplist "$WORK/drop.json" --json
expect_code 3
expect_err "changed on the server while gguf-reap was reading it (its X-Linked-Etag went from"

case_ "no ETag from the CDN: an X-Linked-Size changed by the end of the run is refused (exit 3)"
fault '{"linked_change": "size"}'
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/y" --json
expect_code 3
expect_err "$S1: changed on the server while gguf-reap was reading it (its size went from $(stat -c %s "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf") to"
ls "$WORK"/y-0000?-of-00003.gguf >/dev/null 2>&1 && _fail "an output is under its final name" || _pass

case_ "a walk from the origin that names another X-Linked-Etag is refused there (exit 3)"
fault '{"expire_after": 2, "linked_change": "etag", "on": "GET"}'
clear_log
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/z" --json
expect_code 3
expect_err "changed on the server while gguf-reap was reading it (its X-Linked-Etag went from"
ls "$WORK"/z-0000?-of-00003.gguf >/dev/null 2>&1 && _fail "an output is under its final name" || _pass

case_ "a walk from the origin that names another X-Linked-Size is refused there (exit 3)"
fault '{"expire_after": 2, "linked_change": "size", "on": "GET"}'
run "$BIN" splice "$M" --keeplist "$WORK/drop.json" -o "$WORK/z" --json
expect_code 3
expect_err "changed on the server while gguf-reap was reading it (its size went from"
expect_err "bytes (X-Linked-Size)); nothing made from it is kept: run again"
ls "$WORK"/z-0000?-of-00003.gguf >/dev/null 2>&1 && _fail "an output is under its final name" || _pass
no_fault

finish
