# ctest-parts: fixtures
source "$(dirname "$0")/lib.sh"
# A small generated model: 3 blocks (1 dense), 8 experts (2 used), embd 64, expert ff 32, F16 except
# the Q8_0 gate/up experts and the F32 router and norms (tests/estimate_test.cpp has the arithmetic).
"$GEN" model --skeleton --blocks 3 --dense-blocks 1 --experts 8 --used 2 --shared 1 --embd 64 --ff 128 --expert-ff 32 \
    --vocab 256 --heads 4 --type-exps Q8_0 --type-down F16 --type-attn F16 --type-embd F16 --type-output F16 \
    --type-shexp F16 --type-dense F16 -o "$WORK/m.gguf" >/dev/null
echo '{"drop": {"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}}' >"$WORK/keep.json"
SIZE=$(stat -c %s "$WORK/m.gguf")

case_ "estimate --help goes to stdout with exit 0"
run "$BIN" estimate --help
expect_code 0
expect_out "--neuron-plan"
expect_out "--gpu-mem"

case_ "text tables before and after"
run "$BIN" estimate "$WORK/m.gguf" --keeplist "$WORK/keep.json" --tp 2,3
expect_code 0
expect_out "architecture deepseek2; 2 MoE blocks, 8 experts (2 used per token), expert width 32"
expect_out "pruned to    4 experts per block, expert width 32"
expect_out "KV cache per token (F16): 768 B over 3 attention layers (4 KV heads × (key 16 + value 16) × 2 bytes in the first)"
expect_out "  1 (single)"
expect_out "  3 "
[ ! -s "$ERR" ] && _pass || _fail "stderr not empty"

case_ "--json: one document, integers, N = 1 first"
run "$BIN" estimate "$WORK/m.gguf" --keeplist "$WORK/keep.json" --tp 8,2 --json
expect_code 0
expect_json "d['before']['file_bytes'] == $SIZE and d['before']['file_bytes_exact'] is True"
expect_json "d['after']['expert_count'] == 4 and d['after']['expert_width'] == 32"
expect_json "[r['tp'] for r in d['tensor_parallel']] == [1, 2, 8]"
# 2 of 8 (or 4) experts are read per MoE block: Q8_0 gate and up slabs (32 rows of 68 bytes) and the
# F16 down slab (32 × 64 × 2), in 2 MoE blocks.
expect_json "d['before']['decode_bytes_per_token']['experts'] == 2 * 2 * (2 * 32 * 68 + 32 * 64 * 2)"
expect_json "d['after']['decode_bytes_per_token']['router'] == 2 * 64 * 4 * 4"
expect_json "d['kv_cache'] == {'kind': 'standard', 'bytes_per_token': 768, 'attention_layers': 3, 'stateful_layers': 0, 'cache_type': 'F16', 'cache_type_k': 'f16', 'cache_type_v': 'f16', 'heads_kv': 4, 'key_length': 16, 'value_length': 16}"
expect_json "d['tensor_parallel'][2]['kv_bytes_per_token'] == 3 * 1 * 32 * 2"
expect_json "d['tensor_parallel'][0]['before']['fits'] is None and d['gpu_mem'] is None"

case_ "the after-size equals splice --dry-run"
run "$BIN" splice "$WORK/m.gguf" --keeplist "$WORK/keep.json" -o "$WORK/out" --dry-run --json
SPLICED=$(/usr/bin/python3 -c "import json,sys; print(json.load(open('$OUT'))['bytes_written'])")
run "$BIN" estimate "$WORK/m.gguf" --keeplist "$WORK/keep.json" --json
expect_json "d['after']['file_bytes'] == $SPLICED and d['after']['file_bytes_exact'] is True"

case_ "a width plan: the after-size equals splice --dry-run --neuron-plan"
# channels [16 pairs, 16] uint16 (channels 15..0 of every expert), as an .npz written by hand.
/usr/bin/python3 - "$WORK/plan.npz" <<'PY'
import struct, sys, zipfile
def npy(descr, shape, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join("%d, " % n for n in shape))
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data
ch = b"".join(struct.pack("<H", c) for _ in range(16) for c in range(15, -1, -1))
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("channels.npy", npy("<u2", (16, 16), ch))
PY
run "$BIN" splice "$WORK/m.gguf" --keeplist "$WORK/keep.json" --neuron-plan "$WORK/plan.npz" -o "$WORK/w" --dry-run --json
SPLICED=$(/usr/bin/python3 -c "import json,sys; print(json.load(open('$OUT'))['bytes_written'])")
run "$BIN" estimate "$WORK/m.gguf" --keeplist "$WORK/keep.json" --neuron-plan "$WORK/plan.npz" --json
expect_code 0
expect_json "d['after']['file_bytes'] == $SPLICED and d['after']['file_bytes_exact'] is True"
expect_json "d['after']['expert_width'] == 16 and d['after']['expert_count'] == 4 and d['after_requantised'] is False"
# gate/up keep 16 rows of 68 bytes, down rows shrink to 16 F16 elements: per used expert and MoE block.
expect_json "d['after']['decode_bytes_per_token']['experts'] == 2 * 2 * (2 * 16 * 68 + 16 * 64 * 2)"

