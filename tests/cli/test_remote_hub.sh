# hf:// paths and the Hub's token (issue 34, docs/remote.md "Credentials"), against the test server in
# the Hub's layout: /ORG/REPO/resolve/REV/PATH with X-Repo-Commit, a 302 to a CDN on another host name
# (localhost, where the endpoint is 127.0.0.1), and a token required on the endpoint.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

mkdir -p "$WORK/srv/org/repo/q8"
"$GEN" model --skeleton --preset tiny --shards 3 -o "$WORK/srv/org/repo/q8/model" >/dev/null || { echo "gen failed"; exit 1; }
printf '{"drop": {"1": [0, 1], "2": [2, 3], "3": [14, 15]}}' >"$WORK/drop.json"
"$BIN" splice "$WORK/srv/org/repo/q8/model-00002-of-00003.gguf" --keeplist "$WORK/drop.json" -o "$WORK/local" -q >/dev/null ||
    { echo "local splice failed"; exit 1; }
SECRET=hf_test_secret_4b1d
COMMIT=0123456789abcdef0123456789abcdef01234567
start_server "$WORK/srv" --require-token "$SECRET" --cdn-host localhost --hub-commit "$COMMIT"
export HF_ENDPOINT=$URL HF_HOME=$WORK/hf-home GGUF_REAP_HTTP_BACKOFF_MS=20
unset HF_TOKEN HF_TOKEN_PATH XDG_CACHE_HOME
mkdir -p "$HF_HOME"
H=hf://org/repo/q8/model-00002-of-00003.gguf
# py CODE: Python with `rows`, the requests logged since clear_log, once the server has logged every
# request of the runs so far.
py() { settle && /usr/bin/python3 -c "import json, sys; rows = [json.loads(l) for l in open('$SLOG')]; $1"; }

case_ "no token: exit 2, one line saying how to give one"
run "$BIN" inspect "$H"
expect_code 2
expect_err "gguf-reap: error: $H: access refused (HTTP 401, no token given): give a token with access: set HF_TOKEN"
expect_err "$HF_HOME/token"
expect_err_lines 1

case_ "a token without access: 403, exit 2"
HF_TOKEN=hf_wrong run "$BIN" inspect "$H"
expect_code 2
expect_err "access refused (HTTP 403, with the token given)"
grep -qF hf_wrong "$ERR" && _fail "the token was printed" || _pass

case_ "HF_TOKEN: the endpoint sees it, the CDN it redirects to never does"
clear_log
HF_TOKEN=$SECRET run "$BIN" inspect --json "$H"
expect_code 0
expect_json "len(d['shards']) == 3 and d['expert_count'] == 16"
py "
hub = [r for r in rows if r['host'].startswith('127.0.0.1:')]
cdn = [r for r in rows if r['host'].startswith('localhost:')]
assert hub and cdn, rows
assert all(r['auth'] == 'Bearer $SECRET' for r in hub), hub
assert all(r['auth'] is None for r in cdn), cdn
assert all(r['status'] == 302 for r in hub), hub
" && _pass || _fail "the token went where it must not, or not where it must"

case_ "the revision is pinned once from X-Repo-Commit: every later request names the commit"
py "
hub = [r['path'] for r in rows if r['host'].startswith('127.0.0.1:')]
assert hub[0] == '/org/repo/resolve/main/q8/model-00002-of-00003.gguf', hub
assert all('/resolve/$COMMIT/' in p for p in hub[1:]) and len(hub) >= 4, hub
" && _pass || _fail "a request after the first named the branch"

case_ "the token file of the Hub's clients"
printf '%s\n' "$SECRET" >"$HF_HOME/token"
run "$BIN" inspect "$H"
expect_code 0
case_ "a URL on another origin never gets the token"
clear_log
run "$BIN" inspect "http://localhost:$PORT/org/repo/resolve/main/q8/model-00002-of-00003.gguf"
expect_code 2
expect_err "access refused (HTTP 401, no token given)"
py "assert rows and all(r['auth'] is None for r in rows), rows" && _pass || _fail "the token went to localhost"

case_ "splice from hf://: the local splice's bytes, and the token nowhere in what it wrote or said"
run "$BIN" splice "$H" --keeplist "$WORK/drop.json" -o "$WORK/h" --json
expect_code 0
for i in 1 2 3; do cmp -s "$WORK/local-0000$i-of-00003.gguf" "$WORK/h-0000$i-of-00003.gguf" && _pass || _fail "shard $i differs"; done
grep -qF "$SECRET" "$OUT" "$ERR" "$WORK"/h-0000* && _fail "the token is in an output" || _pass
expect_json "d['bytes_fetched'] > 0 and d['source_revision'] == 'org/repo@$COMMIT'"
run "$BIN" splice "$H" --keeplist "$WORK/drop.json" -o "$WORK/h-table" --dry-run
expect_code 0
expect_out "revision org/repo@$COMMIT (the Hub revision pinned when the source was read)"
run "$BIN" audit "$WORK/h-00001-of-00003.gguf" --source "$H" --keeplist "$WORK/drop.json" --json
expect_code 0
grep -qF "$SECRET" "$OUT" "$ERR" && _fail "the token is in audit's report" || _pass

