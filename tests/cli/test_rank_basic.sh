# gguf-reap rank: the real binary on the llama.cpp-made fixtures and on generated files.
# ctest-parts: fixtures numpy trained
source "$(dirname "$0")/lib.sh"

case_ "rank is listed in help"
run "$BIN" rank --help
expect_code 0
expect_out "--imatrix"

case_ "a rule is required"
"$GEN" model --skeleton --preset tiny -o "$WORK/m.gguf" >/dev/null
"$GEN" imatrix --model "$WORK/m.gguf" --dead 1:3 -o "$WORK/a.imatrix.gguf" >/dev/null
run "$BIN" rank --imatrix "$WORK/a.imatrix.gguf" -o "$WORK/out"
expect_code 2
expect_err "gguf-reap: error: give exactly one of --keep N, --prune N, --ratio R or --fit BUDGET"
expect_no_out

case_ "a request no file could make right is refused before any file is read"
run "$BIN" rank --imatrix "$WORK/nope.gguf" -o "$WORK/early"
expect_code 2
expect_err "gguf-reap: error: give exactly one of --keep N, --prune N, --ratio R or --fit BUDGET"
[ ! -e "$WORK/early" ] && _pass || _fail "the output directory was left behind"
run "$BIN" rank --imatrix "$WORK/nope.gguf" --fit size=1GB -o "$WORK/early"
expect_code 2
expect_err "gguf-reap: error: --fit size=1GB needs --model: the sizes come from the model's tensors"

case_ "a Kimi-K3-shaped model (92 MoE blocks with dead experts): the summary stays a few lines"
"$GEN" model --skeleton --preset kimi-k3 --experts 16 --used 4 --embd 32 --expert-ff 32 --vocab 64 -o "$WORK/k3.gguf" >/dev/null
"$GEN" imatrix --model "$WORK/k3.gguf" --domain chat --dead-per-block 2 -o "$WORK/k3.chat.gguf" >/dev/null
run "$BIN" -q rank --imatrix "chat=$WORK/k3.chat.gguf" --model "$WORK/k3.gguf" --prune 4 -o "$WORK/k3rank"
expect_code 0
expect_out "ranked 92 MoE blocks × 16 experts from 1 domain(s) (chat)"
expect_out "dead experts: 184 in 92 of 92 blocks (2 per block), all pruned"
[ "$(wc -l <"$OUT")" -le 7 ] && _pass || _fail "the summary has $(wc -l <"$OUT") lines, expected at most 7"

case_ "a missing imatrix is bad input"
run "$BIN" rank --imatrix "$WORK/nope.gguf" --prune 1 -o "$WORK/out"
expect_code 2
expect_err "nope.gguf: does not exist"

case_ "a model given as --imatrix is refused"
run "$BIN" rank --imatrix "$WORK/m.gguf" --prune 1 -o "$WORK/out"
expect_code 2
expect_err "m.gguf: general.type: this GGUF file is a model, not an imatrix"
expect_err_lines 1

case_ "several bad imatrices (opened in parallel): the error is the first one's, in command-line order"
for threads in 1 2; do
    run "$BIN" rank --imatrix "a=$WORK/m.gguf" --imatrix "b=$WORK/nope.gguf" --imatrix "c=$WORK/a.imatrix.gguf" \
        --prune 1 -o "$WORK/out" --threads "$threads"
    expect_code 2
    expect_err "m.gguf: general.type: this GGUF file is a model, not an imatrix"
    expect_err_lines 1
    run "$BIN" rank --imatrix "c=$WORK/a.imatrix.gguf" --imatrix "b=$WORK/nope.gguf" --imatrix "a=$WORK/m.gguf" \
        --prune 1 -o "$WORK/out" --threads "$threads"
    expect_code 2
    expect_err "nope.gguf: does not exist"
    expect_err_lines 1
done

case_ "-v logs the time spent reading, deciding and writing (stderr), and stdout stays one document"
run "$BIN" -v rank --imatrix chat="$WORK/a.imatrix.gguf" --model "$WORK/m.gguf" --prune 1 -o "$WORK/out-v" --json
expect_code 0
grep -Eq '^gguf-reap: debug: rank: read [0-9.]+ s, decide [0-9.]+ s, write [0-9.]+ s$' "$ERR" && _pass ||
    _fail "no timing line on stderr"
/usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$OUT" && _pass || _fail "stdout is not one JSON document"

