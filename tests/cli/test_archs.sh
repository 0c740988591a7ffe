# Every architecture preset of the generator (gguf-reap-gen model --list-archs) through the pipeline:
# rank on two generated imatrix domains → splice (25 % of the experts) → audit --source → estimate →
# plan-width → a width splice → audit. Where an architecture cannot be pruned, the command that refuses
# it must say why (docs/architectures.md, "Refusals").
#
# With GGUF_REAP_LLAMA_BIN set to a directory holding llama.cpp's llama-simple and llama-embedding
# (commit 34af94cd9), the source, its 2-shard split, the pruned and the width-cut models must also load
# and generate (encoders: embed): every architecture, about 75 s with the CPU build CI runs
# (../shared/llama.cpp/bin). Without it those checks are skipped, and say so.
#
# Under the sanitizers (GGUF_REAP_TEST_PASS=sanitizers) the pipeline runs for the architectures of
# tests/data/live-sample.txt alone, which hold every value of every column of the architecture table
# (tests/live_sample_test.cpp): each step is an instrumented process, and all 62 took 9 minutes of the
# sanitizer pass. The others are the part "all-archs", skipped there and run in the Release pass.
# ctest-parts: llama all-archs
source "$(dirname "$0")/lib.sh"

LLAMA=${GGUF_REAP_LLAMA_BIN:-}
if [ -n "$LLAMA" ] && [ ! -x "$LLAMA/llama-simple" ]; then
    echo "GGUF_REAP_LLAMA_BIN=$LLAMA has no llama-simple" >&2
    exit 2
fi
part llama "loading in llama.cpp $(live_why)" [ -n "$LLAMA" ]

# What runs each model in llama.cpp (default: llama-simple generates).
runner() {
    case $1 in
        bert | jina-bert-v3 | nomic-bert | nomic-bert-moe | llama-embed) echo embed ;;
        dflash) echo none ;;  # a draft model: llama.cpp needs its deepseek4 target to run it
        *) echo generate ;;
    esac
}

# The refusals that hold up, by architecture: "STEP|message".
refusal() {
    case $1 in
        bert | jina-bert-v3 | lfm2) echo "rank|the model has no MoE blocks" ;;
        grovemoe) echo "rank|pairs each chunk expert with a group of routed experts" ;;
        *) echo "" ;;
    esac
}
width_refusal() {
    case $1 in
        jamba | nomic-bert | nomic-bert-moe) echo "the key its dense feed-forward layers share" ;;
        llama4) echo "sizes its shared expert with llama4.expert_feed_forward_length too" ;;
        *) echo "" ;;
    esac
}

# load ARCH MODEL WHAT: the model loads (and generates, or embeds) in llama.cpp.
load() {
    [ -n "$LLAMA" ] || return 0
    case $(runner "$1") in
        generate) run timeout 120 "$LLAMA/llama-simple" -m "$2" -n 4 "Hello world" ;;
        embed) run timeout 120 "$LLAMA/llama-embedding" -m "$2" -p "Hello world" ;;
        none) return 0 ;;
    esac
    case_ "$1: llama.cpp runs the $3 model"
    expect_code 0
    # Generation prints the prompt and then the new tokens; NaN logits give token 0 (NUL bytes) instead.
    if [ "$(runner "$1")" = generate ]; then
        [ "$(tr -d '\000\n' <"$OUT" | wc -c)" -gt 11 ] && _pass || _fail "no text generated after the prompt"
    fi
}

run "$GEN" model --list-archs
ARCHS=$(cat "$OUT")
case_ "--list-archs lists the presets, one per line, sorted"
expect_code 0
[ "$(printf '%s\n' "$ARCHS" | sort -c 2>&1)" = "" ] && _pass || _fail "not sorted"
[ "$(printf '%s\n' "$ARCHS" | wc -l)" -ge 2 ] && _pass || _fail "fewer than 2 presets"

