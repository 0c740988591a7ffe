# examples/release.sh (issue 41 item 5, docs/release.md): from a Hub repository and a budget to an upload
# folder, on the trained fixture served as a test Hub (tests/remote/http_server.py: refs, tree, a CDN
# behind signed redirects that expire mid-run, no Range-less GET of a file). Once plainly (with the real
# llama.cpp when GGUF_REAP_LLAMA_BIN is set: part llama; otherwise with the recorded fakes), then killed
# (SIGKILL to the whole process group) in the middle of its splice and at a random step, and run again:
# each rerun finishes what was stopped, redoes nothing finished, and gives the same upload folder. Every
# run of the script here is given the same llama.cpp (the real one, or the fakes) as the first.
# ctest-parts: llama
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
set -o pipefail
TR=$FIX/trained
have_fixtures || skip_all "the trained fixture ($FIX/trained) is not here"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SCRIPT_SH=$ROOT/examples/release.sh
FAKE=$(cd "$(dirname "$0")/fake-llama" && pwd)
REAL=${GGUF_REAP_LLAMA_BIN:-}
unset GGUF_REAP_LLAMA_BIN GGUF_REAP_LLAMA_ARGS HF_TOKEN HF_TOKEN_PATH HF_HUB_CACHE
export GGUF_REAP=$BIN XDG_CACHE_HOME=$WORK/xdg HF_HOME=$WORK/hf-home GGUF_REAP_HTTP_BACKOFF_MS=20

# The test Hub: org/tiny-GGUF holds the Q8_0 model, org/tiny-imatrix two published imatrices.
Q8=tiny-qwen3moe-trained-A-Q8_0.gguf
mkdir -p "$WORK/srv/org/tiny-GGUF" "$WORK/srv/org/tiny-imatrix"
cp "$TR/models/$Q8" "$WORK/srv/org/tiny-GGUF/"
for d in python c; do
    cp "$TR/imatrix/tiny-qwen3moe-trained-A.$d.imatrix.gguf" "$WORK/srv/org/tiny-imatrix/$d.imatrix.gguf"
done
COMMIT=fedcba9876543210fedcba9876543210fedcba98
start_server "$WORK/srv" --cdn-host localhost --ranges-only --hub-commit "$COMMIT"
export HF_ENDPOINT=$URL
# The texts the fake llama-imatrix was recorded on, and the held-out texts of the fake llama-perplexity.
head -c 8000 "$TR/corpora/python.calib.txt" >"$WORK/python.txt"
head -c 7000 "$TR/corpora/c.calib.txt" >"$WORK/c.txt"
# size=3.5MB keeps 12 of 16 experts (3,433,088 bytes; 13 would be 3,644,032), the fake's "keep12" build.
NO_LOCAL=(org/tiny-GGUF:q8_0 size=3.5MB python="$WORK/python.txt" c="$WORK/c.txt"
    --heldout python="$TR/corpora/python.heldout.txt" --heldout c="$TR/corpora/c.heldout.txt"
    --name tiny-keep12-Q8_0 --hf-repo org/tiny-REAP-GGUF)
ARGS=("${NO_LOCAL[@]}" --local "$TR/models/$Q8")
with_llama() {  # with_llama BIN: the options that run llama.cpp's tools from BIN
    LLAMA=(--calibrate-args "--ctx 128 --tokens 1024 --threads 1 --llama-bin $1"
        --eval-args "--ctx 128 --chunks 8 --threads 1 --llama-bin $1")
}
STEPS="inspect estimate calibrate rank splice audit eval card"
NAME=tiny-keep12-Q8_0.gguf

# same_folder A B: the two upload folders hold the same files, byte for byte, but for those that record
# when and where they were made (calibrate.json, eval.json, the manifest), and README.md but for those
# files' sha256 and the audit's date.
same_folder() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import difflib, filecmp, hashlib, os, re, sys
a, b = sys.argv[1], sys.argv[2]
assert sorted(os.listdir(a)) == sorted(os.listdir(b)), (sorted(os.listdir(a)), sorted(os.listdir(b)))
dated = ("calibrate.json", "eval.json", "MANIFEST.json", "MANIFEST.sha256")
def readme(d):
    md = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "DATE", open(f"{d}/README.md").read())
    for n in dated:
        if os.path.exists(f"{d}/{n}"):
            md = md.replace(hashlib.sha256(open(f"{d}/{n}", "rb").read()).hexdigest(), "SHA256-OF-" + n)
    return md
