source "$(dirname "$0")/lib.sh"
# plan-width through the real binary: a plan from generated imatrices, the receipt, --json, and the
# refusals with their exact text (bad K lists the legal widths, missing imatrix, wrong model, existing
# output).
cd "$WORK"
run "$GEN" model --skeleton --preset tiny --type-exps F16 -o m.gguf
run "$GEN" model --skeleton --preset tiny --experts 8 -o other.gguf
run "$GEN" imatrix --model m.gguf --domain chat --seed 1 -o chat.imatrix.gguf
run "$GEN" imatrix --model m.gguf --domain code --seed 2 --format dat -o code.imatrix.dat

case_ "plan with --model"
run "$BIN" plan-width --imatrix chat=chat.imatrix.gguf --imatrix code=code.imatrix.dat --k 32 -o plan.npz \
    --model m.gguf
expect_code 0
expect_out "kept 32 of 64 channels for 16 experts in each of 3 MoE blocks, from 2 domain(s)"
expect_out "wrote plan.npz, plan.json"
[ -f plan.npz ] && [ -f plan.json ] && _pass || _fail "plan.npz or plan.json missing"
/usr/bin/python3 - <<'PY' && _pass || _fail "receipt content"
import json, hashlib
r = json.load(open("plan.json"))
assert r["k"] == 32 and r["native_width"] == 64 and r["expert_count"] == 16 and r["pairs"] == 48
assert r["plan"]["sha256"] == hashlib.sha256(open("plan.npz", "rb").read()).hexdigest()
assert [i["name"] for i in r["inputs"]] == ["chat", "code"]
assert r["inputs"][1]["sha256"] == hashlib.sha256(open("code.imatrix.dat", "rb").read()).hexdigest()
assert r["model"]["legal_widths"] == [1, 2, 4, 8, 16, 32, 64]
assert [b["block"] for b in r["blocks"]] == [1, 2, 3]
PY

case_ "existing output"
run "$BIN" plan-width --imatrix chat=chat.imatrix.gguf --k 32 -o plan.npz
expect_code 2
expect_err_lines 1
expect_err "gguf-reap: error: plan.npz exists; use --force to overwrite it"

case_ "--force and --json"
run "$BIN" plan-width --imatrix chat=chat.imatrix.gguf --k 16 -o plan.npz --force --json
expect_code 0
expect_json 'd["k"] == 16 and d["model"] is None and d["files"] == {"plan": "plan.npz", "receipt": "plan.json"}'

case_ "bad K lists the legal widths"
run "$BIN" plan-width --imatrix chat=chat.imatrix.gguf --k 48 -o p2.npz --model m.gguf
expect_code 2
expect_no_out
expect_err_lines 1
expect_err "gguf-reap: error: K = 48 is not a legal expert width for m.gguf: the loader sizes the shared experts as deepseek2.expert_feed_forward_length × deepseek2.expert_shared_count, so deepseek2.expert_shared_count must become W / K = 64 / 48, which is not a whole number; legal widths are {1, 2, 4, 8, 16, 32, 64}"
[ ! -e p2.npz ] && [ ! -e p2.json ] && _pass || _fail "a refused run left output"

case_ "missing imatrix"
run "$BIN" plan-width --imatrix chat=nope.gguf --k 32 -o p3.npz
expect_code 2
expect_err "gguf-reap: error: nope.gguf: does not exist"

case_ "wrong model"
run "$BIN" plan-width --imatrix chat=chat.imatrix.gguf --k 32 -o p4.npz --model other.gguf
expect_code 2
expect_err_lines 1
expect_err "gguf-reap: error: chat.imatrix.gguf: blk.1.ffn_down_exps.weight has 16 experts, but other.gguf has 8: the imatrix was made for another model"

case_ "splice → audit with the plan"
mkdir -p out
run "$BIN" plan-width --imatrix chat=chat.imatrix.gguf --k 32 -o cut.npz --model m.gguf
expect_code 0
run "$BIN" splice m.gguf --neuron-plan cut.npz -o out/o
expect_code 0
run "$BIN" audit out/o.gguf --source m.gguf --neuron-plan cut.npz
expect_code 0
expect_out "width     32 of 64 FFN channels per expert kept (from the neuron plan cut.npz)"
expect_out "PASS"
run "$BIN" audit out/o.gguf --source m.gguf --json
expect_code 2
expect_no_out
expect_err "gguf-reap: error: out/o.gguf: was width-spliced with plan sha256 $(sha256sum cut.npz | cut -c1-64): pass --neuron-plan (the plan it was cut with) to verify its expert tensors"
run "$BIN" audit out/o.gguf --source m.gguf --neuron-plan plan.npz --json
expect_code 1
expect_json 'd["result"] == "fail" and d["findings"][0]["kind"] == "keeplist" and d["expert_width"] == {"source": 64, "output": 16}'

case_ "no --k"
run "$BIN" plan-width --imatrix chat=chat.imatrix.gguf -o p5.npz
expect_code 2
expect_err "--k is required"

finish