SAMPLE=" $(sed 's/#.*//' "$(dirname "$0")/../data/live-sample.txt" | tr -s ' \n' '  ') "
RUN_ARCHS=$ARCHS
if ! part all-archs "the other architectures (not run under the sanitizers: the Release pass runs all $(printf '%s\n' "$ARCHS" | wc -l))" \
    [ "${GGUF_REAP_TEST_PASS:-}" != sanitizers ]; then
    RUN_ARCHS=$(for a in $ARCHS; do case $SAMPLE in *" $a "*) echo "$a" ;; esac; done)
fi

for arch in $RUN_ARCHS; do
    D=$WORK/$arch
    mkdir -p "$D"
    case_ "$arch: the generator writes it, unsplit and in 2 shards"
    run "$GEN" model --arch "$arch" -o "$D/m.gguf"
    expect_code 0
    run "$GEN" model --arch "$arch" -o "$D/s.gguf" --shards 2
    expect_code 0
    load "$arch" "$D/m.gguf" source
    load "$arch" "$D/s-00001-of-00002.gguf" "2-shard"

    ref=$(refusal "$arch")
    case_ "$arch: rank on two domains"
    run "$GEN" imatrix --model "$D/m.gguf" --domain chat --seed 1 -o "$D/chat.imatrix.gguf"
    if [ "${ref%%|*}" = imatrix ] || { [ -n "$ref" ] && [ "$CODE" -ne 0 ]; }; then
        expect_code 2
        expect_err "${ref#*|}"
        continue
    fi
    expect_code 0
    run "$GEN" imatrix --model "$D/m.gguf" --domain code --seed 2 -o "$D/code.imatrix.gguf"
    expect_code 0
    run "$BIN" rank --model "$D/m.gguf" --imatrix chat="$D/chat.imatrix.gguf" --imatrix code="$D/code.imatrix.gguf" \
        --ratio 25% -o "$D/rank"
    if [ "${ref%%|*}" = rank ]; then
        case_ "$arch: rank refuses it"
        expect_code 2
        expect_err "${ref#*|}"
        continue
    fi
    expect_code 0

    case_ "$arch: splice, audit --source, estimate"
    run "$BIN" splice "$D/s-00001-of-00002.gguf" --keeplist "$D/rank/keeplist.json" -o "$D/pruned"
    expect_code 0
    run "$BIN" audit "$D/pruned-00001-of-00002.gguf" --source "$D/s-00001-of-00002.gguf" --keeplist "$D/rank/keeplist.json"
    expect_code 0
    expect_out "PASS"
    run "$BIN" estimate "$D/m.gguf" --keeplist "$D/rank/keeplist.json" --json
    expect_code 0
    expect_json "d['after']['file_bytes'] < d['before']['file_bytes']"
    load "$arch" "$D/pruned-00001-of-00002.gguf" pruned

    # A width cut is byte-exact only where ffn_down_exps is a float type: the same model with F16 down
    # projections (the imatrices fit it, they depend on shapes alone).
    case_ "$arch: plan-width, a width splice of the pruned experts, audit"
    wref=$(width_refusal "$arch")
    run "$GEN" model --arch "$arch" --type-down F16 -o "$D/f.gguf"
    expect_code 0
    run "$BIN" plan-width --model "$D/f.gguf" --imatrix chat="$D/chat.imatrix.gguf" --imatrix code="$D/code.imatrix.gguf" \
        --k 32 -o "$D/plan.npz"
    if [ -n "$wref" ]; then
        expect_code 2
        expect_err "$wref"
        continue
    fi
    expect_code 0
    run "$BIN" splice "$D/f.gguf" --keeplist "$D/rank/keeplist.json" --neuron-plan "$D/plan.npz" -o "$D/w.gguf"
    expect_code 0
    run "$BIN" audit "$D/w.gguf" --source "$D/f.gguf" --keeplist "$D/rank/keeplist.json" --neuron-plan "$D/plan.npz"
    expect_code 0
    expect_out "PASS"
    load "$arch" "$D/w.gguf" "width-cut"