case_ "generated: --json is one document; files written; no overwrite without --force"
run "$BIN" rank --imatrix chat="$WORK/a.imatrix.gguf" --model "$WORK/m.gguf" --prune 1 -o "$WORK/out" --json
expect_code 0
expect_json "d['n_keep'] == 15 and d['dead'][0]['block'] == 1 and d['dead'][0]['expert'] == 3 and d['domains'][0]['name'] == 'chat'"
[ -f "$WORK/out/keeplist.json" ] && [ -f "$WORK/out/ranking.npz" ] && [ -f "$WORK/out/REAP-KEEPLIST-RECEIPT.md" ] && _pass || _fail "outputs missing"
run "$BIN" rank --imatrix chat="$WORK/a.imatrix.gguf" --prune 1 -o "$WORK/out"
expect_code 2
expect_err "keeplist.json exists; use --force to overwrite it"

case_ "external scores in llama-expert-profile's expert_stats.json layout"
/usr/bin/python3 - "$WORK/stats.json" <<'PY'
import json, sys
d = {}
for b in (1, 2, 3):
    d[str(b)] = {"total_tokens": 1000, "activation_counts": [0 if e == 5 else 100 + e for e in range(16)],
                 "reap": [0.0 if e == 5 else 1.0 + (e * 7 % 16) for e in range(16)],
                 "ean_mean": [1.0] * 16, "never_activated": 1}
json.dump(d, open(sys.argv[1], "w"))
PY
run "$BIN" rank --criterion external --scores prof="$WORK/stats.json" --model "$WORK/m.gguf" --keep 12 -o "$WORK/ext" --json
expect_code 0
expect_json "d['criterion'] == 'external' and all(b['dead'] == [5] for b in d['per_block']) and len(d['per_block'][0]['keep']) == 12"
run "$BIN" rank --criterion external --scores prof="$WORK/stats.json" --score-field nope --keep 12 -o "$WORK/ext2"
expect_code 2
expect_err "block 1 has no field 'nope' (it has: activation_counts, ean_mean, reap); choose one with --score-field"

if fixtures "the cases on the llama.cpp-made fixtures"; then
    I=$FIX/imatrix/tiny-deepseek2
    case_ "fixtures: --prune 3 keeps the super-expert and drops exactly the dead experts"
    run "$BIN" rank --imatrix chat=$I.chat.imatrix.gguf --imatrix code=$I.code.imatrix.gguf \
        --imatrix prose=$I.prose.imatrix.gguf --imatrix reasoning=$I.reasoning.imatrix.gguf \
        --imatrix wiki=$I.wiki.imatrix.gguf --model "$FIX/models/tiny-deepseek2-Q8_0.gguf" --prune 3 -o "$WORK/fx"
    expect_code 0
    expect_out "dead experts: 9 in 3 of 3 blocks (3 per block), all pruned"
    expect_out "protected experts: 1 kept: blk.2 expert 6 (97.4 % of the block's energy in wiki)"
    # The per-block lists are in the receipt, not the summary.
    for e in 0 9 14; do
        grep -q "^- blk.2 expert $e: " "$WORK/fx/REAP-KEEPLIST-RECEIPT.md" && _pass || _fail "receipt lacks dead expert blk.2:$e"
    done
    # (The safety margin names the one pruned expert closest to being kept.)
    [ "$(grep -v '^safety margin: ' "$OUT" | grep -c 'blk\.')" -eq 1 ] && _pass ||
        _fail "the summary names blocks beyond the protected expert"
    expect_out "; the closest to being kept is blk."
    expect_out "safety margin: no pruned expert ranks better than 14 of 16 in any domain, in any layer (median layer: 14)"
    /usr/bin/python3 - "$WORK/fx/keeplist.json" "$FIX/prune_specs/tiny-deepseek2.drop-dead.json" <<'PY' && _pass || _fail "keeplist differs from drop-dead.json"
import json, sys
k = json.load(open(sys.argv[1])); spec = json.load(open(sys.argv[2]))
got = {str(b["block"]): b["prune"] for b in k["blocks"]}
sys.exit(0 if got == spec["drop"] and k["source"]["architecture"] == "deepseek2" else 1)
PY
    if part numpy "ranking.npz in numpy: Debian's python3-numpy is not installed" /usr/bin/python3 -c "import numpy"; then
        /usr/bin/python3 - "$WORK/fx/ranking.npz" <<'PY' && _pass || _fail "ranking.npz does not load in numpy"
