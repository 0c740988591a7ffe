# --llama-args (and $GGUF_REAP_LLAMA_ARGS) on eval: split as a shell splits words, passed after gguf-reap's
# own arguments to llama-perplexity and llama-completion (llama-tokenize gets none), recorded in every
# command of eval.json, part of the base-logits cache key; a colliding argument is refused before any run.
# The llama.cpp tools are the fakes of tests/cli/fake-llama/ (test_eval.sh), which accept the extra
# arguments of $FAKE_LLAMA_ALLOW only after the recorded ones; the arguments are also checked where
# gguf-reap records them. Each fake refuses an argument or a value its recordings did not have.
# With GGUF_REAP_LLAMA_BIN set to llama.cpp's bin directory, the table of which tool takes which option
# (ARGS_TABLE below, generated from the tools' --help) must be what the pinned build's --help gives again.
# ctest-parts: llama
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ARGS_TABLE=$ROOT/$(bash "$ROOT/tools/llama-args-table.sh" --path)  # the table's place, from the one script that knows it
TR=$FIX/trained
[ -f "$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf" ] || skip_all "no trained fixture in $TR"
FAKE=$(cd "$(dirname "$0")/fake-llama" && pwd)
M=$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf
cp "$TR/corpora/python.heldout.txt" "$WORK/"
IM=()
for d in c changelog legal markdown python; do IM+=(--imatrix "$d=$TR/imatrix/tiny-qwen3moe-trained-A.$d.imatrix.gguf"); done
"$BIN" -q rank --model "$M" "${IM[@]}" --keep 8 -o "$WORK/rank8" >/dev/null
"$BIN" -q splice "$M" --keeplist "$WORK/rank8/keeplist.json" -o "$WORK/keep8" >/dev/null
EVAL=(eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" --ctx 128 --chunks 8
    --llama-bin "$FAKE" --cache-dir "$WORK/cache")
export FAKE_LLAMA_CALLS=$WORK/calls
# The fakes refuse an argument their recordings lacked, and one of these before gguf-reap's own.
export FAKE_LLAMA_ALLOW='-ngl 99 -ot blk\.[0-3]\.ffn_.*_exps=CPU --rpc 127.0.0.1:1,127.0.0.1:2'
REAL=${GGUF_REAP_LLAMA_BIN:-}
unset GGUF_REAP_LLAMA_BIN GGUF_REAP_LLAMA_ARGS

case_ "without --llama-args the commands are as before, and the base logits are cached"
run "$BIN" "${EVAL[@]}" --json
expect_code 0
expect_json '"args" not in d["llama_cpp"] and d["runs"][0]["command"][-1] == "--kl-divergence"'
run "$BIN" "${EVAL[@]}" --json
expect_json 'd["texts"][0]["base_cached"]'

case_ "--llama-args: split as a shell would, after gguf-reap's arguments, in every command but llama-tokenize's"
: >"$WORK/calls"
run "$BIN" "${EVAL[@]}" --llama-args "-ngl 99 -ot 'blk\.[0-3]\.ffn_.*_exps=CPU' --rpc \"127.0.0.1:1,127.0.0.1:2\"" --json
expect_code 0
A='["-ngl", "99", "-ot", "blk\\.[0-3]\\.ffn_.*_exps=CPU", "--rpc", "127.0.0.1:1,127.0.0.1:2"]'
expect_json 'd["llama_cpp"]["args"] == '"$A"
expect_json 'd["runs"][0]["command"][-7:] == ["--kl-divergence"] + '"$A"
expect_json 'd["texts"][0]["base_command"][-7:-6] == [d["texts"][0]["base_file"]] and d["texts"][0]["base_command"][-6:] == '"$A"
expect_json '"-ngl" not in d["texts"][0]["tokenize_command"]'
case_ "other llama.cpp arguments make other base logits (a new cache entry), reused by the next run"
expect_json 'not d["texts"][0]["base_cached"]'
[ "$(grep -c '^base' "$WORK/calls")" -eq 1 ] && _pass || _fail "base runs: $(cat "$WORK/calls")"
run "$BIN" "${EVAL[@]}" --llama-args "-ngl 99 -ot 'blk\.[0-3]\.ffn_.*_exps=CPU' --rpc 127.0.0.1:1,127.0.0.1:2" --json
expect_json 'd["texts"][0]["base_cached"]'
[ "$(ls "$WORK/cache"/*.kld | wc -l)" -eq 2 ] && _pass || _fail "cache entries: $(ls "$WORK/cache")"