done

# DeepSeek-V4's hash-routed blocks: splice rewrites their token → expert tables and says how many
# entries it redirected; audit verifies every entry, and names a table whose row repeats an expert.
D=$WORK/deepseek4
if [ -f "$D/pruned-00001-of-00002.gguf" ]; then
    case_ "deepseek4: the splice summary counts the redirected entries of each hash-routed block"
    run "$BIN" splice "$D/m.gguf" --keeplist "$D/rank/keeplist.json" -o "$D/one.gguf"
    expect_code 0
    expect_out "hash routing blk.0: "
    expect_out " (token, slot) entries redirected from pruned experts"
    run "$BIN" splice "$D/m.gguf" --keeplist "$D/rank/keeplist.json" -o "$D/one-j.gguf" --json
    expect_json "len(d['hash_routing']) == 2 and all(0 < h['redirected'] < h['entries'] for h in d['hash_routing'])"
    # rank's receipt gives the same counts, block by block.
    /usr/bin/python3 - "$D/rank/REAP-KEEPLIST-RECEIPT.md" "$OUT" <<'PY' && _pass || _fail "receipt and splice disagree on the redirected entries"
import json, re, sys
receipt = open(sys.argv[1]).read()
rows = {int(b): (int(t), int(r)) for b, t, r in re.findall(r"\| blk\.(\d+) \| (\d+) \| (\d+) \|", receipt.split("## Hash-routed blocks")[1])}
spliced = {h["block"]: (h["entries"], h["redirected"]) for h in json.load(open(sys.argv[2]))["hash_routing"]}
sys.exit(0 if rows == spliced and rows else 1)
PY
    run "$BIN" audit "$D/one.gguf" --source "$D/m.gguf"
    expect_code 0
    expect_out "2 token → expert tables rewritten as the kept experts require (hash routing)"
    case_ "deepseek4: a source manifest cannot check the rewritten tables, so --source-manifest is refused"
    run "$BIN" audit "$D/m.gguf" --manifest-out "$D/src.json"
    expect_code 0
    run "$BIN" audit "$D/one.gguf" --source-manifest "$D/src.json"
    expect_code 2
    expect_err "gguf-reap: error: $D/src.json: blk.0 routes by a token → expert table, whose values pruning rewrites: only the source's own values can check the rewrite, so audit this model with --source"
    case_ "deepseek4: audit names a rewritten table whose row repeats an expert"
    run "$BIN" inspect --json --tensors "$D/one.gguf"
    at=$(/usr/bin/python3 -c "import json,sys; print([t['offset'] for t in json.load(open(sys.argv[1]))['tensors'] if t['name'] == 'blk.0.ffn_gate_tid2eid.weight'][0])" "$OUT")
    /usr/bin/python3 - "$D/one.gguf" "$at" <<'PY'
import struct, sys
path, at = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(at); first = f.read(4); f.seek(at + 4); f.write(first)  # token 0: slot 1 = slot 0
PY
    run "$BIN" audit "$D/one.gguf" --source "$D/m.gguf"
    expect_code 1
    expect_out "tensor 'blk.0.ffn_gate_tid2eid.weight' at offset $((at + 4))"
    expect_out "1 of 2048 token → expert entries are wrong; the first: token 0 slot 1 names "
fi