x, y = readme(a), readme(b)
assert x == y, "".join(list(difflib.unified_diff(x.splitlines(True), y.splitlines(True)))[:30])
for n in os.listdir(a):
    if n != "README.md" and n not in dated:
        assert filecmp.cmp(f"{a}/{n}", f"{b}/{n}", shallow=False), n
PY
}

# ---- one run, from the repository and the budget to the folder ----------------------------------------

case_ "one run: every step, and an upload folder whose card passed its cross-checks"
if part llama "the plain run with the real llama-imatrix and llama-perplexity $(live_why)" [ -n "$REAL" ]; then
    with_llama "$REAL"
else
    with_llama "$FAKE"
fi
fault '{"expire_after": 3}'  # every signed CDN URL answers 403 after 3 ranged GETs: the Hub's expiring redirects
clear_log
run "$SCRIPT_SH" "${ARGS[@]}" "${LLAMA[@]}" -o "$WORK/r1"
expect_code 0
for s in $STEPS; do expect_err "release.sh: $s: "; done
expect_err "release.sh: the model: hf://org/tiny-GGUF/$Q8@$COMMIT"
expect_err "release.sh: done: publish it with: hf upload org/tiny-REAP-GGUF $WORK/r1/upload ."
expect_out "publish the folder with \`hf upload org/tiny-REAP-GGUF $WORK/r1/upload .\`"
UP=$WORK/r1/upload
[ "$(ls "$UP" | tr '\n' ' ')" = "MANIFEST.json MANIFEST.sha256 README.md REAP-KEEPLIST-RECEIPT.md calibrate.json eval.json eval.svg keeplist.json $NAME " ] &&
    _pass || _fail "the upload folder holds: $(ls "$UP" | tr '\n' ' ')"
(cd "$UP" && sha256sum -c --quiet MANIFEST.sha256) && _pass || _fail "sha256sum -c MANIFEST.sha256 fails in the folder"
run "$BIN" audit "$UP/$NAME" --manifest "$UP/MANIFEST.json" --source "$TR/models/$Q8"
expect_code 0
# Byte for byte what a local splice of the fixture with the same keeplist writes.
"$BIN" -q splice "$TR/models/$Q8" --keeplist "$UP/keeplist.json" -o "$WORK/local" >/dev/null
cmp -s "$WORK/local.gguf" "$UP/$NAME" && _pass || _fail "the build differs from a local splice"
grep -q '"n_keep": 12' "$UP/keeplist.json" && _pass || _fail "the budget did not keep 12: $(grep n_keep "$UP/keeplist.json")"
grep -qF -e "$WORK" -e "$TR" -e 127.0.0.1 "$UP/README.md" && _fail "README.md names a path of this machine" || _pass
grep -qF "llama-server -hf org/tiny-REAP-GGUF:Q8_0" "$UP/README.md" && _pass || _fail "README.md lacks How to run"
grep -qF "Pruned from \`org/tiny-GGUF@$COMMIT\`" "$UP/README.md" && _pass || _fail "README.md does not name the pinned source"
grep -qF "| yes |" "$UP/README.md" && _pass || _fail "the held-out texts are not marked held out"
/usr/bin/python3 -c "import json; d = json.load(open('$WORK/r1/audit.json')); assert d['result'] == 'pass', d" &&
    _pass || _fail "audit.json did not pass"
settle
log_has "any(r['status'] == 403 for r in rows)" && _pass || _fail "no signed URL expired during the run"
log_has "not any(r['method'] == 'GET' and not r['range'] and '.gguf' in r['path'] for r in rows)" &&
    _pass || _fail "a file was asked for without a Range"

case_ "run again when finished: every step skipped, nothing asked of the Hub, nothing rewritten"
touch -d '2001-01-01' "$UP/README.md"
clear_log
run "$SCRIPT_SH" "${ARGS[@]}" "${LLAMA[@]}" -o "$WORK/r1"
expect_code 0
for s in $STEPS; do expect_err "release.sh: $s: finished in an earlier run"; done
[ "$(stat -c %Y "$UP/README.md")" = "$(date -d 2001-01-01 +%s)" ] && _pass || _fail "README.md was written again"
settle
[ ! -s "$SLOG" ] && _pass || _fail "the Hub was asked: $(head -3 "$SLOG")"

case_ "other arguments for the same directory: refused, naming the recorded ones"
run "$SCRIPT_SH" "${ARGS[@]}" "${LLAMA[@]}" --no-eval -o "$WORK/r1"
expect_code 2
expect_err "release.sh: $WORK/r1 holds a run with other arguments ("
expect_err "): give those, or another -o DIR"

