# gguf-reap calibrate on the trained Q8_0 fixture: one imatrix per kind of text, by llama-imatrix.
#
# Without llama.cpp, tests/cli/fake-llama/ stands in for llama-imatrix and llama-tokenize: they replay
# what the real tools printed and wrote (tests/data/llama-imatrix/README.md), so every count and imatrix
# checked here is one llama.cpp 34af94cd9 made, and they refuse any argument or value the recorded runs
# lacked. Every refusal is checked this way.
# With GGUF_REAP_LLAMA_BIN set to llama.cpp's bin directory, calibrate runs the real tools too, and its
# imatrices must be the fixture's hand-made ones and the recorded ones the fake replays, byte for byte
# (part llama); with llama.cpp built with
# -DGGML_RPC=ON (ggml-rpc-server beside the tools), calibrate and eval also run through two RPC servers on
# 127.0.0.1, against the same runs on this machine (part rpc).
# ctest-parts: llama rpc
source "$(dirname "$0")/lib.sh"
TR=$FIX/trained
[ -f "$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf" ] || skip_all "no trained fixture in $TR"
FAKE=$(cd "$(dirname "$0")/fake-llama" && pwd)
DATA=$(cd "$(dirname "$0")/../data/llama-imatrix" && pwd)
M=$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf
# The recorded texts: the first 8,000 bytes of python.calib.txt, the first 7,000 of c.calib.txt.
head -c 8000 "$TR/corpora/python.calib.txt" >"$WORK/python.txt"
head -c 7000 "$TR/corpora/c.calib.txt" >"$WORK/c.txt"
head -c 300 "$TR/corpora/python.calib.txt" >"$WORK/short.txt"
TEXTS=(--text python="$WORK/python.txt" --text c="$WORK/c.txt")
CAL=(calibrate --model "$M" "${TEXTS[@]}" --ctx 128 --tokens 1024 --threads 1 --llama-bin "$FAKE")
export FAKE_LLAMA_CALLS=$WORK/calls
REAL=${GGUF_REAP_LLAMA_BIN:-}
unset GGUF_REAP_LLAMA_BIN GGUF_REAP_LLAMA_ARGS

case_ "two texts, the same budget: each cut to its first 1,024 tokens, one imatrix each, recorded"
run "$BIN" "${CAL[@]}" -o "$WORK/cal"
expect_code 0
[ ! -s "$ERR" ] && _pass || _fail "stderr is not a tty, yet it printed: $(cat "$ERR")"
expect_out "wrote $WORK/cal/calibrate.json"
expect_out "sanity  every imatrix holds what it claims"
for t in python c; do
    cmp -s "$WORK/cal/$t.imatrix.gguf" "$DATA/$t.imatrix.gguf" && _pass || _fail "$t.imatrix.gguf is not what llama-imatrix wrote"
done
[ "$(grep -c '^imatrix' "$WORK/calls")" -eq 2 ] && _pass || _fail "imatrix runs: $(cat "$WORK/calls")"
cp "$WORK/cal/calibrate.json" "$OUT"
expect_json 'd["complete"] and [t["name"] for t in d["texts"]] == ["python", "c"] and d["sanity"] == []'
expect_json '[t["tokens"] for t in d["texts"]] == [4979, 3450] and [t["used"]["tokens"] for t in d["texts"]] == [1024, 1024] and [t["chunks"] for t in d["texts"]] == [8, 8]'
expect_json 'd["texts"][0]["sha256"] == "'"$(sha256sum "$WORK/python.txt" | cut -d' ' -f1)"'" and d["texts"][0]["bytes"] == 8000'
# calibrate.json names no path of this machine: each relative to its directory, or a base name (issue 40).
expect_json 'd["texts"][0]["path"] == "python.txt" and d["texts"][0]["used"]["path"] == "python.txt" and d["texts"][0]["used"]["bytes"] == 1670 and d["texts"][0]["used"]["sha256"] == "'"$(sha256sum "$WORK/cal/python.txt" | cut -d' ' -f1)"'"'
expect_json 'd["texts"][0]["command"] == ["llama-imatrix", "-m", "tiny-qwen3moe-trained-A-Q8_0.gguf", "-f", "python.txt", "-c", "128", "-b", "128", "--no-escape", "--output-format", "gguf", "-o", "python.imatrix.gguf", "-t", "1"] and d["texts"][0]["imatrix"] == "python.imatrix.gguf"'
expect_json 'd["model"]["path"] == "tiny-qwen3moe-trained-A-Q8_0.gguf" and d["llama_cpp"]["llama_imatrix"] == "llama-imatrix"'
expect_json 'd["texts"][0]["ppl"] == {"value": 34.4451, "err": 3.2706} and d["texts"][1]["ppl"]["value"] == 10.8561'
expect_json 'd["texts"][1]["imatrix_sha256"] == "'"$(sha256sum "$DATA/c.imatrix.gguf" | cut -d' ' -f1)"'" and not any(t["cached"] for t in d["texts"])'
expect_json 'd["model"]["expert_count"] == 16 and d["model"]["expert_used_count"] == 4 and len(d["model"]["identity"]) == 64'
expect_json 'd["settings"] == {"ctx": 128, "batch": 128, "tokens": 1024, "threads": 1} and d["llama_cpp"]["build"].startswith("version: 0.1.1-dev") and d["llama_cpp"]["args"] == []'
expect_json 'd["texts"][0]["tokenize_command"][1:] == ["-m", "tiny-qwen3moe-trained-A-Q8_0.gguf", "--stdin", "--no-escape", "--ids", "--show-count", "--log-disable"]'
# The cut text is the start of the file, on a token boundary, plus the newline llama-imatrix's -f drops.
[ "$(head -c 1669 "$WORK/cal/python.txt")" = "$(head -c 1669 "$WORK/python.txt")" ] && [ "$(tail -c 1 "$WORK/cal/python.txt" | od -An -c | tr -d ' ')" = '\n' ] && _pass || _fail "python.txt is not the text's first 1,669 bytes and a newline"