case_ "rank --model, plan-width --model, splice, audit and card from hf://: the card records ORG/REPO@COMMIT"
"$GEN" imatrix --model "$WORK/srv/org/repo/q8/model-00001-of-00003.gguf" -o "$WORK/im.gguf" >/dev/null
run "$BIN" rank --model "$H" --imatrix wiki="$WORK/im.gguf" --prune 2 -o "$WORK/rank"
expect_code 0
run "$BIN" plan-width --model "$H" --imatrix wiki="$WORK/im.gguf" --k 32 -o "$WORK/plan.npz"
expect_code 0
run "$BIN" splice "$H" --keeplist "$WORK/rank/keeplist.json" -o "$WORK/c" -q
expect_code 0
run "$BIN" audit "$WORK/c-00001-of-00003.gguf" --source "$H" --keeplist "$WORK/rank/keeplist.json" --json
expect_code 0
cp "$OUT" "$WORK/audit.json"
run "$BIN" card "$WORK/c-00001-of-00003.gguf" --source "$H" --rank "$WORK/rank" --audit "$WORK/audit.json" --json
expect_code 0
expect_json "d['source_revision'] == 'org/repo@$COMMIT' and d['base_model'] == 'org/repo' and d['base_model_from'] == 'the hf:// source'"
run "$BIN" card "$WORK/c-00001-of-00003.gguf" --source "$H" --rank "$WORK/rank" --audit "$WORK/audit.json"
expect_code 0
expect_out "Pruned from \`org/repo@$COMMIT\` (the Hub revision pinned when the source was read)."
grep -qF "$SECRET" "$OUT" "$WORK/rank"/* && _fail "the token is in the card or rank's outputs" || _pass

# The CDN URL remembered from the pin (a signed URL) has expired when the ranges are asked: its answer
# sends gguf-reap back to the origin once, which hands out a URL that works; the next ranges use that one.
for status in 401 403 404 410; do
    case_ "a remembered redirect target that answers $status is walked again from the origin"
    fault '{"expire": '$status'}'
    clear_log
    HF_TOKEN=$SECRET run "$BIN" inspect --json "$H"
    expect_code 0
    expect_json "len(d['shards']) == 3 and d['expert_count'] == 16"
    py "
expired = [r for r in rows if r['status'] == $status]
assert len(expired) == 3 and all(r['path'].endswith('?sig=head') for r in expired), expired
for e in expired:
    cdn = e['path'].split('?')[0]
    name = cdn.split('/')[-1]
    later = [r for r in rows if r['arrived'] > e['arrived']]
    assert any(r['host'].startswith('127.0.0.1:') and r['method'] == 'GET' and r['status'] == 302 and
               r['path'].endswith('/$COMMIT/q8/' + name) for r in later), ('no walk from the origin', e)
    assert any(r['path'] == cdn + '?sig=get' and r['range'] == e['range'] and r['status'] == 206
               for r in later), ('the range was not fetched from the new URL', e)
" && _pass || _fail "HTTP $status from the remembered CDN URL was not walked again from the origin"
done
case_ "after a walk from the origin, the new target is remembered: one expired answer per shard"
fault '{"expire": 404}'
clear_log
HF_TOKEN=$SECRET GGUF_REAP_HTTP_CONNECTIONS=1 run "$BIN" splice "$H" --keeplist "$WORK/drop.json" -o "$WORK/e" --json
expect_code 0
for i in 1 2 3; do cmp -s "$WORK/local-0000$i-of-00003.gguf" "$WORK/e-0000$i-of-00003.gguf" && _pass || _fail "shard $i differs"; done
py "
expired = [r['path'] for r in rows if r['status'] == 404]
got = [r for r in rows if r['host'].startswith('localhost:') and r['status'] == 206]
assert sorted(expired) == ['/cdn/org/repo/q8/model-0000%d-of-00003.gguf?sig=head' % i for i in (1, 2, 3)], expired
assert len(got) > 3 and all(r['path'].endswith('?sig=get') for r in got), got
" && _pass || _fail "the expired URL was asked again after the walk from the origin"
no_fault

case_ "an explicit revision: the commit works, an unknown one is 404"
run "$BIN" inspect "$H@$COMMIT"
expect_code 0
run "$BIN" inspect "$H@nope"
expect_code 2
expect_err "$H@nope: not found (HTTP 404)"
run "$BIN" inspect "hf://org/q8.gguf"
expect_code 2
expect_err "hf://org/q8.gguf: a Hub path is hf://ORG/REPO/PATH[@REVISION]"

finish
