# gguf-reap splice --neuron-plan: width pruning on generated models, its dry run and JSON, the pruned
# imatrix, and the refusals with their exact messages.
source "$(dirname "$0")/lib.sh"

# write_plan OUT BLOCKS EXPERTS N_FF K: a plan .npz (channels [pairs, K] uint16, k) made with the
# standard library only: channel c of pair p is (p * 7 + 3 * j) mod N_FF for j < K, in descending order.
write_plan() {
    /usr/bin/python3 - "$@" <<'PY'
import struct, sys, zipfile
out, blocks, experts, n_ff, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def npy(descr, shape, data):
    head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else ""))
    head += " " * ((64 - (10 + len(head) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + data
rows = []
for p in range(blocks * experts):
    ch = sorted({(p * 7 + 3 * j) % n_ff for j in range(n_ff)}, reverse=True)[:k]
    rows += ch
with zipfile.ZipFile(out, "w") as z:
    z.writestr("channels.npy", npy("<u2", (blocks * experts, k), struct.pack("<%dH" % len(rows), *rows)))
    z.writestr("k.npy", npy("<i8", (1,), struct.pack("<q", k)))
PY
}

case_ "splice --help names --neuron-plan"
run "$BIN" splice --help
expect_code 0
expect_out "--neuron-plan"

# deepseek2, 3 MoE blocks × 16 experts, n_ff 64, one shared expert (W = 64), F16 experts.
run "$GEN" model --skeleton -o "$WORK/m.gguf" --type-exps F16
expect_code 0
write_plan "$WORK/plan.npz" 3 16 64 32

case_ "dry run shows the width change and writes nothing"
run "$BIN" splice "$WORK/m.gguf" --neuron-plan "$WORK/plan.npz" -o "$WORK/w" --dry-run
expect_code 0
expect_out "3 MoE blocks, 16 → 16 experts per block"
expect_out "expert FFN width 64 → 32 channels per expert (neuron plan)"
[ ! -e "$WORK/w.gguf" ] && _pass || _fail "dry run wrote a file"

case_ "dry run --json carries the native width and K"
run "$BIN" splice "$WORK/m.gguf" --neuron-plan "$WORK/plan.npz" -o "$WORK/w" --dry-run --json
expect_code 0
expect_json "d['expert_width'] == {'native': 64, 'k': 32} and d['expert_count'] == 16"

case_ "without a plan the width is null"
printf '{"drop": {"1": [0], "2": [0], "3": [0]}}' >"$WORK/drop.json"
run "$BIN" splice "$WORK/m.gguf" --keeplist "$WORK/drop.json" -o "$WORK/w" --dry-run --json
expect_code 0
expect_json "d['expert_width'] is None and d['expert_count'] == 15"

case_ "real run with keeplist and imatrix: the output and the pruned imatrix read back"
run "$GEN" imatrix --model "$WORK/m.gguf" -o "$WORK/im.gguf"
run "$BIN" splice "$WORK/m.gguf" --keeplist "$WORK/drop.json" --neuron-plan "$WORK/plan.npz" \
    --imatrix-in "$WORK/im.gguf" --imatrix-out "$WORK/w-im.gguf" -o "$WORK/w" --json
expect_code 0
expect_json "d['expert_width']['k'] == 32 and d['copy']['gathered_bytes'] > 0"
run "$BIN" inspect --json "$WORK/w.gguf"
expect_code 0
expect_out '"deepseek2.expert_feed_forward_length"'
expect_out '"gguf_reap.neuron_plan_sha256"'
expect_out '"gguf_reap.source_expert_feed_forward_length"'
run "$BIN" inspect "$WORK/w-im.gguf"
expect_code 0

case_ "a quantized down projection: whole Q8_0 blocks are cut, part of one is refused"
run "$GEN" model --skeleton -o "$WORK/q.gguf" --type-exps Q8_0
# plan.npz keeps channels 32..63 of every expert: one whole Q8_0 block of each down row.
run "$BIN" splice "$WORK/q.gguf" --neuron-plan "$WORK/plan.npz" -o "$WORK/q-out"
expect_code 0
run "$BIN" audit "$WORK/q-out.gguf" --source "$WORK/q.gguf" --neuron-plan "$WORK/plan.npz"
expect_code 0
rm -f "$WORK/q-out.gguf"
# Channels 0..30 and 63: 31 of block 0, 1 of block 1.
/usr/bin/python3 - "$WORK/part.npz" <<'PY'
import struct, sys, zipfile
head = "{'descr': '<u2', 'fortran_order': False, 'shape': (48, 32), }"
head += " " * ((64 - (10 + len(head) + 1) % 64) % 64) + "\n"
row = list(range(31)) + [63]
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("channels.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() +
               struct.pack("<%dH" % (48 * 32), *(row * 48)))
PY
run "$BIN" splice "$WORK/q.gguf" --neuron-plan "$WORK/part.npz" -o "$WORK/q-out"
expect_code 2
expect_err "gguf-reap: error: $WORK/q.gguf: tensor 'blk.1.ffn_down_exps.weight' is Q8_0, whose rows hold blocks of 32 values: a width cut keeps whole blocks only, but $WORK/part.npz keeps 31 of the 32 channels 0..31 of block 1 expert 0: make the plan with \`plan-width --granularity block --model $WORK/q.gguf\` (or width-splice a BF16/F16 copy and requantise it with llama-quantize)"
expect_err_lines 1
expect_no_out
[ ! -e "$WORK/q-out.gguf" ] && _pass || _fail "refused splice wrote a file"

case_ "an illegal K is refused with the legal widths"
write_plan "$WORK/bad.npz" 3 16 64 48
run "$BIN" splice "$WORK/m.gguf" --neuron-plan "$WORK/bad.npz" -o "$WORK/bad-out"
expect_code 2
expect_err "K = 48 is not a legal expert width"
expect_err "legal widths are {1, 2, 4, 8, 16, 32, 64}"
expect_err_lines 1

case_ "a plan for another model is refused"
write_plan "$WORK/other.npz" 3 8 64 32
run "$BIN" splice "$WORK/m.gguf" --neuron-plan "$WORK/other.npz" -o "$WORK/o-out"
expect_code 2
expect_err "$WORK/other.npz"
expect_err_lines 1

case_ "neither keeplist nor plan"
run "$BIN" splice "$WORK/m.gguf" -o "$WORK/x"
expect_code 2
expect_err "splice needs --keeplist, --neuron-plan or both: nothing to prune"

finish