# --drop-mtp: a glm4moe model with a nextn block loses it; the result loads and audit proves it.
case_ "glm4moe --nextn 1, spliced with --drop-mtp: one block fewer, loads, audit passes"
D=$WORK/mtp
mkdir -p "$D"
run "$GEN" model --arch glm4moe --nextn 1 -o "$D/m.gguf"
expect_code 0
run "$BIN" inspect --json "$D/m.gguf"
expect_json "d['n_layers'] == 5 and d['moe_layers'] == [1, 2, 3, 4]"
run "$GEN" imatrix --model "$D/m.gguf" --domain chat -o "$D/chat.imatrix.gguf"
run "$BIN" rank --model "$D/m.gguf" --imatrix chat="$D/chat.imatrix.gguf" --ratio 25% -o "$D/rank"
expect_code 0
grep -qF "blk.4 is the model's multi-token-prediction (nextn) block. It is ranked and pruned like the others, as a plain \`splice\` cuts it; \`splice --drop-mtp\` leaves it out of the model instead" "$D/rank/REAP-KEEPLIST-RECEIPT.md" &&
    _pass || _fail "the receipt does not name the MTP block"
run "$BIN" splice "$D/m.gguf" --keeplist "$D/rank/keeplist.json" --drop-mtp -o "$D/p.gguf"
expect_code 0
expect_out "MTP blocks dropped: 1 (--drop-mtp)"
run "$BIN" inspect --json "$D/p.gguf"
expect_json "d['n_layers'] == 4 and d['moe_layers'] == [1, 2, 3] and not any(t.startswith('blk.4.') for t in [x['name'] for x in d.get('tensors', [])])"
run "$BIN" audit "$D/p.gguf" --source "$D/m.gguf"
expect_code 0
expect_out "PASS"
load glm4moe "$D/p.gguf" "MTP-dropped"
case_ "--drop-mtp: audit names a block_count that still counts the dropped block, and why it expects another"
cp "$D/p.gguf" "$D/p5.gguf"
/usr/bin/python3 - "$D/p5.gguf" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    data = f.read(1 << 20)
    key = b"glm4moe.block_count"
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack_from("<I", data, at)[0] == 4  # GGUF_TYPE_UINT32
    assert struct.unpack_from("<I", data, at + 4)[0] == 4
    f.seek(at + 4); f.write(struct.pack("<I", 5))
PY
run "$BIN" audit "$D/p5.gguf" --source "$D/m.gguf"
expect_code 1
expect_out "value 5 differs from the expected 4 (MTP dropped: 1 nextn block(s) left out of 5"
run "$BIN" estimate "$D/m.gguf" --keeplist "$D/rank/keeplist.json" --drop-mtp --json
expect_code 0
expect_json "d['after']['file_bytes'] == $(stat -c %s "$D/p.gguf") and d['after']['nextn_bytes'] == 0 and d['before']['nextn_bytes'] > 0"
case_ "--drop-mtp on a model without MTP blocks is refused"
run "$BIN" splice "$WORK/qwen3moe/m.gguf" --keeplist "$WORK/qwen3moe/rank/keeplist.json" --drop-mtp -o "$D/x.gguf"
expect_code 2
expect_err "--drop-mtp: $WORK/qwen3moe/m.gguf has no MTP blocks (qwen3moe.nextn_predict_layers is 0 or absent)"

# Pruning Llama-4 Maverick's 128 experts would load in llama.cpp but turn on a Q/K norm the model was
# not trained with: refused (docs/architectures.md, "Refusals").
case_ "llama4 with 128 experts: rank refuses any other count"
D=$WORK/maverick
mkdir -p "$D"
run "$GEN" model --arch llama4 --experts 128 --used 1 -o "$D/m.gguf"
expect_code 0
run "$GEN" imatrix --model "$D/m.gguf" --domain chat -o "$D/chat.imatrix.gguf"
expect_code 0
run "$BIN" rank --model "$D/m.gguf" --imatrix chat="$D/chat.imatrix.gguf" --ratio 25% -o "$D/rank"
expect_code 2
expect_err "--ratio 0.25 keeps 96 of 128 experts per block: llama.cpp's llama4 loader switches the Q/K L2 norm off only for exactly 128 experts"
run "$BIN" rank --model "$D/m.gguf" --imatrix chat="$D/chat.imatrix.gguf" --prune 0 -o "$D/rank0"
expect_code 0

finish