case_ "fits: per TP, with overhead and KV cache"
run "$BIN" estimate "$WORK/m.gguf" --gpu-mem 300KiB --overhead 10KiB --ctx 100 --tp 2 --json
expect_code 0
expect_json "d['gpu_mem'] == 300 * 1024 and d['overhead'] == 10240 and d['ctx'] == 100"
expect_json "[r['before']['fits'] for r in d['tensor_parallel']] == [False, True]"
expect_json "all(r['before']['need'] == r['before']['weights'] + r['before']['kv_cache'] + 10240 for r in d['tensor_parallel'])"
expect_json "all(r['before']['headroom'] == 300 * 1024 - r['before']['need'] for r in d['tensor_parallel'])"
expect_json "d['tensor_parallel'][1]['before']['kv_cache'] == 100 * 3 * 2 * 32 * 2"

case_ "fits in text"
run "$BIN" estimate "$WORK/m.gguf" --gpu-mem 300KiB --overhead 10KiB --ctx 100 --tp 2
expect_code 0
expect_out "against 300.0 KiB per GPU"
expect_out " NO, "
expect_out " fits, "

case_ "bad --tp: 0"
run "$BIN" estimate "$WORK/m.gguf" --tp 0
expect_code 2
expect_err "gguf-reap: error: --tp: '0' is not a tensor-parallel degree (a whole number from 1 to 65536; e.g. --tp 2,4,8)"
expect_err_lines 1
expect_no_out

case_ "bad --tp: abc"
run "$BIN" estimate "$WORK/m.gguf" --tp 2,abc
expect_code 2
expect_err "gguf-reap: error: --tp: 'abc' is not a tensor-parallel degree"

case_ "bad sizes"
run "$BIN" estimate "$WORK/m.gguf" --gpu-mem 12Q
expect_code 2
expect_err "gguf-reap: error: --gpu-mem '12Q' is not a size (write e.g. 141GiB, 80GB, 512MB; units: B, KB, MB, GB, TB (or K, M, G, T) and KiB, MiB, GiB, TiB)"
run "$BIN" estimate "$WORK/m.gguf" --overhead lots
expect_code 2
expect_err "gguf-reap: error: --overhead 'lots' is not a size (write e.g. 141GiB, 80GB, 512MB; units: B, KB, MB, GB, TB (or K, M, G, T) and KiB, MiB, GiB, TiB)"
run "$BIN" estimate "$WORK/m.gguf" --gpu-mem 0
expect_code 2
expect_err "gguf-reap: error: --gpu-mem must be more than 0 bytes"
run "$BIN" estimate "$WORK/m.gguf" --ctx abc
expect_code 2
expect_err "gguf-reap: error: --ctx 'abc' is not a number of tokens (a whole number, e.g. 131072)"
run "$BIN" estimate "$WORK/m.gguf" --ctx -1
expect_code 2
expect_err "gguf-reap: error: --ctx '-1' is not a number of tokens (a whole number, e.g. 131072)"

case_ "a keeplist for another model"
echo '{"drop": {"1": [0, 1, 2, 3], "2": [4, 5, 6, 7], "3": [1]}}' >"$WORK/other.json"
run "$BIN" estimate "$WORK/m.gguf" --keeplist "$WORK/other.json" --json
expect_code 2
expect_err "gguf-reap: error: $WORK/other.json: block 3 is in the keeplist but is not an MoE block of the model"
expect_no_out

case_ "a missing model is bad input"
run "$BIN" estimate "$WORK/nope.gguf"
expect_code 2
expect_err "nope.gguf: does not exist"

case_ "a dense model cannot take a keeplist"
"$GEN" model --skeleton --experts 0 -o "$WORK/dense.gguf" >/dev/null
run "$BIN" estimate "$WORK/dense.gguf" --keeplist "$WORK/keep.json"
expect_code 2
expect_err "gguf-reap: error: $WORK/dense.gguf: the model has no routed experts to prune (architecture 'deepseek2')"

if fixtures "the cases on the llama.cpp-made fixtures"; then
    case_ "MLA fixture: KV cache per token"
    run "$BIN" estimate "$FIX/models/tiny-deepseek2-Q8_0.gguf" --json
    expect_code 0
    expect_json "d['kv_cache']['kind'] == 'mla' and d['kv_cache']['bytes_per_token'] == (256 + 32) * 4 * 2"
    expect_json "all(r['kv_bytes_per_token'] == 2304 for r in d['tensor_parallel'])"

    case_ "MLA fixture with a drop spec: the after-size equals splice --dry-run"
    SPEC=$FIX/prune_specs/tiny-deepseek2.drop-dead.json
    run "$BIN" splice "$FIX/models/tiny-deepseek2-Q8_0.gguf" --keeplist "$SPEC" -o "$WORK/fx" --dry-run --json
    SPLICED=$(/usr/bin/python3 -c "import json,sys; print(json.load(open('$OUT'))['bytes_written'])")
    run "$BIN" estimate "$FIX/models/tiny-deepseek2-Q8_0.gguf" --keeplist "$SPEC" --json
    expect_code 0
    expect_json "d['after']['file_bytes'] == $SPLICED and d['after']['expert_count'] == 13"
fi

case_ "--svg into a missing folder: it is made, as rank and splice make theirs; a refused run leaves none"
run "$BIN" estimate "$WORK/m.gguf" --sweep --svg "$WORK/plots/new/sweep.svg"
expect_code 0
expect_out "wrote $WORK/plots/new/sweep.svg"
grep -q '<svg' "$WORK/plots/new/sweep.svg" && _pass || _fail "no plot in $WORK/plots/new"
echo "not a model" >"$WORK/not-a-model.gguf"
run "$BIN" estimate "$WORK/not-a-model.gguf" --sweep --svg "$WORK/plots2/new/sweep.svg"
expect_code 2
[ ! -e "$WORK/plots2" ] && _pass || _fail "the refused estimate left $(find "$WORK/plots2")"
finish
