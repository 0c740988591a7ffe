# The fixture generator's command line: help, exit codes, the invocations tools/setup.sh relies on,
# and files that gguf-reap itself reads back.
source "$(dirname "$0")/lib.sh"

case_ "help goes to stdout with exit 0"
run "$GEN" --help
expect_code 0
expect_out "model"
expect_out "imatrix"
run "$GEN" model --help
expect_code 0
expect_out "--type-exps"
run "$GEN" imatrix --help
expect_code 0
expect_out "--dat-generation"

case_ "a subcommand is required"
run "$GEN"
expect_code 2
expect_err "gguf-reap-gen: error: A subcommand is required"

case_ "unknown option is a usage error"
run "$GEN" model --skeleton -o "$WORK/x.gguf" --bogus
expect_code 2
expect_err "gguf-reap-gen: error:"
expect_no_out

case_ "tiny model, read back by gguf-reap inspect"
run "$GEN" model --skeleton -o "$WORK/tiny.gguf"
expect_code 0
expect_out "wrote $WORK/tiny.gguf (51 tensors, 1,893,344 bytes)"
expect_out "4 blocks (3 MoE × 16 experts), 51 tensors"
run "$BIN" inspect --json "$WORK/tiny.gguf"
expect_code 0
expect_json "d['arch'] == 'deepseek2' and d['moe_layers'] == [1, 2, 3] and d['expert_count'] == 16 and d['tensor_count'] == 51"

case_ "the demo of tools/setup.sh: two shards, two imatrix domains"
mkdir -p "$WORK/demo"
run "$GEN" model --skeleton --preset demo --shards 2 -o "$WORK/demo/model"
expect_code 0
expect_out "wrote $WORK/demo/model-00001-of-00002.gguf"
expect_out "wrote $WORK/demo/model-00002-of-00002.gguf"
run "$GEN" imatrix --model "$WORK/demo/model-00001-of-00002.gguf" --domain chat --seed 1 -o "$WORK/demo/chat.imatrix.gguf"
expect_code 0
expect_out "wrote $WORK/demo/chat.imatrix.gguf (gguf imatrix"
run "$GEN" imatrix --model "$WORK/demo/model-00001-of-00002.gguf" --domain code --seed 2 -o "$WORK/demo/code.imatrix.gguf"
expect_code 0
run "$BIN" inspect --json "$WORK/demo/model-00002-of-00002.gguf"
expect_code 0
expect_json "len(d['shards']) == 2 and d['expert_count'] == 64 and d['moe_layers'] == [1, 2, 3, 4, 5]"
run "$BIN" inspect "$WORK/demo/code.imatrix.gguf"
expect_code 0
expect_out "datasets     code"

case_ "a bad type names the option, one line, nothing written"
run "$GEN" model --skeleton -o "$WORK/bad.gguf" --type-down IQ2_XXS
expect_code 2
expect_err "gguf-reap-gen: error: --type-down IQ2_XXS: blk.1.ffn_down_exps.weight has rows of 64 elements (--expert-ff), not a multiple of the 256-element blocks of IQ2_XXS"
expect_err_lines 1
[ ! -e "$WORK/bad.gguf" ] && _pass || _fail "bad.gguf was written"

case_ "--dry-run writes nothing"
run "$GEN" model --skeleton -o "$WORK/dry.gguf" --preset kimi-k3 --dry-run
expect_code 0
expect_out "would write $WORK/dry.gguf (1300 tensors"
expect_out "93 blocks (92 MoE × 896 experts)"
[ ! -e "$WORK/dry.gguf" ] && _pass || _fail "dry.gguf was written"

case_ "legacy .dat imatrix and its ground truth"
run "$GEN" imatrix --model "$WORK/tiny.gguf" --format dat --dat-generation nan --dead 1:2 --tokens 2048 \
    -o "$WORK/x.imatrix.dat" --truth "$WORK/truth.json"
expect_code 0
expect_out "wrote $WORK/x.imatrix.dat (dat nan"
run "$BIN" inspect --json "$WORK/x.imatrix.dat"
expect_code 0
run cat "$WORK/truth.json"
expect_json "all(sum(b['counts']) == 2048 * 4 for b in d['blocks']) and d['blocks'][0]['dead'] == [2] and d['chunk_count'] == 4"

case_ "imatrix needs --model"
run "$GEN" imatrix -o "$WORK/y.gguf"
expect_code 2
expect_err "--model is required"

case_ "imatrix of a file that is not a model"
printf 'not a gguf' >"$WORK/junk.gguf"
run "$GEN" imatrix --model "$WORK/junk.gguf" -o "$WORK/y.gguf"
expect_code 2
expect_err "gguf-reap-gen: error: $WORK/junk.gguf: magic at offset 0 (0x0): not a GGUF file"
[ ! -e "$WORK/y.gguf" ] && _pass || _fail "y.gguf was written"

case_ "--set-key changes one key in its own type, removes one, and refuses a bad value"
run "$GEN" model --arch deepseek2 -o "$WORK/sk.gguf" --set-key leading_dense_block_count=2 \
    --set-key deepseek2.expert_shared_count=
expect_code 0
run "$BIN" inspect --json "$WORK/sk.gguf"
expect_json "d['kv']['deepseek2.leading_dense_block_count'] == 2 and 'deepseek2.expert_shared_count' not in d['kv']"
run "$GEN" model --arch deepseek2 -o "$WORK/sk2.gguf" --set-key deepseek2.expert_count=-1
expect_code 2
expect_err "gguf-reap-gen: error: --set-key deepseek2.expert_count=-1: '-1' is not a non-negative integer"
[ ! -e "$WORK/sk2.gguf" ] && _pass || _fail "sk2.gguf was written"

finish
