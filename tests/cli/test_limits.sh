# Limits (docs/reliability.md "Limits"): a model at llama.cpp's limits — 1,024 experts, 512 blocks — with
# over 100,000 tensors goes through gen → inspect → rank → splice → audit (tiny F32 tensors keep it near
# 110 MiB and well under a minute); a model beyond them is accepted and splice warns that its output will
# not load in llama.cpp.
source "$(dirname "$0")/lib.sh"

TINY=(--shared 0 --embd 4 --heads 1 --ff 4 --vocab 4 --type-exps F32 --type-attn F32 --type-embd F32
      --type-output F32 --type-dense F32)

case_ "gen: 512 blocks × 1,024 experts and 100,122 tensors"
run "$GEN" model --skeleton -o "$WORK/big.gguf" --blocks 512 --dense-blocks 1 --experts 1024 --used 8 --expert-ff 4 \
    --filler 95000 "${TINY[@]}"
expect_code 0
expect_out "512 blocks (511 MoE × 1024 experts), 100122 tensors"
run "$GEN" imatrix --model "$WORK/big.gguf" -o "$WORK/big.imatrix.gguf"
expect_code 0
expect_out "4095 entries, 511 MoE blocks"

case_ "inspect"
run "$BIN" inspect "$WORK/big.gguf" --json
expect_code 0
expect_json "d['tensor_count'] == 100122"

case_ "rank keeps half of the 1,024 experts in each of the 511 MoE blocks"
run "$BIN" rank --imatrix "$WORK/big.imatrix.gguf" --model "$WORK/big.gguf" --ratio 50% -o "$WORK/r" --json
expect_code 0
expect_json "d['n_keep'] == 512 and len(d['per_block']) == 511"

case_ "splice into 3 shards, no warning at the limits"
run "$BIN" splice "$WORK/big.gguf" --keeplist "$WORK/r/keeplist.json" -o "$WORK/out" --split-count 3 -q
expect_code 0
expect_out "tensors  100122 (2044 sliced, 1,046,528 expert slabs"
[ ! -s "$ERR" ] && _pass || _fail "splice wrote to stderr"

case_ "audit proves every byte"
run "$BIN" audit "$WORK/out-00002-of-00003.gguf" --source "$WORK/big.gguf"
expect_code 0
expect_out "PASS: 3 shard(s), 100122 tensors"
rm -f "$WORK"/big* "$WORK"/out-*

case_ "beyond llama.cpp's limits: accepted, and splice says the output will not load"
run "$GEN" model --skeleton -o "$WORK/over.gguf" --blocks 513 --dense-blocks 512 --experts 1025 --used 8 --expert-ff 1 \
    "${TINY[@]}"
expect_code 0
run "$BIN" inspect "$WORK/over.gguf"
expect_code 0
printf '{"drop": {"512": []}}' >"$WORK/none.json"
run "$BIN" splice "$WORK/over.gguf" --keeplist "$WORK/none.json" -o "$WORK/all" -q
expect_code 0
expect_err "gguf-reap: warning: the output will not load in llama.cpp: 1025 experts per block is more than llama.cpp loads (LLAMA_MAX_EXPERTS = 1024): keep at most 1024 if the model is to run in llama.cpp"
expect_err "gguf-reap: warning: the output will not load in llama.cpp: 513 blocks is more than llama.cpp loads (LLAMA_MAX_LAYERS = 512); pruning experts does not change the block count"
expect_err_lines 2
printf '{"drop": {"512": [1024]}}' >"$WORK/one.json"
run "$BIN" splice "$WORK/over.gguf" --keeplist "$WORK/one.json" -o "$WORK/fits" -q
expect_code 0
expect_out "1025 → 1024 experts per block"
expect_err_lines 1
run "$BIN" audit "$WORK/fits.gguf" --source "$WORK/over.gguf"
expect_code 0
finish
