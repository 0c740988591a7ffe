# ctest-parts: llama fixtures
source "$(dirname "$0")/lib.sh"
# Block-granular width cuts of quantized models, no float source (docs/plan-width.md, "Block
# granularity"): plan-width --granularity block → splice → audit → estimate on the shared Q8_0 fixture
# and on a generated qwen3moe whose experts are Q4_K (expert width 512, blocks of 256). With
# GGUF_REAP_LLAMA_BIN set to llama.cpp's bin directory (commit 34af94cd9), both cut models must also load
# and generate; without it those checks are skipped, and say so.
cd "$WORK"
LLAMA=${GGUF_REAP_LLAMA_BIN:-}
part llama "loading the width-cut models in llama.cpp $(live_why)" [ -n "$LLAMA" ]

# generates MODEL: llama.cpp loads it and prints more than the prompt.
generates() {
    [ -n "$LLAMA" ] || return 0
    case_ "llama.cpp generates from $1"
    run timeout 120 "$LLAMA/llama-simple" -m "$1" -n 4 "Hello world"
    expect_code 0
    [ "$(tr -d '\000\n' <"$OUT" | wc -c)" -gt 11 ] && _pass || _fail "no text generated after the prompt"
}

if fixtures "the cases on the Q8_0 fixture"; then
    Q8=$FIX/models/tiny-deepseek2-Q8_0.gguf
    IM=$FIX/imatrix/tiny-deepseek2

    case_ "Q8_0 fixture: a per-channel plan cannot be cut"
    run "$BIN" plan-width --model "$Q8" --imatrix chat="$IM.chat.imatrix.gguf" --k 128 -o chan.npz
    expect_code 0
    run "$BIN" splice "$Q8" --neuron-plan chan.npz -o refused
    expect_code 2
    expect_err "gguf-reap: error: $Q8: tensor 'blk.1.ffn_down_exps.weight' is Q8_0, whose rows hold blocks of 32 values: a width cut keeps whole blocks only, but chan.npz keeps "
    expect_err "make the plan with \`plan-width --granularity block --model $Q8\`"
    expect_err_lines 1
    [ ! -e refused.gguf ] && _pass || _fail "refused.gguf written"

    case_ "Q8_0 fixture: --granularity block"
    run "$BIN" plan-width --model "$Q8" --imatrix chat="$IM.chat.imatrix.gguf" --imatrix code="$IM.code.imatrix.gguf" \
        --k 128 --granularity block -o block.npz
    expect_code 0
    expect_out "kept 128 of 256 channels for 16 experts in each of 3 MoE blocks, from 2 domain(s)"
    expect_out "block granularity: whole groups of 32 channels (4 of 8 per expert), so every quant block of ffn_down_exps is kept or dropped whole"
    expect_out "(per channel: min "
    /usr/bin/python3 - <<'PY' && _pass || _fail "block plan and receipt"
import json, zipfile, io
r = json.load(open("block.json"))
g = r["granularity"]
assert g["unit"] == "block" and g["group"] == 32, g
assert g["block_size_from"] == ["blk.1.ffn_down_exps.weight Q8_0 (32)"], g
for b in r["blocks"]:
    assert b["energy_retained"]["median"] <= b["energy_retained_by_channel"]["median"], b