# ---- killed and run again -------------------------------------------------------------------------------

# start_release DIR: the script in a process group of its own, in the background; RPID is its pid (and the
# group's id), its stderr DIR.err.
start_release() {
    setsid "$SCRIPT_SH" "${ARGS[@]}" "${LLAMA[@]}" -o "$1" >"$1.out" 2>"$1.err" &
    RPID=$!
}
kill_release() { kill -KILL -- "-$RPID" 2>/dev/null; wait "$RPID" 2>/dev/null; }
done_steps() { ls "$1/.release" | sed -n 's/\.done$//p' | tr '\n' ' '; }

case_ "killed in the middle of its splice: the rerun resumes the splice and redoes nothing before it"
# The ranged GETs before the splice's data are four header windows of 256 KiB (inspect, estimate, rank,
# splice); 2.7 MB later the splice is most of the way through its 3.3 MB. It is killed once a GET is held
# and its journal vouches for some of the output (it checkpoints every 256 KiB written in order).
fault '{"hold_after": 3748576}'
clear_log
start_release "$WORK/r2"
JOURNAL=$WORK/r2/build/.tiny-keep12-Q8_0.gguf-reap-resume.json
journal_done() { /usr/bin/python3 -c "import json, sys; sys.exit(json.load(open('$JOURNAL'))['files'][0]['done'] == 0)"; }
wait_for "a GET held" log_has "any(r.get('held') for r in rows)" && _pass || _fail "no GET was held"
wait_for "the journal to vouch for some of the output" journal_done && _pass || _fail "no checkpoint"
kill_release
[ "$(grep -o 'release.sh: [a-z]*:' "$WORK/r2.err" | tail -1)" = "release.sh: splice:" ] &&
    _pass || _fail "killed in another step than splice: $(tail -2 "$WORK/r2.err")"