case_ "the source identity: the sha256 of the model's header bytes, computed here from the file; eval's is the same"
# docs/eval.md: the sha256 of every shard's header bytes, [0, data_start): the magic, the counts, the
# key-values and the tensor infos, padded to general.alignment (32 unless the file sets it). The trained
# model is one shard. Read here with Python, apart from gguf-reap's reader.
cp "$WORK/cal/calibrate.json" "$OUT"
want_id=$(python3 - "$M" <<'PY'
import hashlib, struct, sys
d = open(sys.argv[1], "rb").read()
at = 4
def take(f):
    global at
    v = struct.unpack_from("<" + f, d, at)[0]
    at += struct.calcsize("<" + f)
    return v
SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip_value(t):
    global at
    if t == 8:
        n = take("Q")
        at += n
    elif t == 9:
        et, n = take("I"), take("Q")
        for _ in range(n):
            skip_value(et)
    else:
        at += SIZE[t]
assert d[:4] == b"GGUF"
take("I")
n_tensors, n_kv = take("Q"), take("Q")
align = 32
for _ in range(n_kv):
    n = take("Q")
    k = d[at:at + n]
    at += n
    t = take("I")
    if k == b"general.alignment":
        align = struct.unpack_from("<I", d, at)[0]
    skip_value(t)
for _ in range(n_tensors):
    n = take("Q")  # the name
    at += n
    n_dims = take("I")
    at += 8 * n_dims + 4 + 8  # the dims, the type, the offset
print(hashlib.sha256(d[:(at + align - 1) // align * align]).hexdigest())
PY
)
expect_json 'd["model"]["identity"] == "'"$want_id"'"'
IM=()
for d in c changelog legal markdown python; do IM+=(--imatrix "$d=$TR/imatrix/tiny-qwen3moe-trained-A.$d.imatrix.gguf"); done
"$BIN" -q rank --model "$M" "${IM[@]}" --keep 8 -o "$WORK/rank8" >/dev/null
"$BIN" -q splice "$M" --keeplist "$WORK/rank8/keeplist.json" -o "$WORK/keep8" >/dev/null
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$TR/corpora/python.heldout.txt" --ctx 128 --chunks 8 \
    --llama-bin "$FAKE" --cache-dir "$WORK/kld" --json
expect_code 0
expect_json 'd["source"]["identity"] == "'"$want_id"'"'

case_ "rank and card read calibrate.json beside the imatrices: each domain's text sha256 and tokens"
run "$BIN" -q rank --model "$M" --imatrix python="$WORK/cal/python.imatrix.gguf" --imatrix c="$WORK/cal/c.imatrix.gguf" --keep 8 -o "$WORK/crank"
expect_code 0
cp "$WORK/crank/keeplist.json" "$OUT"
PYSHA=$(sha256sum "$WORK/python.txt" | cut -d' ' -f1)
expect_json 'd["method"]["domains"][0]["calibration"]["text_sha256"] == "'"$PYSHA"'" and d["method"]["domains"][0]["calibration"]["used_tokens"] == 1024 and d["method"]["domains"][0]["calibration"]["text_tokens"] == 4979'
expect_json 'd["method"]["domains"][1]["calibration"]["calibrate_json"] == "calibrate.json" and d["method"]["domains"][1]["calibration"]["chunks"] == 8'
"$BIN" -q splice "$M" --keeplist "$WORK/crank/keeplist.json" -o "$WORK/ck8" >/dev/null
"$BIN" -q audit "$WORK/ck8.gguf" --source "$M" --json >"$WORK/ck8.audit.json"
run "$BIN" -q card "$WORK/ck8.gguf" --source "$M" --rank "$WORK/crank" --audit "$WORK/ck8.audit.json" -o "$WORK/ck8.md"
expect_code 0
grep -qF "  - python: the first 1,024 of the 4,979 tokens of \`python.txt\` (sha256 \`$PYSHA\`), by \`gguf-reap calibrate\`" "$WORK/ck8.md" && _pass || _fail "the card does not state python's text: $(grep -A2 'Calibration domains' "$WORK/ck8.md")"
case_ "rank --calibration FILE: imatrices moved away from their calibrate.json"
mkdir -p "$WORK/moved"
cp "$WORK/cal/python.imatrix.gguf" "$WORK/cal/c.imatrix.gguf" "$WORK/moved/"
run "$BIN" -q rank --model "$M" --imatrix python="$WORK/moved/python.imatrix.gguf" --imatrix c="$WORK/moved/c.imatrix.gguf" --keep 8 -o "$WORK/mrank"
cp "$WORK/mrank/keeplist.json" "$OUT"
expect_json '"calibration" not in d["method"]["domains"][0]'
run "$BIN" -q rank --model "$M" --imatrix python="$WORK/moved/python.imatrix.gguf" --imatrix c="$WORK/moved/c.imatrix.gguf" --keep 8 --calibration "$WORK/cal/calibrate.json" -o "$WORK/mrank2"
expect_code 0
cp "$WORK/mrank2/keeplist.json" "$OUT"
expect_json 'd["method"]["domains"][0]["calibration"]["text_sha256"] == "'"$PYSHA"'"'
run "$BIN" -q rank --model "$M" --imatrix python="$TR/imatrix/tiny-qwen3moe-trained-A.python.imatrix.gguf" --keep 8 --calibration "$WORK/cal/calibrate.json" -o "$WORK/mrank3"
expect_code 2
expect_err "error: --calibration $WORK/cal/calibrate.json: it records none of the imatrices given"

case_ "files meant for upload name no path of this machine: calibrate.json, keeplist.json, the receipt"
# Run from another directory with absolute paths (issue 40): each file is named relative to its document
# or by its base name. The third imatrix (the generator's) records an absolute dataset, as llama-imatrix
# does when given an absolute -f.
mkdir -p "$WORK/elsewhere" "$WORK/up"
ABS_BIN=$(realpath "$BIN")
"$GEN" imatrix --model "$M" --domain "$WORK/up/md.txt" -o "$WORK/up/md.imatrix.gguf" >/dev/null
run sh -c "cd '$WORK/elsewhere' && '$ABS_BIN' -q calibrate --model '$M' --text python='$WORK/python.txt' --text c='$WORK/c.txt' --ctx 128 --tokens 1024 --threads 1 --llama-bin '$FAKE' -o '$WORK/up/cal' && '$ABS_BIN' -q rank --model '$M' --imatrix python='$WORK/up/cal/python.imatrix.gguf' --imatrix c='$WORK/up/cal/c.imatrix.gguf' --imatrix md='$WORK/up/md.imatrix.gguf' --keep 8 -o '$WORK/up/rank'"
expect_code 0
for f in cal/calibrate.json rank/keeplist.json rank/REAP-KEEPLIST-RECEIPT.md; do
    [ -f "$WORK/up/$f" ] && ! grep -qF -e "$WORK" -e "$TR" -e "$FAKE" "$WORK/up/$f" && _pass ||
        _fail "$f names a path of this machine: $(grep -oF -e "$WORK" -e "$TR" -e "$FAKE" "$WORK/up/$f" | sort | uniq -c)"
done
cp "$WORK/up/rank/keeplist.json" "$OUT"
expect_json '[x["calibration"]["text"] for x in d["method"]["domains"][:2]] == ["python.txt", "c.txt"] and d["method"]["domains"][2]["datasets"] == ["md.txt"]'
expect_json 'd["method"]["domains"][0]["calibration"]["command"][:3] == ["llama-imatrix", "-m", "tiny-qwen3moe-trained-A-Q8_0.gguf"]'

case_ "a rerun of a finished calibration runs nothing and rewrites nothing"
: >"$WORK/calls"
sum=$(sha256sum "$WORK/cal/calibrate.json" "$WORK/cal"/*.imatrix.gguf)
run "$BIN" "${CAL[@]}" -o "$WORK/cal" --json
expect_code 0
expect_json 'all(t["cached"] for t in d["texts"]) and [t["used"]["tokens"] for t in d["texts"]] == [1024, 1024]'
[ ! -s "$WORK/calls" ] && _pass || _fail "llama.cpp ran: $(cat "$WORK/calls")"
[ "$(sha256sum "$WORK/cal/calibrate.json" "$WORK/cal"/*.imatrix.gguf)" = "$sum" ] && _pass || _fail "a file changed"
run "$BIN" "${CAL[@]}" -o "$WORK/cal"
expect_out "calibrate.json unchanged (every text cached)"

case_ "a rerun from another directory with relative paths, then with absolute ones spelled otherwise: nothing runs, nothing is rewritten"
# Issue 40: the cache and the imatrices depend on the texts' content, never on how a path is spelled.
# Each file's sha256 and mtime (to the nanosecond) before and after; llama.cpp's fake records every run.
snapshot() { (cd "$WORK/cal" && for f in calibrate.json *.imatrix.gguf *.imatrix.log python.txt c.txt; do echo "$f $(sha256sum <"$f") $(stat -c %y "$f")"; done); }
before=$(snapshot)
mkdir -p "$WORK/elsewhere/deeper"
: >"$WORK/calls"
rel() { realpath --relative-to="$WORK/elsewhere/deeper" "$1"; }
run sh -c "cd '$WORK/elsewhere/deeper' && '$(realpath "$BIN")' calibrate --model '$(rel "$M")' --text python=../../python.txt --text c=../../c.txt --ctx 128 --tokens 1024 --threads 1 --llama-bin '$(rel "$FAKE")' -o ../../cal"
expect_code 0
expect_out "calibrate.json unchanged (every text cached)"
expect_out "../../cal/python.imatrix.gguf (cached)"
run "$BIN" calibrate --model "$M" --text python="$WORK/elsewhere/../python.txt" --text c="$WORK//c.txt" --ctx 128 --tokens 1024 \
    --threads 1 --llama-bin "$FAKE" -o "$WORK/elsewhere/../cal/"
expect_code 0
expect_out "calibrate.json unchanged (every text cached)"
[ ! -s "$WORK/calls" ] && _pass || _fail "llama.cpp ran: $(cat "$WORK/calls")"
[ "$(snapshot)" = "$before" ] && _pass || _fail "a file was rewritten: $(diff <(echo "$before") <(snapshot))"

case_ "the same calibration into a new folder, from another directory with relative paths: the same imatrices"
# llama-imatrix names its -f argument in the imatrix: calibrate gives it NAME.txt in a directory of its
# own whatever the spelling (the fake refuses any other -f, as the recordings name python.txt and c.txt).
run sh -c "cd '$WORK/elsewhere/deeper' && '$(realpath "$BIN")' -q calibrate --model '$(rel "$M")' --text python=../../python.txt --text c=../../c.txt --ctx 128 --tokens 1024 --threads 1 --llama-bin '$(rel "$FAKE")' -o ../fresh --json"
expect_code 0
expect_json 'not any(t["cached"] for t in d["texts"]) and d["texts"][0]["command"][3:5] == ["-f", "python.txt"]'
for t in python c; do
    cmp -s "$WORK/elsewhere/fresh/$t.imatrix.gguf" "$WORK/cal/$t.imatrix.gguf" && _pass || _fail "$t.imatrix.gguf differs"
done
[ ! -e "$WORK/elsewhere/fresh/.imatrix-run" ] && _pass || _fail "llama-imatrix's working directory is left"

case_ "an imatrix changed since its run (one byte) is computed again; the unchanged one is reused"
cp "$WORK/cal/python.imatrix.gguf" "$WORK/python.imatrix.bak"
size=$(stat -c %s "$WORK/cal/python.imatrix.gguf")
printf '\x5a' | dd of="$WORK/cal/python.imatrix.gguf" bs=1 seek=$((size - 1)) conv=notrunc status=none
cmp -s "$WORK/cal/python.imatrix.gguf" "$WORK/python.imatrix.bak" && _fail "the byte was already 0x5a" || _pass
: >"$WORK/calls"
run "$BIN" "${CAL[@]}" -o "$WORK/cal" --json
expect_code 0
expect_json '[t["cached"] for t in d["texts"]] == [False, True]'
[ "$(cat "$WORK/calls")" = "imatrix python -t 1" ] && _pass || _fail "runs: $(cat "$WORK/calls")"
cmp -s "$WORK/cal/python.imatrix.gguf" "$DATA/python.imatrix.gguf" && _pass || _fail "python.imatrix.gguf is not llama-imatrix's again"

case_ "a changed setting or --llama-args is another key: computed again, the arguments after gguf-reap's"
: >"$WORK/calls"
export FAKE_LLAMA_ALLOW="-ngl 99 -ot exps=CPU"  # the fake llama-imatrix accepts these after the recorded ones
run "$BIN" "${CAL[@]}" -o "$WORK/cal" --llama-args "-ngl 99 -ot 'exps=CPU'" --json
expect_code 0
expect_json 'not any(t["cached"] for t in d["texts"]) and d["texts"][0]["command"][-4:] == ["-ngl", "99", "-ot", "exps=CPU"] and d["llama_cpp"]["args"] == ["-ngl", "99", "-ot", "exps=CPU"]'
expect_json 'd["texts"][0]["command"][-7:-4] == ["'"$WORK/cal/python.imatrix.gguf"'", "-t", "1"] and "-ngl" not in d["texts"][0]["tokenize_command"]'
grep -qx 'imatrix python -t 1 -ngl 99 -ot exps=CPU' "$WORK/calls" && _pass || _fail "llama-imatrix was run with: $(cat "$WORK/calls")"
run env GGUF_REAP_LLAMA_ARGS="-ngl 99 -ot exps=CPU" "$BIN" "${CAL[@]}" -o "$WORK/cal" --json
expect_json 'all(t["cached"] for t in d["texts"])'
unset FAKE_LLAMA_ALLOW

case_ "a new text is computed; the others are reused"
: >"$WORK/calls"
run "$BIN" calibrate --model "$M" --text c="$WORK/c.txt" --ctx 128 --tokens 1024 --threads 1 --llama-bin "$FAKE" -o "$WORK/cal2"
run "$BIN" "${CAL[@]}" -o "$WORK/cal2" --json
expect_code 0
expect_json '[t["cached"] for t in d["texts"]] == [False, True]'

case_ "refused: a name given twice, a text shorter than --tokens, no llama-imatrix, a colliding argument"
: >"$WORK/calls"
run "$BIN" calibrate --model "$M" --text python="$WORK/python.txt" --text python="$WORK/c.txt" -o "$WORK/bad" --llama-bin "$FAKE"
expect_code 2
expect_err "error: --text python is given twice; give each kind of text one name"
expect_err_lines 1
run "$BIN" calibrate --model "$M" "${TEXTS[@]}" --text short="$WORK/short.txt" --ctx 128 --tokens 1024 --llama-bin "$FAKE" -o "$WORK/bad"
expect_code 2
expect_err "error: --text short=$WORK/short.txt: 153 tokens, fewer than --tokens 1024; give a longer text or a smaller --tokens"
run "$BIN" calibrate --model "$M" --text short="$WORK/short.txt" --ctx 128 --llama-bin "$FAKE" -o "$WORK/bad"
expect_code 2
expect_err "error: --text short=$WORK/short.txt: 153 tokens, too short for llama-imatrix at --ctx 128 (it needs at least 2 x ctx = 256); give a longer text or a smaller --ctx"
mkdir -p "$WORK/tokenize-only"
ln -s "$FAKE/llama-tokenize" "$WORK/tokenize-only/llama-tokenize"
run "$BIN" calibrate --model "$M" "${TEXTS[@]}" --llama-bin "$WORK/tokenize-only" -o "$WORK/bad"
expect_code 2
expect_err "error: llama-imatrix not found in --llama-bin $WORK/tokenize-only: give --llama-bin DIR (llama.cpp's build/bin) or set GGUF_REAP_LLAMA_BIN=DIR"
run env PATH=/usr/bin:/bin "$BIN" calibrate --model "$M" "${TEXTS[@]}" -o "$WORK/bad"
expect_code 2
expect_err "error: llama-imatrix not found on PATH"
for a in "-c 4096" "-m x.gguf" "-f x.txt" "-b 512" "-o x.gguf" "--chunks 4" "--in-file a.gguf" "--output-format dat" \
    "--no-ppl" "--save-frequency 8" "-ofreq 1" "-t 8"; do
    run "$BIN" "${CAL[@]}" -o "$WORK/bad" --llama-args "-ngl 99 $a"
    expect_code 2
    expect_err "error: --llama-args: ${a%% *} collides with an argument gguf-reap sets for llama-imatrix"
done
run "$BIN" "${CAL[@]}" -o "$WORK/bad" --llama-args "--in-file a.gguf"
expect_err "error: --llama-args: --in-file collides with an argument gguf-reap sets for llama-imatrix: calibrate computes each imatrix from its own text alone"
expect_err_lines 1
run "$BIN" calibrate --model "$M" "${TEXTS[@]}" --ctx 128 --tokens 200 --llama-bin "$FAKE" -o "$WORK/bad"
expect_code 2
expect_err "error: --tokens 200: llama-imatrix needs at least 2 x ctx = 256 tokens at --ctx 128; give more tokens or a smaller --ctx"
run "$BIN" calibrate --model "$M" --text "py thon=$WORK/python.txt" --llama-bin "$FAKE" -o "$WORK/bad"
expect_code 2
expect_err "error: --text 'py thon=$WORK/python.txt': NAME must be 1 to 64 letters, digits, '_', '-' or '.'"
mkdir -p "$WORK/inplace" && cp "$WORK/python.txt" "$WORK/inplace/python.txt"
run "$BIN" calibrate --model "$M" --text python="$WORK/inplace/python.txt" --ctx 128 --tokens 1024 --llama-bin "$FAKE" -o "$WORK/inplace"
expect_code 2
expect_err "error: -o $WORK/inplace: $WORK/inplace/python.txt would be written, and it is an input of this calibrate ($WORK/inplace/python.txt); give another -o"
cmp -s "$WORK/inplace/python.txt" "$WORK/python.txt" && _pass || _fail "the text was overwritten"
[ ! -s "$WORK/calls" ] && _pass || _fail "a refused calibrate ran llama-imatrix: $(cat "$WORK/calls")"
[ -z "$(ls "$WORK/bad" 2>/dev/null | grep imatrix)" ] && _pass || _fail "a refused calibrate wrote $(ls "$WORK/bad")"

case_ "a refused calibrate leaves no output folder it made (nor its parents)"
run "$BIN" calibrate --model "$M" --text short="$WORK/short.txt" --ctx 128 --llama-bin "$FAKE" -o "$WORK/made/here"
expect_code 2
expect_err "error: --text short=$WORK/short.txt: 153 tokens, too short for llama-imatrix"
[ ! -e "$WORK/made" ] && _pass || _fail "the refused calibrate left $(find "$WORK/made")"
echo "not a model" >"$WORK/not-a-model.gguf"
run "$BIN" calibrate --model "$WORK/not-a-model.gguf" "${TEXTS[@]}" --llama-bin "$FAKE" -o "$WORK/made/here"
expect_code 2
[ ! -e "$WORK/made" ] && _pass || _fail "the refused calibrate left $(find "$WORK/made")"
mkdir -p "$WORK/mine"
run "$BIN" calibrate --model "$M" --text short="$WORK/short.txt" --ctx 128 --llama-bin "$FAKE" -o "$WORK/mine"
expect_code 2
[ -d "$WORK/mine" ] && _pass || _fail "a refused calibrate removed a folder it did not make"

case_ "SIGKILLed: the next run with the same -o removes the dead run's temporaries, and no live one's"
rm -f "$WORK/calls.pid"
mkdir -p "$WORK/killed"
FAKE_LLAMA_MODE=sleep "$BIN" "${CAL[@]}" -o "$WORK/killed" >/dev/null 2>&1 &
pid=$!
wait_for "llama-imatrix's start (its pid in calls.pid)" test -s "$WORK/calls.pid"
kill -KILL $pid
wait $pid 2>/dev/null
kill -TERM "$(cat "$WORK/calls.pid")" 2>/dev/null  # the fake llama-imatrix, orphaned by the SIGKILL
DEAD=$(sh -c 'echo $$')                            # a process that has exited: as if killed in llama-tokenize
: >"$WORK/killed/..text.stdin.gguf-reap-tmp.$DEAD.0"
: >"$WORK/killed/.c.imatrix.gguf.gguf-reap-tmp.$$.7" # this shell's: alive
[ "$(ls -A "$WORK/killed" | grep -c gguf-reap-tmp)" -ge 3 ] && _pass ||
    _fail "the killed run left no temporary to remove: $(ls -A "$WORK/killed")"
rm -f "$WORK/calls.pid"
[ -L "$WORK/killed/.imatrix-run/python.txt" ] && _pass || _fail "no llama-imatrix working directory after the kill"
run "$BIN" "${CAL[@]}" -o "$WORK/killed"
expect_code 0
[ "$(ls -A "$WORK/killed" | grep gguf-reap-tmp)" = ".c.imatrix.gguf.gguf-reap-tmp.$$.7" ] && _pass ||
    _fail "temporaries after the rerun: $(ls -A "$WORK/killed" | grep gguf-reap-tmp)"
rm -f "$WORK/killed/.c.imatrix.gguf.gguf-reap-tmp.$$.7"
# A dead run's llama-imatrix directory goes even when the rerun has nothing to compute.
mkdir "$WORK/killed/.imatrix-run" && ln -s "$WORK/python.txt" "$WORK/killed/.imatrix-run/python.txt"
run "$BIN" "${CAL[@]}" -o "$WORK/killed"
expect_code 0
expect_out "calibrate.json unchanged (every text cached)"
[ ! -e "$WORK/killed/.imatrix-run" ] && [ -f "$WORK/python.txt" ] && _pass || _fail "the dead run's .imatrix-run is left, or its text is gone"

case_ "llama-imatrix fails, or writes no imatrix: exit 3 with its last lines, no imatrix under a final name"
FAKE_LLAMA_MODE=exit1 run "$BIN" "${CAL[@]}" -o "$WORK/fail"
expect_code 3
expect_err "llama-imatrix on python failed (exit code 1); its last lines:"
expect_err "compute_imatrix: computing over 8 chunks, n_ctx=128, batch_size=128, n_seq=1"
FAKE_LLAMA_MODE=noimatrix run "$BIN" "${CAL[@]}" -o "$WORK/fail"
expect_code 3
expect_err "llama-imatrix on python exited 0 but wrote no GGUF imatrix (expected a GGUF imatrix over 8 chunks)"
[ -z "$(ls -A "$WORK/fail" | grep -v -e '^python.txt$' -e '^c.txt$')" ] && _pass || _fail "left behind: $(ls -A "$WORK/fail")"

case_ "llama-imatrix itself refuses a text too short for --ctx (it read fewer tokens than llama-tokenize counted): exit 2"
FAKE_LLAMA_MODE=too-short run "$BIN" "${CAL[@]}" -o "$WORK/short"
expect_code 2
expect_err_lines 1
expect_err "error: --text python=$WORK/python.txt: llama-imatrix needs at least 256 tokens at --ctx 128; it read 94"
[ -z "$(ls -A "$WORK/short" | grep -v -e '^python.txt$' -e '^c.txt$')" ] && _pass || _fail "left behind: $(ls -A "$WORK/short")"

case_ "interrupted: 130, llama-imatrix ended, no imatrix under its final name; the rerun resumes"
rm -f "$WORK/calls.pid"
mkdir -p "$WORK/int"
run "$BIN" calibrate --model "$M" --text python="$WORK/python.txt" --ctx 128 --tokens 1024 --threads 1 --llama-bin "$FAKE" -o "$WORK/int"
FAKE_LLAMA_MODE=sleep "$BIN" "${CAL[@]}" -o "$WORK/int" >"$OUT" 2>"$ERR" &
pid=$!
wait_for "llama-imatrix's start (its pid in calls.pid)" test -s "$WORK/calls.pid"
kill -INT $pid
CODE=0
wait $pid || CODE=$?
expect_code 130
child=$(cat "$WORK/calls.pid" 2>/dev/null)
[ -n "$child" ] && ! kill -0 "$child" 2>/dev/null && _pass || _fail "the fake llama-imatrix ($child) still runs"
[ ! -e "$WORK/int/c.imatrix.gguf" ] && _pass || _fail "c.imatrix.gguf under its final name"
[ -z "$(ls -A "$WORK/int" | grep -e gguf-reap-tmp -e imatrix-run)" ] && _pass || _fail "temporaries left: $(ls -A "$WORK/int")"
cp "$WORK/int/calibrate.json" "$OUT"
expect_json 'd["complete"] == True and [t["name"] for t in d["texts"]] == ["python"]'
: >"$WORK/calls"
run "$BIN" "${CAL[@]}" -o "$WORK/int" --json
expect_code 0
expect_json '[t["cached"] for t in d["texts"]] == [True, False]'
[ "$(cat "$WORK/calls")" = "imatrix c -t 1" ] && _pass || _fail "runs: $(cat "$WORK/calls")"

# With llama.cpp: calibrate as the fixture's imatrices were made by hand.
if part llama "the real llama.cpp run $(live_why)" [ -n "$REAL" ]; then
    case_ "real llama.cpp: --ctx 128 --threads 1 makes the fixture's hand-made imatrices: every sum and count"
    # The fixture's were made in $TR with -f corpora/NAME.calib.txt, which each names as its dataset;
    # calibrate's name NAME.txt (llama-imatrix runs with -f NAME.txt in a directory of calibrate's), so
    # the files differ there and only there: every value the same (relative difference 0).
    bin=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
    run sh -c "cd '$TR' && '$bin' calibrate --model models/tiny-qwen3moe-trained-A-Q8_0.gguf --text python=corpora/python.calib.txt --text c=corpora/c.calib.txt --ctx 128 --threads 1 --llama-bin '$REAL' -o '$WORK/real' --json"
    expect_code 0
    expect_json '[t["chunks"] for t in d["texts"]] == [154, 138] and d["sanity"] == []'
    # dataset FILE NAME: FILE's imatrix.datasets is [NAME] (a GGUF string: its u64 length, then its bytes).
    dataset() { python3 -c 'import struct, sys; d = open(sys.argv[1], "rb").read(); n = sys.argv[2].encode(); sys.exit(0 if b"imatrix.datasets" in d and struct.pack("<Q", len(n)) + n in d and b"corpora" not in d and b"/" not in n else 1)' "$1" "$2"; }
    for t in python c; do
        run python3 "$(dirname "$0")/../../tools/imatrix_diff.py" "$WORK/real/$t.imatrix.gguf" "$TR/imatrix/tiny-qwen3moe-trained-A.$t.imatrix.gguf"
        expect_code 0
        expect_out "largest count difference 0; largest relative in_sum2 difference 0"
        dataset "$WORK/real/$t.imatrix.gguf" "$t.txt" && _pass || _fail "$t.imatrix.gguf does not name $t.txt as its dataset"
    done
    case_ "real llama.cpp: the recorded --tokens 1024 runs make the imatrices the fake replays, byte for byte, however spelled"
    # Byte for byte: one thread adds the sums in one order, so the same build writes the same bytes; a
    # build that computes otherwise shows here (tools/imatrix_diff.py says how much). Run from a
    # directory with relative paths, then from another with absolute ones (issue 40): the same bytes.
    mkdir -p "$WORK/rec/sub" "$WORK/rec2"
    run sh -c "cd '$WORK/rec/sub' && '$bin' calibrate --model '$(realpath --relative-to="$WORK/rec/sub" "$M")' --text python=../../python.txt --text c=../../c.txt --ctx 128 --tokens 1024 --threads 1 --llama-bin '$REAL' -o ../out --json"
    expect_code 0
    expect_json '[t["used"]["tokens"] for t in d["texts"]] == [1024, 1024] and [t["used"]["bytes"] for t in d["texts"]] == [1670, 2102]'
    expect_json 'd["texts"][0]["command"][1] == "-m" and d["texts"][0]["command"][2].startswith("/") and d["texts"][0]["command"][3:] == ["-f", "python.txt", "-c", "128", "-b", "128", "--no-escape", "--output-format", "gguf", "-o", "'"$WORK/rec/out/python.imatrix.gguf"'", "-t", "1"]'
    run sh -c "cd / && '$bin' calibrate --model '$M' --text python='$WORK/rec/../python.txt' --text c='$WORK/c.txt' --ctx 128 --tokens 1024 --threads 1 --llama-bin '$REAL' -o '$WORK/rec2/out' --json"
    expect_code 0
    for t in python c; do
        for o in "$WORK/rec/out" "$WORK/rec2/out"; do
            cmp -s "$o/$t.imatrix.gguf" "$DATA/$t.imatrix.gguf" && _pass ||
                _fail "$o/$t.imatrix.gguf differs from the recording the fake replays: $(python3 "$(dirname "$0")/../../tools/imatrix_diff.py" "$o/$t.imatrix.gguf" "$DATA/$t.imatrix.gguf" 2>&1)"
        done
        dataset "$DATA/$t.imatrix.gguf" "$t.txt" && _pass || _fail "the recorded $t.imatrix.gguf does not name $t.txt"
    done
fi

# Through llama.cpp's RPC backend: two ggml-rpc-server processes on free ports of 127.0.0.1, stopped by pid.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
RPC_PIDS=()
stop_rpc() {
    for p in "${RPC_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    return 0
}
trap 'stop_rpc; rm -rf "$WORK"' EXIT
if part rpc "the run through llama.cpp's RPC backend $(live_why "set GGUF_REAP_LLAMA_BIN to llama.cpp built with -DGGML_RPC=ON: ggml-rpc-server")" \
    [ -n "$REAL" -a -x "$REAL/ggml-rpc-server" ]; then
    case_ "rpc: calibrate through two rpc-servers: the same entries and counts as on this machine"
    ENDPOINTS=()
    for i in 1 2; do
        port=$(free_port)
        "$REAL/ggml-rpc-server" -H 127.0.0.1 -p "$port" >"$WORK/rpc$i.log" 2>&1 &
        RPC_PIDS+=($!)
        ENDPOINTS+=("127.0.0.1:$port")
        wait_for "rpc-server $i's start (listening on 127.0.0.1:$port)" listening "$port"
    done
    RPC="--rpc $(IFS=,; echo "${ENDPOINTS[*]}")"
    run "$BIN" calibrate --model "$M" "${TEXTS[@]}" --ctx 128 --tokens 1024 --threads 1 --llama-bin "$REAL" \
        --llama-args "$RPC" -o "$WORK/rpc" --json
    expect_code 0
    expect_json 'd["llama_cpp"]["args"] == "'"$RPC"'".split() and d["texts"][0]["command"][-2:] == "'"$RPC"'".split() and d["sanity"] == []'
    for i in 1 2; do
        grep -q "Accepted client connection" "$WORK/rpc$i.log" && _pass || _fail "rpc-server $i was never used: $(cat "$WORK/rpc$i.log")"
    done
    for t in python c; do
        run python3 "$(dirname "$0")/../../tools/imatrix_diff.py" "$WORK/rpc/$t.imatrix.gguf" "$WORK/rec/out/$t.imatrix.gguf"
        expect_code 0
        expect_out "entries same (32); largest count difference 0;"
    done
    case_ "rpc: eval through them: the mean KLD within 2 % of the run on this machine"
    EV=(eval --source "$M" "$WORK/keep8.gguf" --text python="$TR/corpora/python.heldout.txt" --ctx 128 --chunks 8
        --llama-bin "$REAL" --cache-dir "$WORK/rpc-kld" --json)
    run "$BIN" "${EV[@]}"
    expect_code 0
    cp "$OUT" "$WORK/local-eval.json"
    run "$BIN" "${EV[@]}" --llama-args "$RPC"
    expect_code 0
    expect_json 'not d["texts"][0]["base_cached"] and d["runs"][0]["command"][-2:] == "'"$RPC"'".split()'
    local_kld=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["kld"]["mean"])' "$WORK/local-eval.json")
    expect_json 'abs(d["runs"][0]["kld"]["mean"] - '"$local_kld"') <= 0.02 * '"$local_kld"
    stop_rpc
    for p in "${RPC_PIDS[@]}"; do ! kill -0 "$p" 2>/dev/null && _pass || _fail "rpc-server $p still runs"; done
fi

finish