import numpy as np, sys
z = np.load(sys.argv[1])
assert list(z["domains"]) == ["chat", "code", "prose", "reasoning", "wiki"]
assert z["scores"].shape == (5, 3, 16) and z["ranks"].dtype == np.int32
assert list(z["blocks"]) == [1, 2, 3]
assert z["keep"].sum() == 39 and not z["keep"][1, 0] and z["keep"][1, 6] and z["protected"][1, 6]
assert z["counts"][0, 0, 1] == 4
PY
    fi

    case_ "fixtures: a legacy .dat refuses energy and names the way out"
    run "$BIN" rank --imatrix $I.chat.imatrix.dat --prune 3 -o "$WORK/fx2"
    expect_code 2
    expect_err "use the GGUF imatrix of the same run (llama-imatrix --output-format gguf, the default since 2025-07) or --criterion reap-mean"

    case_ "fixtures: a legacy .dat with reap-mean finds the same design"
    run "$BIN" rank --imatrix $I.all.imatrix.dat --criterion reap-mean --prune 3 -o "$WORK/fx3" --json
    expect_code 0
    expect_json "sorted((x['block'], x['expert']) for x in d['dead']) == [(1,3),(1,7),(1,12),(2,0),(2,9),(2,14),(3,5),(3,10),(3,15)] and [(p['block'], p['expert']) for p in d['protected']] == [(2, 6)]"

    case_ "fixtures: keeping fewer than expert_used_count is refused"
    run "$BIN" rank --imatrix $I.all.imatrix.gguf --model "$FIX/models/tiny-deepseek2-Q8_0.gguf" --keep 3 -o "$WORK/fx4"
    expect_code 2
    expect_err "fewer than expert_used_count = 4"

    case_ "fixtures: an imatrix whose counts were altered is warned about, and refused with --strict"
    # Expert 0's count of blk.3.ffn_down_exps.weight raised by 7 (found by name in the header).
    /usr/bin/python3 - "$I.chat.imatrix.gguf" "$WORK/altered.imatrix.gguf" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
o = 24
def s():
    global o
    n = struct.unpack_from("<Q", b, o)[0]; o += 8; v = bytes(b[o:o + n]).decode(); o += n; return v
n_t, n_kv = struct.unpack_from("<QQ", b, 8)
for _ in range(n_kv):  # general.type (string), imatrix.datasets (string array), two u32
    s(); t = struct.unpack_from("<I", b, o)[0]; o += 4
    if t == 8: s()
    elif t == 9:
        o += 4; n = struct.unpack_from("<Q", b, o)[0]; o += 8
        for _ in range(n): s()
    else: o += 4
infos = []
for _ in range(n_t):
    name = s(); nd = struct.unpack_from("<I", b, o)[0]; o += 4 + 8 * nd
    o += 4; off = struct.unpack_from("<Q", b, o)[0]; o += 8
    infos.append((name, off))
data = (o + 31) // 32 * 32
off = dict(infos)["blk.3.ffn_down_exps.weight.counts"]
v = struct.unpack_from("<f", b, data + off)[0]
struct.pack_into("<f", b, data + off, v + 7)
open(sys.argv[2], "wb").write(b)
PY
    run "$BIN" rank --imatrix chat="$WORK/altered.imatrix.gguf" --imatrix code=$I.code.imatrix.gguf \
        --model "$FIX/models/tiny-deepseek2-Q8_0.gguf" --ratio 25% -o "$WORK/alt"
    expect_code 0
    expect_err "gguf-reap: warning: $WORK/altered.imatrix.gguf: domain chat: blk.3: the routed-expert counts sum to 6663, but expert_used_count 4 × 1664 tokens (imatrix.chunk_count 13 × imatrix.chunk_size 128) is 6656"
    grep -qF -- "- $WORK/altered.imatrix.gguf: domain chat: blk.3: the routed-expert counts sum to 6663" "$WORK/alt/REAP-KEEPLIST-RECEIPT.md" &&
        _pass || _fail "the receipt lacks the warning"
    run "$BIN" rank --imatrix chat="$WORK/altered.imatrix.gguf" --imatrix code=$I.code.imatrix.gguf \
        --model "$FIX/models/tiny-deepseek2-Q8_0.gguf" --ratio 25% -o "$WORK/alt2" --strict
    expect_code 2
    expect_err_lines 1
    expect_err "gguf-reap: error: $WORK/altered.imatrix.gguf: "
    expect_err "entry 'blk.3.ffn_down_exps.weight' counts"
    expect_err "the routed-expert counts sum to 6663, but expert_used_count 4 × 1664 tokens (imatrix.chunk_count 13 × imatrix.chunk_size 128) is 6656: made with another top-k, by a partial or streamed run, or for another model? (--strict)"
    [ ! -e "$WORK/alt2/keeplist.json" ] && _pass || _fail "--strict wrote a keeplist"

    case_ "fixtures: --consensus max-min names the worst domain, and never does worse than min-rank"
    for c in min-rank max-min; do
        run "$BIN" rank --imatrix chat=$I.chat.imatrix.gguf --imatrix code=$I.code.imatrix.gguf \
            --imatrix wiki=$I.wiki.imatrix.gguf --model "$FIX/models/tiny-deepseek2-Q8_0.gguf" --ratio 50% \
            --consensus $c -o "$WORK/c-$c" --json
        expect_code 0
        expect_json "d['consensus'] == '$c' and d['worst_domain']['domain'] in ('chat', 'code', 'wiki')"
        grep -qF "Worst domain: " "$WORK/c-$c/REAP-KEEPLIST-RECEIPT.md" && _pass || _fail "$c receipt lacks the worst domain"
    done
    /usr/bin/python3 - "$WORK/c-min-rank" "$WORK/c-max-min" <<'PY' && _pass || _fail "max-min's worst share below min-rank's"