[ "$(done_steps "$WORK/r2")" = "calibrate estimate inspect rank " ] && _pass || _fail "finished: $(done_steps "$WORK/r2")"
stat -c %Y "$WORK"/r2/.release/*.done "$WORK"/r2/calibrate/*.imatrix.gguf >"$WORK/r2.mtimes"
no_fault
sleep 1  # a step that ran again would show a later mtime
run "$SCRIPT_SH" "${ARGS[@]}" "${LLAMA[@]}" -o "$WORK/r2"
expect_code 0
for s in inspect estimate calibrate rank; do expect_err "release.sh: $s: finished in an earlier run"; done
stat -c %Y "$WORK"/r2/.release/{calibrate,estimate,inspect,rank}.done "$WORK"/r2/calibrate/*.imatrix.gguf |
    cmp -s - "$WORK/r2.mtimes" && _pass || _fail "a finished step wrote again"
/usr/bin/python3 -c "import json; d = json.load(open('$WORK/r2/splice.json')); assert d['resumed_bytes'] > 0, d" &&
    _pass || _fail "the splice started over: $(grep resumed "$WORK/r2/splice.json")"
same_folder "$WORK/r1/upload" "$WORK/r2/upload" && _pass || _fail "the folder differs from the plain run's"

case_ "killed at a random step: the rerun finishes it and gives the same folder"
SEED=${GGUF_REAP_TEST_SEED:-$RANDOM}
read -ra S <<<"$STEPS"
AT=${S[$((SEED % ${#S[@]}))]}
echo "killed at step $AT (seed $SEED: GGUF_REAP_TEST_SEED=$SEED repeats it)"
start_release "$WORK/r3"
wait_for "step $AT to begin" grep -q "release.sh: $AT: " "$WORK/r3.err" && _pass || _fail "step $AT never began"
kill_release
run "$SCRIPT_SH" "${ARGS[@]}" "${LLAMA[@]}" -o "$WORK/r3"
expect_code 0
expect_err "release.sh: continuing the run in $WORK/r3"
same_folder "$WORK/r1/upload" "$WORK/r3/upload" && _pass || _fail "the folder differs from the plain run's (step $AT)"

# ---- published imatrices instead of calibrating -----------------------------------------------------------

case_ "--imatrix NAME=hf://..., no local copy: no calibration, eval skipped, the keeplist names the imatrices at the commit"
I=hf://org/tiny-imatrix
run "$SCRIPT_SH" org/tiny-GGUF:Q8_0 size=3.5MB --imatrix "python=$I/python.imatrix.gguf" --imatrix "c=$I/c.imatrix.gguf" \
    --heldout python="$TR/corpora/python.heldout.txt" -o "$WORK/r4"
expect_code 0
expect_err "release.sh: rank: "
grep -q 'release.sh: calibrate:' "$ERR" && _fail "calibrate ran" || _pass
expect_err "download it with \`hf download org/tiny-GGUF --include '$Q8' --revision $COMMIT\`"
expect_err "release.sh: eval: skipped: no local copy of the model (--local PATH, or the HF cache); the card says not measured"
grep -qF "**Quality**: not measured against the source" "$WORK/r4/upload/README.md" && _pass ||
    _fail "the card does not say the build was not measured"
grep -qF "\"file\": \"$I/python.imatrix.gguf@$COMMIT\"" "$WORK/r4/upload/keeplist.json" && _pass ||
    _fail "keeplist.json does not name the imatrix by its URL at the commit"
[ -f "$WORK/r4/upload/tiny-qwen3moe-trained-A-REAP25-Q8_0.gguf" ] && _pass || _fail "the default name: $(ls "$WORK/r4/upload")"
grep -qF -e "$WORK" -e 127.0.0.1 "$WORK/r4/upload/README.md" "$WORK/r4/upload/keeplist.json" &&
    _fail "a path of this machine is named" || _pass

case_ "the model in the HF cache, no --local: calibrate and eval read it there, not one byte of a file is fetched"
SNAP=$WORK/hf-cache/models--org--tiny-GGUF/snapshots/$COMMIT
mkdir -p "$SNAP"
cp "$TR/models/$Q8" "$SNAP/"  # a copy, as huggingface_hub writes where it makes no links
clear_log
run env HF_HUB_CACHE="$WORK/hf-cache" "$SCRIPT_SH" "${NO_LOCAL[@]}" "${LLAMA[@]}" -o "$WORK/r6"
expect_code 0
expect_err "release.sh: calibrate: $BIN calibrate --model hf://org/tiny-GGUF/$Q8@$COMMIT "
expect_err "release.sh: eval: $BIN eval $WORK/r6/build/$NAME --source hf://org/tiny-GGUF/$Q8@$COMMIT "
[ "$(grep -c "read from the Hugging Face cache, $SNAP/$Q8" "$ERR")" = 2 ] && _pass ||
    _fail "calibrate and eval did not both name the cache's copy"
[ "$(served_bytes)" = 0 ] && _pass || _fail "the Hub sent $(served_bytes) bytes of files"
same_folder "$WORK/r1/upload" "$WORK/r6/upload" && _pass || _fail "the folder differs from the plain run's"

case_ "--help needs no gguf-reap on PATH; a missing gguf-reap is refused in one line"
run env -u GGUF_REAP PATH=/usr/bin:/bin "$SCRIPT_SH" --help
expect_code 0
expect_out "examples/release.sh [OPTIONS] ORG/REPO:QUANT[@REVISION] BUDGET [NAME=TEXT...] -o DIR"
run env -u GGUF_REAP PATH=/usr/bin:/bin "$SCRIPT_SH" org/tiny-GGUF:Q8_0 size=3.5MB python="$WORK/python.txt" -o "$WORK/r5"
expect_code 2
expect_err "release.sh: gguf-reap not found (set GGUF_REAP or put it on PATH)"
expect_err_lines 1

case_ "a --*-args a shell would not read: refused before anything runs"
run "$SCRIPT_SH" "${ARGS[@]}" --eval-args "--ctx '128" -o "$WORK/r7"
expect_code 2
expect_err "release.sh: --eval-args '--ctx '128': not words a shell would read (an unclosed quote?)"
expect_err_lines 1
[ ! -e "$WORK/r7" ] && _pass || _fail "the run began: $(ls -A "$WORK/r7")"

case_ "usage: refused with one line"
run "$SCRIPT_SH" org/tiny-GGUF:Q8_0 size=3.5MB -o "$WORK/r5"
expect_code 2
expect_err "release.sh: nothing to rank from: give calibration texts (NAME=FILE) or published imatrices (--imatrix NAME=URL)"
run "$SCRIPT_SH" org/tiny-GGUF size=3.5MB python="$WORK/python.txt" -o "$WORK/r5"
expect_code 2
expect_err "release.sh: hf://org/tiny-GGUF: the model is ORG/REPO:QUANT[@REVISION]"

finish
