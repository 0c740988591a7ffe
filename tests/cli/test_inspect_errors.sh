# ctest-parts: fixtures
source "$(dirname "$0")/lib.sh"
# Bad input through the real binary: exit 2, exactly one line on stderr naming file, offset and field,
# nothing on stdout (also with --json). Files are made with the fuzz seed writer.
SEEDS=$(cd "$(dirname "$0")/../fuzz" && pwd)
mkfile() {  # mkfile OUT PYTHON_EXPR (m = make_seeds, struct imported)
    /usr/bin/python3 - "$SEEDS" "$1" "$2" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[1])
import make_seeds as m
open(sys.argv[2], "wb").write(eval(sys.argv[3]))
PY
}
# refused FILE LINE: inspect (text and --json) must exit 2 with exactly LINE on stderr.
refused() {
    for mode in "" --json; do
        run "$BIN" inspect $mode "$1"
        expect_code 2
        expect_no_out
        expect_err_lines 1
        expect_err "gguf-reap: error: $2"
    done
}

case_ "GGUFv1"
mkfile "$WORK/v1.gguf" "b'GGUF' + struct.pack('<IIQ', 1, 0, 0)"
refused "$WORK/v1.gguf" "$WORK/v1.gguf: version at offset 4 (0x4): GGUFv1 is no longer supported (ggml removed it in 2023); re-convert the model"

case_ "big-endian file"
mkfile "$WORK/be.gguf" "b'GGUF' + struct.pack('>Iqq', 3, 0, 0)"
refused "$WORK/be.gguf" "$WORK/be.gguf: version at offset 4 (0x4): version field 0x03000000 is byte-swapped"

case_ "duplicate key"
mkfile "$WORK/dup.gguf" "m.gguf([m.kv('a', m.U8, b'\\1'), m.kv('a', m.U8, b'\\2')], [])"
refused "$WORK/dup.gguf" "$WORK/dup.gguf: kv #1 'a' at offset 38 (0x26): duplicate key"

case_ "unknown tensor type"
mkfile "$WORK/type.gguf" "b'GGUF' + struct.pack('<Iqq', 3, 1, 0) + m.s('t') + struct.pack('<Iq', 1, 32) + struct.pack('<iQ', 43, 0) + bytes(64)"
refused "$WORK/type.gguf" "$WORK/type.gguf: tensor #0 't' type at offset 45 (0x2d): unknown ggml type id 43"

case_ "tensor data past the end of the file"
mkfile "$WORK/short.gguf" "m.gguf([], [('t', [64], 0)])[:-1]"
refused "$WORK/short.gguf" "$WORK/short.gguf: tensor #0 't' data at offset 49 (0x31): data [64, +256) lies outside the file of 319 bytes (truncated file?)"

case_ "expert tensor with the wrong number of experts"
mkfile "$WORK/moe.gguf" "(lambda kv, t: m.gguf(kv, [(n, [32, 2, 3] if n == 'blk.1.ffn_gate_exps.weight' else ne, ty) for n, ne, ty in t]))(*m.moe_parts())"
run "$BIN" inspect "$WORK/moe.gguf"
expect_code 2
expect_err_lines 1
expect_err "tensor 'blk.1.ffn_gate_exps.weight' at offset"
expect_err "has shape {32, 2, 3, 1} but gate_exps tensors must have ne[2] = expert_count = 4"

case_ "a deepseek4 token → expert table whose rows are not expert_used_count long is refused"
mkfile "$WORK/ds4.gguf" "m.gguf([m.kv('general.architecture', m.STR, m.s('deepseek4')), m.kv('deepseek4.expert_count', m.U32, struct.pack('<I', 4))], [('blk.1.ffn_gate_tid2eid.weight', [2, 8], 26)])"
refused "$WORK/ds4.gguf" "$WORK/ds4.gguf: tensor 'blk.1.ffn_gate_tid2eid.weight' at offset 111 (0x6f): has shape {2, 8, 1, 1} and type I32, but a token → expert table is I32 [expert_used_count = 0, n_vocab] inside a block"

case_ "split count in a file not named as a shard"
mkfile "$WORK/split.gguf" "m.moe_model(split=(0, 2, 8))"
run "$BIN" inspect "$WORK/split.gguf"
expect_code 2
expect_err "kv 'split.count' at offset"
expect_err "split.count is 2 but the file name does not follow PREFIX-NNNNN-of-MMMMM.gguf"

if fixtures "the cases on the llama.cpp-made fixtures"; then
    S=$FIX/shards/tiny-deepseek2-IQ2_XXS
    case_ "missing shard"
    mkdir -p "$WORK/set"
    cp "$S-00001-of-00003.gguf" "$S-00003-of-00003.gguf" "$WORK/set/"
    refused "$WORK/set/tiny-deepseek2-IQ2_XXS-00003-of-00003.gguf" "$WORK/set/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf: shard: missing shard 2 of 3 (the set $WORK/set/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf needs every shard)"

    case_ "extra shard beside the set"
    cp "$S-00002-of-00003.gguf" "$WORK/set/"
    cp "$S-00003-of-00003.gguf" "$WORK/set/tiny-deepseek2-IQ2_XXS-00004-of-00003.gguf"
    refused "$WORK/set/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf" "$WORK/set/tiny-deepseek2-IQ2_XXS-00004-of-00003.gguf: shard: extra shard beside a set of 3"
    rm "$WORK/set/tiny-deepseek2-IQ2_XXS-00004-of-00003.gguf"

    case_ "shards renamed out of order"
    mv "$WORK/set/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf" "$WORK/set/x"
    mv "$WORK/set/tiny-deepseek2-IQ2_XXS-00003-of-00003.gguf" "$WORK/set/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf"
    mv "$WORK/set/x" "$WORK/set/tiny-deepseek2-IQ2_XXS-00003-of-00003.gguf"
    refused "$WORK/set/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf" "$WORK/set/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf: kv 'split.no' at offset 24 (0x18): split.no is 2 but the file is shard 2 of 3 (expected 1)"

    case_ "a shard cut short"
    cp "$S-00002-of-00003.gguf" "$S-00003-of-00003.gguf" "$WORK/set/"
    head -c 1000000 "$S-00002-of-00003.gguf" >"$WORK/set/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf"
    run "$BIN" inspect "$WORK/set/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf"
    expect_code 2
    expect_err_lines 1
    expect_err "$WORK/set/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf: tensor #"
    expect_err "lies outside the file of 1000000 bytes (truncated file?)"
fi
finish
