# hf://ORG/REPO:QUANT[@REVISION], as llama.cpp's -hf names a model (issue 41, docs/remote.md "A repository
# and a quant"), against the test server's Hub API: the revision to a commit (refs), the commit's files
# (tree), the quant matched without regard to case, a split set taken whole; no match and more than one
# refused with the candidates; every later request pinned to the commit.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

R=$WORK/srv/org/repo
mkdir -p "$R/Q8_0" "$R/Q6_K"
gen() { "$GEN" model --skeleton --preset tiny "$@" >/dev/null || { echo "gen $* failed"; exit 1; }; }
gen --shards 3 -o "$R/Q8_0/tiny-Q8_0"
gen --seed 7 -o "$R/tiny-Q4_K_M.gguf"
gen --seed 8 -o "$R/tiny-UD-Q4_K_M.gguf"
gen --seed 9 -o "$R/mmproj-Q8_0.gguf"      # a sidecar: never a candidate
gen --seed 10 -o "$R/tiny-imatrix.gguf"    # likewise
gen --seed 11 --shards 3 -o "$R/Q6_K/tiny-Q6_K"
rm "$R/Q6_K/tiny-Q6_K-00002-of-00003.gguf"  # a set the listing names only in part
printf '{"drop": {"1": [0, 1], "2": [2, 3], "3": [14, 15]}}' >"$WORK/drop.json"
"$BIN" splice "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf" --keeplist "$WORK/drop.json" -o "$WORK/local" -q >/dev/null ||
    { echo "local splice failed"; exit 1; }
SECRET=hf_test_secret_4b1d
COMMIT=89abcdef0123456789abcdef0123456789abcdef
start_server "$WORK/srv" --require-token "$SECRET" --cdn-host localhost --hub-commit "$COMMIT" --hub-branch dev \
    --ranges-only
export HF_ENDPOINT=$URL HF_HOME=$WORK/hf-home HF_TOKEN=$SECRET GGUF_REAP_HTTP_BACKOFF_MS=20
unset HF_TOKEN_PATH XDG_CACHE_HOME
FIRST=hf://org/repo/Q8_0/tiny-Q8_0-00001-of-00003.gguf@$COMMIT
py() { settle && /usr/bin/python3 -c "import json, sys; rows = [json.loads(l) for l in open('$SLOG')]; $1"; }

case_ "inspect hf://org/repo:q8_0: the Q8_0 set, whole, at the commit main names (the quant in any case)"
clear_log
run "$BIN" inspect --json hf://org/repo:q8_0
expect_code 0
expect_json "len(d['shards']) == 3 and d['expert_count'] == 16"
expect_json "d['shards'][0]['path'] == '$FIRST'"
py "
api = [r['path'] for r in rows if r['path'].startswith('/api/')]
assert api == ['/api/models/org/repo/refs', '/api/models/org/repo/tree/$COMMIT?recursive=true'], api
data = [r['path'] for r in rows if '/resolve/' in r['path']]
assert data and all('/resolve/$COMMIT/Q8_0/tiny-Q8_0-0000' in p for p in data), data
assert all(r['auth'] == 'Bearer $SECRET' for r in rows if r['path'].startswith('/api/')), rows
" && _pass || _fail "the refs and tree were not asked once each, or a request named the branch"

case_ "a 40-hex revision is the commit: no refs request"
clear_log
run "$BIN" inspect --json "hf://org/repo:Q8_0@$COMMIT"
expect_code 0
py "assert not any(r['path'].endswith('/refs') for r in rows), rows" && _pass || _fail "refs was asked"

case_ "another branch by name"
run "$BIN" inspect --json hf://org/repo:Q8_0@dev
expect_code 0
expect_json "d['shards'][0]['path'] == '$FIRST'"

case_ "a branch the repository lacks: exit 2, naming its branches and tags"
run "$BIN" inspect hf://org/repo:Q8_0@nosuch
expect_code 2
expect_err "gguf-reap: error: hf://org/repo:Q8_0@nosuch: org/repo has no branch or tag 'nosuch' (branches: main, dev; tags: none)"
expect_err_lines 1

case_ "a quant that two models hold: exit 2, listing both"
run "$BIN" inspect hf://org/repo:Q4_K_M
expect_code 2
expect_err "hf://org/repo:Q4_K_M: the quant 'Q4_K_M' matches 2 models: tiny-Q4_K_M.gguf ("
expect_err "; tiny-UD-Q4_K_M.gguf ("
expect_err "name one by a longer quant or by its path (hf://ORG/REPO/PATH)"
expect_err_lines 1

