# Inputs at URLs (issue 41, item 2; docs/remote.md "Inputs at URLs"): an imatrix, a keeplist, a
# calibrate.json or a plan named by http(s):// or hf://ORG/REPO/PATH[@REV] is read as a model is (pinned,
# by ranges: the server refuses a GET of a file without one), and what rank writes names it by its URL
# at the pinned commit, never by a path of this machine.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

R=$WORK/srv/org/repo
mkdir -p "$R" "$WORK/in"
"$GEN" model --skeleton --preset tiny -o "$WORK/in/tiny.gguf" >/dev/null || { echo "gen failed"; exit 1; }
"$GEN" imatrix --model "$WORK/in/tiny.gguf" -o "$R/code.imatrix.gguf" >/dev/null || { echo "gen imatrix failed"; exit 1; }
"$GEN" imatrix --model "$WORK/in/tiny.gguf" --seed 5 -o "$R/wiki.imatrix.gguf" >/dev/null ||
    { echo "gen imatrix failed"; exit 1; }
printf '{"drop": {"1": [0, 1], "2": [2, 3], "3": [14, 15]}}' >"$R/drop.json"
COMMIT=0123456789abcdef0123456789abcdef76543210
start_server "$WORK/srv" --cdn-host localhost --hub-commit "$COMMIT" --ranges-only
export HF_ENDPOINT=$URL HF_HOME=$WORK/hf-home GGUF_REAP_HTTP_BACKOFF_MS=20
unset HF_TOKEN HF_TOKEN_PATH XDG_CACHE_HOME
py() { settle && /usr/bin/python3 -c "import json, sys; rows = [json.loads(l) for l in open('$SLOG')]; $1"; }
# blocks A B: the two keeplists keep the same experts in every block.
blocks() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if a["blocks"] == b["blocks"] and a["n_keep"] == b["n_keep"] else 1)
PY
}

"$BIN" rank --model "$WORK/in/tiny.gguf" --imatrix code="$R/code.imatrix.gguf" --imatrix wiki="$R/wiki.imatrix.gguf" \
    --prune 4 -o "$WORK/rank-local" >/dev/null 2>&1 || { echo "local rank failed"; exit 1; }

case_ "rank --imatrix code=hf://org/repo/code.imatrix.gguf: the local files' keeplist, named at the commit"
clear_log
run "$BIN" rank --model "$WORK/in/tiny.gguf" --imatrix code=hf://org/repo/code.imatrix.gguf \
    --imatrix wiki="$URL/org/repo/resolve/main/wiki.imatrix.gguf" --prune 4 -o "$WORK/rank-hub"
expect_code 0
blocks "$WORK/rank-local/keeplist.json" "$WORK/rank-hub/keeplist.json" && _pass || _fail "the keeplists differ"
/usr/bin/python3 - "$WORK/rank-hub/keeplist.json" "$COMMIT" "$URL" "$R" <<'PY' && _pass || _fail "the keeplist does not name the imatrices by URL: $(cat "$WORK/rank-hub/keeplist.json")"
import hashlib, json, sys
k = json.load(open(sys.argv[1]))
d = {x["name"]: x for x in k["method"]["domains"]}
assert d["code"]["file"] == "hf://org/repo/code.imatrix.gguf@" + sys.argv[2], d
assert d["wiki"]["file"] == sys.argv[3] + "/org/repo/resolve/main/wiki.imatrix.gguf", d
for n in ("code", "wiki"):
    want = hashlib.sha256(open("%s/%s.imatrix.gguf" % (sys.argv[4], n), "rb").read()).hexdigest()
    assert d[n]["sha256"] == want, (n, d[n])
