source "$(dirname "$0")/lib.sh"
# `inspect` on every real llama.cpp file in ../shared/fixtures: text and JSON, checked against
# expected.json. (tests/inspect_test.cpp compares every field and tensor; this is the binary's view.)
have_fixtures || skip_all "../shared/fixtures is not present: every case here reads it"
EXPECTED=$FIX/expected.json
# exp PYTHON_LIST: a Python expression for the expected.json entry at that key path, for expect_json.
exp() { echo "__import__('functools').reduce(lambda e, k: e[k], $1, json.load(open('$EXPECTED')))"; }

for rel in models/tiny-deepseek2-Q8_0.gguf models/tiny-deepseek2-Q4_K_M.gguf models/tiny-deepseek2-IQ2_XXS.gguf; do
    case_ "inspect $rel"
    run "$BIN" inspect "$FIX/$rel"
    expect_code 0
    expect_out "architecture deepseek2 (GGUF v3, alignment 32)"
    expect_out "tensors      70 ("
    expect_out "  MoE blocks   3 (blk.1..blk.3)"
    expect_out "  experts      16 per block, 4 used per token, 1 shared"
    expect_out "  exp_probs_b.bias             F32            3    32.00       192 B"

    case_ "inspect --json --tensors $rel"
    run "$BIN" inspect --json --tensors "$FIX/$rel"
    expect_code 0
    E=$(exp "['models', '$rel']")
    for k in arch file_size tensor_count kv_count alignment tensor_type_histogram n_layers moe_layers \
             expert_count expert_used_count expert_shared_count expert_feed_forward_length embedding_length vocab_size; do
        expect_json "d['$k'] == $E['$k']"
    done
    expect_json "d['kv'] == $E['kv']"
    expect_json "[{k: t[k] for k in ('name', 'type', 'ne', 'offset', 'nbytes')} for t in d['tensors']] == [{k: t[k] for k in ('name', 'type', 'ne', 'offset', 'nbytes')} for t in $E['tensors']]"
done

case_ "Q4_K_M: ffn_down_exps slabs differ by block"
run "$BIN" inspect "$FIX/models/tiny-deepseek2-Q4_K_M.gguf"
expect_out "  expert slab  108.0 KiB to 124.5 KiB per expert per block (gate/up/down weights)"

for n in 1 2 3; do
    rel=shards/tiny-deepseek2-IQ2_XXS-0000$n-of-00003.gguf
    case_ "inspect from shard $n"
    run "$BIN" inspect --json --tensors "$FIX/$rel"
    expect_code 0
    expect_json "len(d['shards']) == 3 and d['tensor_count'] == 70 and d['kv_count'] == 44"
    expect_json "[s['split_kv'] for s in d['shards']] == [f['split_kv'] for f in $(exp "['shards', 'files']").values()]"
    expect_json "d['moe_layers'] == [1, 2, 3] and d['file_size'] == sum(f['file_size'] for f in $(exp "['shards', 'files']").values())"
    run "$BIN" inspect "$FIX/$rel"
    expect_code 0
    expect_out "shards       3 ("
    expect_out "  $FIX/shards/tiny-deepseek2-IQ2_XXS-00003-of-00003.gguf  22 tensors  1.3 MiB"
done

for d in chat code prose reasoning wiki all; do
    rel=imatrix/tiny-deepseek2.$d.imatrix.gguf
    case_ "inspect $rel"
    run "$BIN" inspect --json "$FIX/$rel"
    expect_code 0
    E=$(exp "['imatrix', '$rel']")
    expect_json "d['format'] == 'gguf' and d['file_size'] == $E['file_size'] and d['entry_count'] == len($E['entries'])"
    expect_json "d['datasets'] == $E['kv']['imatrix.datasets'] and d['chunk_count'] == $E['kv']['imatrix.chunk_count'] and d['chunk_size'] == 128"
    run "$BIN" inspect "$FIX/$rel"
    expect_code 0
    expect_out "format       GGUF imatrix"
    expect_out "entries      48 (9 expert entries)"

    rel=imatrix/tiny-deepseek2.$d.imatrix.dat
    case_ "inspect $rel"
    run "$BIN" inspect --json --tensors "$FIX/$rel"
    expect_code 0
    E=$(exp "['imatrix', '$rel']")
    expect_json "d['format'] == 'dat' and d['datasets'] == [$E['dataset']] and d['chunk_count'] == $E['last_chunk']"
    expect_json "{e['name']: e['ncall'] for e in d['entries']} == $E['ncall'] and {e['name']: e['nval'] for e in d['entries']} == $E['nval']"
done
finish