case_ "GGUF_REAP_LLAMA_ARGS is the default; --llama-args \"\" overrides it"
run env GGUF_REAP_LLAMA_ARGS="-ngl 99" "$BIN" "${EVAL[@]}" --json
expect_code 0
expect_json 'd["llama_cpp"]["args"] == ["-ngl", "99"] and d["runs"][0]["command"][-2:] == ["-ngl", "99"]'
run env GGUF_REAP_LLAMA_ARGS="-ngl 99" "$BIN" "${EVAL[@]}" --llama-args "" --json
expect_json '"args" not in d["llama_cpp"] and d["texts"][0]["base_cached"]'

case_ "the smoke test's llama-completion gets them too"
run "$BIN" "${EVAL[@]}" --llama-args "-ngl 99" --smoke-prompt 'def main(' --json
expect_code 0
expect_json 'd["smoke"]["source"]["command"][-2:] == ["-ngl", "99"]'

case_ "a colliding argument is refused before anything runs, naming it"
: >"$WORK/calls"
for a in "-c 4096" "--ctx-size 4096" "-m other.gguf" "-f x.txt" "-b 512" "-o out" "--chunks 2" "--kl-divergence" \
    "--kl-divergence-base x.kld" "--in-file a.gguf" "--output-format dat" "-t 4"; do
    run "$BIN" "${EVAL[@]}" --llama-args "-ngl 99 $a"
    expect_code 2
    expect_err "error: --llama-args: ${a%% *} collides with an argument gguf-reap sets for llama-perplexity"
done
run "$BIN" "${EVAL[@]}" --llama-args "-c 4096"
expect_err "error: --llama-args: -c collides with an argument gguf-reap sets for llama-perplexity: give gguf-reap's --ctx N instead"
expect_err_lines 1
run env GGUF_REAP_LLAMA_ARGS="--kl-divergence-base x" "$BIN" "${EVAL[@]}"
expect_code 2
expect_err "error: GGUF_REAP_LLAMA_ARGS: --kl-divergence-base collides with an argument gguf-reap sets for llama-perplexity"
run "$BIN" "${EVAL[@]}" --llama-args "--temp 0.8" --smoke-prompt 'def main('
expect_code 2
expect_err "error: --llama-args: --temp collides with an argument gguf-reap sets for llama-completion"
[ ! -s "$WORK/calls" ] && _pass || _fail "a refused eval ran llama.cpp: $(cat "$WORK/calls")"

case_ "each fake refuses an argument, and a value, that its recordings did not have, and says which"
# The recorded command of each (tests/cli/fake-llama/), then one more argument or one value changed.
KLD=$WORK/fake.kld
head -c 1669 "$TR/corpora/python.calib.txt" >"$WORK/cut.txt" && echo >>"$WORK/cut.txt"
PPL=(-m "$M" -f "$WORK/python.heldout.txt" -c 128 -b 2048 --chunks 8 --no-escape --kl-divergence-base "$KLD")
IMX=(-m "$M" -f "$WORK/cut.txt" -c 128 -b 128 --no-escape --output-format gguf -o "$WORK/fake.imatrix.gguf" -t 1)
CMPL=(-m "$M" -p 'def main(' -n 16 -c 256 --temp 0 --top-k 1 -s 1 -no-cnv --no-warmup --no-escape --verbose-prompt
    --prompt-cache "$WORK/fake.session" --prompt-cache-all)
