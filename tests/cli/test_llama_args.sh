# --llama-args (and $GGUF_REAP_LLAMA_ARGS) on eval: split as a shell splits words, passed after gguf-reap's
# own arguments to llama-perplexity and llama-completion (llama-tokenize gets none), recorded in every
# command of eval.json, part of the base-logits cache key; a colliding argument is refused before any run.
# The llama.cpp tools are the fakes of tests/cli/fake-llama/ (test_eval.sh), which ignore what they do not
# replay; the arguments are checked where gguf-reap records them.
source "$(dirname "$0")/lib.sh"
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
unset GGUF_REAP_LLAMA_BIN GGUF_REAP_LLAMA_ARGS

case_ "without --llama-args the commands are as before, and the base logits are cached"
run "$BIN" "${EVAL[@]}" --json
expect_code 0
expect_json 'd["llama_cpp"]["args"] == [] and d["runs"][0]["command"][-1] == "--kl-divergence"'
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
expect_json 'd["llama_cpp"]["args"] == [] and d["texts"][0]["base_cached"]'

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

case_ "arguments a shell could not split are refused"
run "$BIN" "${EVAL[@]}" --llama-args "-ot 'exps=CPU"
expect_code 2
expect_err "error: --llama-args: the ' at character 5 is never closed"
run "$BIN" "${EVAL[@]}" --llama-args '-ngl 99 \'
expect_code 2
expect_err "error: --llama-args: it ends in a backslash that escapes nothing"

finish