import sys, zipfile, io, struct
def shares(d):
    raw = zipfile.ZipFile(d + "/ranking.npz").read("retained_share.npy")
    hl = struct.unpack("<H", raw[8:10])[0]
    return struct.unpack("<%dd" % ((len(raw) - 10 - hl) // 8), raw[10 + hl:])
a, m = shares(sys.argv[1]), shares(sys.argv[2])
assert min(m) >= min(a) - 1e-12, (min(a), min(m))
PY

    case_ "fixtures: --export keepmap, then --from-plan of it keeps the same experts"
    run "$BIN" rank --imatrix chat=$I.chat.imatrix.gguf --model "$FIX/models/tiny-deepseek2-Q8_0.gguf" --ratio 25% \
        -o "$WORK/ex" --export keepmap
    expect_code 0
    expect_out "exported $WORK/ex/reap_plan.json (keepmap format)"
    run "$BIN" rank --imatrix chat=$I.chat.imatrix.gguf --model "$FIX/models/tiny-deepseek2-Q8_0.gguf" \
        --from-plan "$WORK/ex/reap_plan.json" -o "$WORK/im"
    expect_code 0
    /usr/bin/python3 - "$WORK/ex/keeplist.json" "$WORK/im/keeplist.json" <<'PY' && _pass || _fail "imported keeplist differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert [x["keep"] for x in a["blocks"]] == [x["keep"] for x in b["blocks"]]
assert b["method"]["from_plan"]["format"] == "keepmap"
PY
    run "$BIN" rank --imatrix chat=$I.chat.imatrix.gguf --model "$FIX/models/tiny-deepseek2-Q8_0.gguf" \
        --from-plan "$WORK/ex/reap_plan.json" --keep 12 -o "$WORK/im2"
    expect_code 2
    expect_err "gguf-reap: error: --from-plan decides which experts are kept: give no --keep, --prune, --ratio or --fit"
    run "$BIN" rank --imatrix chat=$I.chat.imatrix.gguf --model "$FIX/models/tiny-deepseek2-Q8_0.gguf" --ratio 25% \
        -o "$WORK/ex2" --export hipfire
    expect_code 2
    expect_err "gguf-reap: error: --export hipfire: the model has 4 layers but 3 MoE layers; hipfire's reap_plan.json needs a row of kept experts for every layer and says nothing of dense ones: use --export keepmap"
    [ ! -e "$WORK/ex2/keeplist.json" ] && _pass || _fail "a refused export wrote the keeplist"
else
    part_skipped numpy "ranking.npz in numpy (it is made from the fixtures)"
fi

TR=$FIX/trained
if part trained "the trained-fixture cases (no $TR)" [ -f "$TR/SHA256SUMS" ]; then
    case_ "trained fixture: --score-aggregate mean on REAP's per-token means warns above 25 %"
    S=$TR/scores/tiny-qwen3moe-trained-A.reap
    run "$BIN" rank --criterion external --scores c=$S.c.json --scores legal=$S.legal.json \
        --model "$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf" --keep 8 --score-aggregate mean -o "$WORK/sa"
    expect_code 0
    expect_err "gguf-reap: warning: score field 'reap' is a per-token mean and prunes 8 of 16 experts in every block (50 %)"
    expect_err "rank by a sum: --score-aggregate sum (the default)"
    run "$BIN" rank --criterion external --scores c=$S.c.json --scores legal=$S.legal.json \
        --model "$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf" --keep 8 -o "$WORK/ss"
    expect_code 0
    grep -qF "per-token mean" "$ERR" && _fail "the default (sum) warned" || _pass
    grep -qF 'Score field: `reap`, a per-token mean, summed over the routed tokens' "$WORK/ss/REAP-KEEPLIST-RECEIPT.md" &&
        _pass || _fail "the receipt does not say the means were summed"
    run "$BIN" rank --criterion external --scores c=$S.c.json --keep 8 --score-aggregate median -o "$WORK/sx"
    expect_code 2
fi
finish