TOK=(-m "$M" --stdin --no-escape --ids --show-count --log-disable)
SRV=(-m "$M" --host 127.0.0.1 --port 1 -np 4 -c 1024 --no-webui --cors-origins localhost)
# refused TOOL WHAT ARGS...: the fake exits 1, its one line on stderr (nothing on stdout) saying WHAT.
refused() {
    local tool=$1 what=$2
    shift 2
    run env -u FAKE_LLAMA_ALLOW "$FAKE/$tool" "$@"
    expect_code 1
    expect_no_out
    expect_err_lines 1
    expect_err "fake $tool: $what"
}
refused llama-perplexity "--bogus: not an argument of the recorded runs" "${PPL[@]}" --bogus
refused llama-perplexity "-c 64: the recorded runs used -c 128" "${PPL[@]/#128/64}"
refused llama-imatrix "--bogus: not an argument of the recorded runs" "${IMX[@]}" --bogus
refused llama-imatrix "-b 64: the recorded runs used -b 128" "${IMX[@]:0:7}" 64 "${IMX[@]:8}"
refused llama-imatrix "no -t: the recorded runs all had it" "${IMX[@]:0:13}"
# The recorded text by a path: the recordings name python.txt, the name calibrate gives it (issue 40).
refused llama-imatrix "-f $WORK/cut.txt: the recorded runs used -f python.txt" "${IMX[@]}"
refused llama-completion "--bogus: not an argument of the recorded runs" "${CMPL[@]}" --bogus
refused llama-completion "-n 17: the recorded runs used -n 16" "${CMPL[@]/#16/17}"
refused llama-tokenize "--bogus: not an argument of the recorded runs" "${TOK[@]}" --bogus
refused llama-server "--bogus: not an argument of the recorded runs" "${SRV[@]}" --bogus
refused llama-server "--cors-origins example.com: the recorded runs used --cors-origins localhost" "${SRV[@]/#localhost/example.com}"
refused llama-server "no --cors-origins: the recorded runs of source all had it" "${SRV[@]:0:11}"
# llama-tokenize's one value is its text on stdin, recognised by its size.
CODE=0
echo "not a recorded text" | env -u FAKE_LLAMA_ALLOW "$FAKE/llama-tokenize" "${TOK[@]}" >"$OUT" 2>"$ERR" || CODE=$?
expect_code 1
expect_err "fake llama-tokenize: no recorded count for a text of 20 bytes"
# and none of them wrote anything
[ ! -e "$KLD" ] && [ ! -e "$WORK/fake.imatrix.gguf" ] && [ ! -e "$WORK/fake.session" ] && _pass || _fail "a refusing fake wrote a file"

case_ "arguments a shell could not split are refused"
run "$BIN" "${EVAL[@]}" --llama-args "-ot 'exps=CPU"
expect_code 2
expect_err "error: --llama-args: the ' at character 5 is never closed"
run "$BIN" "${EVAL[@]}" --llama-args '-ngl 99 \'
expect_code 2
expect_err "error: --llama-args: it ends in a backslash that escapes nothing"

if part llama "re-deriving $ARGS_TABLE from the pinned build's --help $(live_why)" [ -n "$REAL" ]; then
    case_ "the table of each tool's options is what tools/llama-args-table.sh derives from the pinned build's --help"
    run bash "$ROOT/tools/llama-args-table.sh" "$REAL"
    expect_code 0
    diff -u "$ARGS_TABLE" "$OUT" >"$WORK/table.diff" && _pass ||
        _fail "$ARGS_TABLE differs from what $REAL's --help gives (after a deliberate move of the pin: tools/llama-args-table.sh DIR >$ARGS_TABLE): $(head -c 3000 "$WORK/table.diff")"
fi

finish
