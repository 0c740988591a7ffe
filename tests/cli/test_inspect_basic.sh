# ctest-parts: fixtures
source "$(dirname "$0")/lib.sh"
# Small GGUF files are made here with the seed writer of the fuzz corpora (tests/fuzz/make_seeds.py).
SEEDS=$(cd "$(dirname "$0")/../fuzz" && pwd)
mkgguf() {  # mkgguf OUT PYTHON_EXPR: writes the bytes of EXPR (m = make_seeds) to OUT
    /usr/bin/python3 - "$SEEDS" "$1" "$2" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import make_seeds as m
open(sys.argv[2], "wb").write(eval(sys.argv[3]))
PY
}

case_ "help goes to stdout with exit 0"
run "$BIN" --help
expect_code 0
expect_out "inspect"

case_ "inspect --help goes to stdout with exit 0"
run "$BIN" inspect --help
expect_code 0
expect_out "--tensors"

case_ "unknown option is a usage error"
run "$BIN" inspect --bogus x
expect_code 2
expect_err "gguf-reap: error:"

case_ "inspect without a path is a usage error"
run "$BIN" inspect
expect_code 2
expect_err "PATH is required"
expect_no_out

case_ "missing file is bad input"
run "$BIN" inspect "$WORK/nope.gguf"
expect_code 2
expect_err "nope.gguf: does not exist"

case_ "a directory is bad input"
run "$BIN" inspect "$WORK"
expect_code 2
expect_err "gguf-reap: error: $WORK: is a directory, not a file"

case_ "not a GGUF file"
printf 'hello world, not gguf' >"$WORK/x.gguf"
run "$BIN" inspect "$WORK/x.gguf"
expect_code 2
expect_err "x.gguf: magic at offset 0 (0x0): not a GGUF file"
expect_err_lines 1
expect_no_out

case_ "a truncated model is one line on stderr, nothing on stdout, even with --json"
mkgguf "$WORK/tiny.gguf" "m.moe_model()"
head -c 1000 "$WORK/tiny.gguf" >"$WORK/cut.gguf"
run "$BIN" inspect --json "$WORK/cut.gguf"
expect_code 2
expect_err_lines 1
expect_err "gguf-reap: error: $WORK/cut.gguf: tensor #"
expect_err "(truncated file?)"
expect_no_out

case_ "text summary of a small MoE model"
run "$BIN" inspect "$WORK/tiny.gguf"
expect_code 0
expect_out "model        $WORK/tiny.gguf"
expect_out "architecture deepseek2 (GGUF v3, alignment 32)"
expect_out "tensors      8 ("
expect_out "5 key/value pairs"
expect_out "  MoE blocks   1 (blk.1..blk.1)"
expect_out "  experts      4 per block, 2 used per token, 0 shared"
expect_out "  groups       none (routing is not group-limited)"
expect_out "decode reads "
[ ! -s "$ERR" ] && _pass || _fail "stderr not empty"

case_ "--json prints exactly one document"
run "$BIN" inspect --json "$WORK/tiny.gguf"
expect_code 0
expect_json "d['kind'] == 'model' and d['arch'] == 'deepseek2' and d['tensor_count'] == 8 and d['kv_count'] == 5"
expect_json "d['moe']['experts'] == 4 and d['moe']['used'] == 2 and d['moe_layers'] == [1] and d['n_layers'] == 2"
expect_json "[t['role'] for t in d['moe']['per_block'][0]['tensors']] == ['router', 'exp_probs_b', 'gate_exps', 'up_exps', 'down_exps']"
# Q8_0 [32, 2, 4] slabs are 2 rows of 34 bytes; 2 of 4 experts are used per token; the router
# [32, 4] F32 (512) and exp_probs_b [4] F32 (16) are read whole.
expect_json "d['moe']['per_block'][0]['slab_bytes'] == 3 * 68 and d['decode_bytes_per_token']['experts'] == 2 * 3 * 68"
expect_json "d['decode_bytes_per_token']['router'] == 512 + 16"
expect_json "'tensors' not in d"

case_ "--json --tensors lists every tensor with its absolute offset"
run "$BIN" inspect --json --tensors "$WORK/tiny.gguf"
expect_code 0
expect_json "[t['name'] for t in d['tensors']][:2] == ['token_embd.weight', 'blk.0.ffn_up.weight']"
expect_json "d['tensors'][4] == {'name': 'blk.1.ffn_gate_exps.weight', 'type': 'Q8_0', 'ne': [32, 2, 4], 'shard': 0, 'offset': d['shards'][0]['data_start'] + 896, 'nbytes': 272}"

case_ "--tensors in text"
run "$BIN" inspect --tensors "$WORK/tiny.gguf"
expect_code 0
expect_out "blk.1.ffn_down_exps.weight"
expect_out "Q8_0     {32,2,4} shard 1 offset"

case_ "a GGUF without tensors or keys"
mkgguf "$WORK/empty.gguf" "m.gguf([], [])"
run "$BIN" inspect --json "$WORK/empty.gguf"
expect_code 0
expect_json "d['arch'] == '' and d['tensor_count'] == 0 and d['moe'] is None and d['decode_bytes_per_token']['total'] == 0"

if fixtures "the cases on the llama.cpp-made fixtures"; then
    case_ "inspect --json on a fixture model"
    run "$BIN" inspect --json "$FIX/models/tiny-deepseek2-Q8_0.gguf"
    expect_code 0
    expect_json "d['arch'] == 'deepseek2' and d['tensor_count'] == 70 and d['moe']['experts'] == 16"
fi
finish