case_ "the longer quant picks one"
run "$BIN" inspect --json hf://org/repo:ud-q4_k_m
expect_code 0
expect_json "d['shards'][0]['path'] == 'hf://org/repo/tiny-UD-Q4_K_M.gguf@$COMMIT'"

case_ "no model holds the quant: exit 2, listing the models (not the sidecars)"
run "$BIN" inspect hf://org/repo:Q2_K
expect_code 2
expect_err "hf://org/repo:Q2_K: no .gguf model matches the quant 'Q2_K'; the models are: Q6_K/tiny-Q6_K-00001-of-00003.gguf (3 shards, "
expect_err "Q8_0/tiny-Q8_0-00001-of-00003.gguf (3 shards, "
grep -qE 'mmproj|imatrix' "$ERR" && _fail "a sidecar was listed: $(cat "$ERR")" || _pass
expect_err_lines 1

case_ "a quant only part of whose set is listed: exit 2, naming the missing shard"
run "$BIN" inspect hf://org/repo:Q6_K
expect_code 2
expect_err "hf://org/repo:Q6_K: the Hub lists no shard 2 of 3 of Q6_K/tiny-Q6_K-00001-of-00003.gguf"

case_ "a malformed quant or repository: exit 2, the form"
for bad in "hf://org/repo:" "hf://org/:Q8_0" "hf://org/repo:Q8 0" "hf://org/repo:Q8_0@"; do
    run "$BIN" inspect "$bad"
    expect_code 2
    expect_err "$bad: a repository and a quant are hf://ORG/REPO:QUANT[@REVISION]"
done

case_ "a repository the Hub lacks: exit 2, not found"
run "$BIN" inspect hf://org/nosuch:Q8_0
expect_code 2
expect_err "hf://org/nosuch:Q8_0: not found (HTTP 404)"

case_ "a listing in pages (Link rel=next) is read to its end"
fault '{"tree_page": 2}'
clear_log
run "$BIN" inspect --json hf://org/repo:Q8_0
expect_code 0
expect_json "len(d['shards']) == 3"
py "assert sum('/tree/' in r['path'] for r in rows) >= 4, [r['path'] for r in rows]" && _pass || _fail "the pages were not followed"
no_fault

case_ "a listing page longer than 16 MiB: exit 3, not read on"
fault '{"tree_pad": 90000}'
run "$BIN" inspect hf://org/repo:Q8_0
expect_code 3
expect_err "hf://org/repo:Q8_0: the answer is longer than 16777216 bytes"
no_fault

case_ "splice and audit --source from hf://org/repo:Q8_0: the local splice's bytes, every GET of a file ranged"
clear_log
run "$BIN" splice hf://org/repo:Q8_0 --keeplist "$WORK/drop.json" -o "$WORK/h" --json
expect_code 0
for i in 1 2 3; do cmp -s "$WORK/local-0000$i-of-00003.gguf" "$WORK/h-0000$i-of-00003.gguf" && _pass || _fail "shard $i differs"; done
expect_json "d['source_revision'] == 'org/repo@$COMMIT'"
run "$BIN" audit "$WORK/h-00001-of-00003.gguf" --source hf://org/repo:Q8_0 --keeplist "$WORK/drop.json" --json
expect_code 0
expect_json "d['source'] == 'hf://org/repo:Q8_0' and d['source_revision'] == 'org/repo@$COMMIT'"
py "
files = [r for r in rows if r['method'] == 'GET' and not r['path'].startswith('/api/')]
assert files and all(r['range'] for r in files), [r for r in files if not r['range']]
" && _pass || _fail "a GET of a file had no Range header"

case_ "estimate --fit from hf://org/repo:Q8_0: the local file's answer"
run "$BIN" estimate "$R/Q8_0/tiny-Q8_0-00001-of-00003.gguf" --fit size=1MB --json
expect_code 0
cp "$OUT" "$WORK/estimate-local.json"
run "$BIN" estimate hf://org/repo:Q8_0 --fit size=1MB --json
expect_code 0
/usr/bin/python3 - "$WORK/estimate-local.json" "$OUT" <<'PY' && _pass || _fail "estimate differs from the local file's"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if a.get("fit") == b.get("fit") and a.get("fit") is not None else 1)
PY

finish