# Every row: whole aligned groups of 32, ascending.
import struct
z = zipfile.ZipFile("block.npz")
raw = z.read("channels.npy")
hl = struct.unpack("<H", raw[8:10])[0]
ids = struct.unpack("<%dH" % ((len(raw) - 10 - hl) // 2), raw[10 + hl:])
for p in range(len(ids) // 128):
    row = ids[p * 128:(p + 1) * 128]
    assert list(row) == sorted(row)
    for j in range(0, 128, 32):
        assert row[j] % 32 == 0 and list(row[j:j + 32]) == list(range(row[j], row[j] + 32)), (p, j)
PY
    run "$BIN" estimate "$Q8" --neuron-plan block.npz --json
    expect_code 0
    EST=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["after_requantised"], d["after"]["file_bytes"])' "$OUT")
    run "$BIN" splice "$Q8" --neuron-plan block.npz -o q8w --imatrix-in "$IM.chat.imatrix.gguf" --imatrix-out q8w.imatrix.gguf
    expect_code 0
    expect_out "expert FFN width 256 → 128 channels per expert (neuron plan)"
    [ "$EST" = "False $(stat -c %s q8w.gguf)" ] && _pass || _fail "estimate says '$EST', the output is $(stat -c %s q8w.gguf) bytes"
    run "$BIN" audit q8w.gguf --source "$Q8" --neuron-plan block.npz
    expect_code 0
    expect_out "width     128 of 256 FFN channels per expert kept (from the neuron plan block.npz)"
    expect_out "PASS: 1 shard(s), 70 tensors total"
    # The pruned imatrix has the kept channels of ffn_down_exps: 128 values per expert, which
    # llama-quantize checks against the tensor's ne0.
    /usr/bin/python3 - <<'PY' && _pass || _fail "pruned imatrix entry shape"
import struct
b = open("q8w.imatrix.gguf", "rb").read()
assert b[:4] == b"GGUF"
name = b"blk.1.ffn_down_exps.weight.in_sum2"
at = b.index(name) + len(name)
n_dims = struct.unpack_from("<I", b, at)[0]
ne = struct.unpack_from("<%dQ" % n_dims, b, at + 4)
assert ne[0] == 128 and ne[1] == 16, ne
PY
    generates q8w.gguf
fi

# A generated qwen3moe (llama.cpp's own layout) with Q4_K experts 512 wide.
run "$GEN" model --arch qwen3moe -o q4k.gguf --type-exps Q4_K --embd 256 --expert-ff 512
[ "$CODE" -eq 0 ] || _fail "gen model"
run "$GEN" imatrix --model q4k.gguf --domain chat --seed 1 -o chat.imatrix.gguf
run "$GEN" imatrix --model q4k.gguf --domain code --seed 2 -o code.imatrix.gguf
generates q4k.gguf

case_ "Q4_K: K must be whole blocks of 256"
run "$BIN" plan-width --model q4k.gguf --imatrix chat=chat.imatrix.gguf --k 128 --granularity block -o bad.npz
expect_code 2
expect_err "gguf-reap: error: K = 128 is not a legal expert width for q4k.gguf: rows of ffn_down_exps hold whole blocks of 256 elements, so K must be a multiple of 256; legal widths are {256, 512}"
[ ! -e bad.npz ] && _pass || _fail "bad.npz written"

case_ "Q4_K: --granularity block needs --model"
run "$BIN" plan-width --imatrix chat=chat.imatrix.gguf --k 256 --granularity block -o bad.npz
expect_code 2
expect_err "gguf-reap: error: --granularity block needs --model: the block size comes from the model's tensor types"

case_ "Q4_K: rank, then a block-granular width cut of the pruned experts"
run "$BIN" rank --imatrix chat=chat.imatrix.gguf --imatrix code=code.imatrix.gguf --model q4k.gguf --ratio 25% -o rank
expect_code 0
run "$BIN" plan-width --model q4k.gguf --imatrix chat=chat.imatrix.gguf --imatrix code=code.imatrix.gguf \
    --k 256 --granularity block -o q4k-plan.npz --json
expect_code 0
expect_json 'd["granularity"]["group"] == 256 and d["granularity"]["block_size_from"] == ["blk.0.ffn_down_exps.weight Q4_K (256)"]'
run "$BIN" splice q4k.gguf --keeplist rank/keeplist.json --neuron-plan q4k-plan.npz -o q4kw --json
expect_code 0
expect_json 'd["expert_width"]["native"] == 512 and d["expert_width"]["k"] == 256'
run "$BIN" audit q4kw.gguf --source q4k.gguf --keeplist rank/keeplist.json --neuron-plan q4k-plan.npz
expect_code 0
expect_out "width     256 of 512 FFN channels per expert kept (from the neuron plan q4k-plan.npz)"
generates q4kw.gguf

finish