PY
grep -rlF "$WORK" "$WORK/rank-hub" && _fail "a local path is in rank's outputs" || _pass
grep -F "hf://org/repo/code.imatrix.gguf@$COMMIT" "$WORK/rank-hub"/*.md >/dev/null && _pass ||
    _fail "the receipt does not name the imatrix at its commit"
py "
files = [r for r in rows if r['method'] == 'GET' and not r['path'].startswith('/api/')]
assert files and all(r['range'] for r in files), [r for r in files if not r['range']]
assert not any(r['status'] == 400 for r in rows), rows
" && _pass || _fail "an input was fetched with a GET without a Range header"

case_ "rank --calibration hf://org/repo/calibrate.json: the record attached, named at the commit"
/usr/bin/python3 - "$R" <<'PY'
import hashlib, json, sys
r = sys.argv[1]
sha = lambda b: hashlib.sha256(b).hexdigest()
text = {"path": "code.txt", "sha256": sha(b"code"), "bytes": 4, "tokens": 1}
t = dict(name="code", **text, used=text, chunks=1, imatrix="code.imatrix.gguf",
         imatrix_sha256=sha(open(r + "/code.imatrix.gguf", "rb").read()), key="", seconds=0,
         command=["llama-imatrix", "-f", "code.txt"], tokenize_command=[])
json.dump({"tool": "gguf-reap 0.1.0", "texts": [t]}, open(r + "/calibrate.json", "w"))
PY
run "$BIN" rank --model "$WORK/in/tiny.gguf" --imatrix code=hf://org/repo/code.imatrix.gguf \
    --calibration hf://org/repo/calibrate.json --prune 4 -o "$WORK/rank-cal"
expect_code 0
/usr/bin/python3 -c "
import json, sys
d = {x['name']: x for x in json.load(open(sys.argv[1]))['method']['domains']}
assert d['code']['calibration']['calibrate_json'] == 'hf://org/repo/calibrate.json@$COMMIT', d['code']
" "$WORK/rank-cal/keeplist.json" && _pass || _fail "the calibration record is not named at its commit"

case_ "an input at a URL that is not there: exit 2, naming the URL"
run "$BIN" rank --model "$WORK/in/tiny.gguf" --imatrix code=hf://org/repo/nosuch.imatrix.gguf --prune 4 -o "$WORK/rank-x"
expect_code 2
expect_err "hf://org/repo/nosuch.imatrix.gguf: not found (HTTP 404)"

case_ "splice and audit --keeplist hf://org/repo/drop.json: the local keeplist's output"
"$BIN" splice "$WORK/in/tiny.gguf" --keeplist "$R/drop.json" -o "$WORK/local" -q >/dev/null || { echo "local splice failed"; exit 1; }
run "$BIN" splice "$WORK/in/tiny.gguf" --keeplist hf://org/repo/drop.json -o "$WORK/h" --json
expect_code 0
cmp -s "$WORK/local.gguf" "$WORK/h.gguf" && _pass || _fail "the output differs from the local keeplist's"
run "$BIN" audit "$WORK/h.gguf" --source "$WORK/in/tiny.gguf" --keeplist hf://org/repo/drop.json --json
expect_code 0
expect_json "d['result'] == 'pass'"

case_ "estimate --keeplist hf://org/repo/drop.json: the local keeplist's estimate"
"$BIN" estimate "$WORK/in/tiny.gguf" --keeplist "$R/drop.json" --json >"$WORK/est-local.json" || { echo "local estimate failed"; exit 1; }
run "$BIN" estimate "$WORK/in/tiny.gguf" --keeplist hf://org/repo/drop.json --json
expect_code 0
/usr/bin/python3 -c "
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a.get('after') is not None and a['after'] == b['after'], (a.get('after'), b.get('after'))
" "$WORK/est-local.json" "$OUT" && _pass || _fail "the estimate differs from the local keeplist's"

case_ "splice --neuron-plan hf://org/repo/plan.npz: the local plan's output, byte for byte"
"$BIN" plan-width --model "$WORK/in/tiny.gguf" --imatrix code="$R/code.imatrix.gguf" --k 32 --granularity block -o "$R/plan.npz" >/dev/null 2>&1 ||
    { echo "plan-width failed"; exit 1; }
"$BIN" splice "$WORK/in/tiny.gguf" --neuron-plan "$R/plan.npz" -o "$WORK/w-local" -q >/dev/null || { echo "local width splice failed"; exit 1; }
run "$BIN" splice "$WORK/in/tiny.gguf" --neuron-plan hf://org/repo/plan.npz -o "$WORK/w-hub" --json
expect_code 0
cmp -s "$WORK/w-local.gguf" "$WORK/w-hub.gguf" && _pass || _fail "the output differs from the local plan's"

case_ "audit --source-manifest hf://org/repo/src.json: the local manifest's verdict"
"$BIN" audit "$WORK/in/tiny.gguf" --manifest-out "$R/src.json" >/dev/null 2>&1 || { echo "manifest failed"; exit 1; }
run "$BIN" audit "$WORK/h.gguf" --source-manifest hf://org/repo/src.json --keeplist hf://org/repo/drop.json --json
expect_code 0
expect_json "d['result'] == 'pass' and d['summary']['source_bytes_read'] == 0"
expect_json "d['source_manifest'] == 'hf://org/repo/src.json@$COMMIT' and d['keeplist'] == 'hf://org/repo/drop.json@$COMMIT'"

case_ "rank --from-plan hf://org/repo/reap_plan.json: the local plan's keeplist, no path of this machine"
"$BIN" rank --model "$WORK/in/tiny.gguf" --imatrix code="$R/code.imatrix.gguf" --prune 5 --export keepmap \
    -o "$WORK/rank-exp" >/dev/null 2>&1 || { echo "rank --export failed"; exit 1; }
cp "$WORK/rank-exp/reap_plan.json" "$R/reap_plan.json"
"$BIN" rank --model "$WORK/in/tiny.gguf" --imatrix code="$R/code.imatrix.gguf" --from-plan "$R/reap_plan.json" \
    -o "$WORK/rank-fp-local" >/dev/null 2>&1 || { echo "local rank --from-plan failed"; exit 1; }
run "$BIN" rank --model "$WORK/in/tiny.gguf" --imatrix code=hf://org/repo/code.imatrix.gguf \
    --from-plan hf://org/repo/reap_plan.json -o "$WORK/rank-fp"
expect_code 0
blocks "$WORK/rank-fp-local/keeplist.json" "$WORK/rank-fp/keeplist.json" && _pass || _fail "the keeplists differ"
blocks "$WORK/rank-exp/keeplist.json" "$WORK/rank-fp/keeplist.json" && _pass || _fail "the plan's experts were not kept"
grep -qF -e "$WORK" -e 127.0.0.1 "$WORK/rank-fp/keeplist.json" "$WORK/rank-fp/REAP-KEEPLIST-RECEIPT.md" &&
    _fail "a path of this machine is named" || _pass

case_ "rank --criterion external --scores code=hf://org/repo/scores.json: the local file's keeplist"
/usr/bin/python3 - "$R/scores.json" <<'PY'
import json, random, sys
random.seed(3)
blocks = {str(b): {"score": [random.random() for _ in range(16)]} for b in (1, 2, 3)}
json.dump({"format": "gguf-reap.expert-scores", "version": 1, "blocks": blocks}, open(sys.argv[1], "w"))
PY
"$BIN" rank --model "$WORK/in/tiny.gguf" --criterion external --scores code="$R/scores.json" --prune 4 \
    -o "$WORK/rank-sc-local" >/dev/null 2>&1 || { echo "local rank --scores failed"; exit 1; }
run "$BIN" rank --model "$WORK/in/tiny.gguf" --criterion external --scores code=hf://org/repo/scores.json --prune 4 \
    -o "$WORK/rank-sc"
expect_code 0
blocks "$WORK/rank-sc-local/keeplist.json" "$WORK/rank-sc/keeplist.json" && _pass || _fail "the keeplists differ"
grep -qF -e "$WORK" -e 127.0.0.1 "$WORK/rank-sc/keeplist.json" && _fail "a path of this machine is named" || _pass
grep -qF "hf://org/repo/scores.json@$COMMIT" "$WORK/rank-sc/keeplist.json" && _pass ||
    _fail "the scores are not named at the commit"

finish
