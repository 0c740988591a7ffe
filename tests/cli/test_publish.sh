# The publisher's path (issue 33): one ranking for a family of quants, every output checked before the
# work, audit's progress, and the wording a first real run met. The family cases run on the trained
# fixture (an f16 model and its Q8_0, ../shared/fixtures/trained); the rest on generated models.
# ctest-parts: fixtures proc
source "$(dirname "$0")/lib.sh"
expect_not_out() { grep -qF -- "$1" "$OUT" && _fail "stdout has: $1" || _pass; }

"$GEN" model --arch qwen3moe --experts 8 --used 2 -o "$WORK/m.gguf" >/dev/null
"$GEN" imatrix --model "$WORK/m.gguf" --domain chat -o "$WORK/m.chat.gguf" >/dev/null
printf '{"drop": {"0": [1], "1": [1], "2": [1], "3": [1]}}' >"$WORK/drop.json"

# ---- wording (item 10) ---------------------------------------------------------------------------

case_ "a missing positional is named as the usage line names it"
run "$BIN" splice
expect_code 2
expect_err "gguf-reap: error: MODEL is required"
run "$BIN" audit
expect_code 2
expect_err "gguf-reap: error: OUTPUT is required"
run "$BIN" inspect
expect_code 2
expect_err "gguf-reap: error: PATH is required"
run "$BIN" estimate
expect_code 2
expect_err "gguf-reap: error: MODEL is required"
run "$BIN" card --source "$WORK/m.gguf" --rank "$WORK"
expect_code 2
expect_err "gguf-reap: error: OUTPUT is required"

case_ "a missing path is exit 2 with one wording, in every command"
for args in "inspect $WORK/nope.gguf" \
    "splice $WORK/nope.gguf --keeplist $WORK/drop.json -o $WORK/o" \
    "audit $WORK/nope.gguf" \
    "estimate $WORK/nope.gguf" \
    "rank --imatrix $WORK/nope.gguf --prune 1 -o $WORK/r" \
    "plan-width --imatrix $WORK/nope.gguf --k 8 -o $WORK/p.npz" \
    "card $WORK/nope.gguf --source $WORK/m.gguf --rank $WORK"; do
    # shellcheck disable=SC2086
    run "$BIN" $args
    expect_code 2
    expect_err "gguf-reap: error: $WORK/nope.gguf: does not exist"
    expect_err_lines 1
done
run "$BIN" splice "$WORK/m.gguf" --keeplist "$WORK/nope.json" -o "$WORK/o"
expect_code 2
expect_err "gguf-reap: error: $WORK/nope.json: does not exist"
run "$BIN" audit "$WORK/m.gguf" --manifest "$WORK/nope.json"
expect_code 2
expect_err "gguf-reap: error: $WORK/nope.json: does not exist"
run "$BIN" card "$WORK/m.gguf" --source "$WORK/m.gguf" --rank "$WORK/nope"
expect_code 2
expect_err "gguf-reap: error: $WORK/nope: does not exist"
run "$BIN" inspect "$WORK"
expect_code 2
expect_err "gguf-reap: error: $WORK: is a directory, not a file"

case_ "--ratio is echoed as it was given"
run "$BIN" rank --imatrix "chat=$WORK/m.chat.gguf" --ratio 150% -o "$WORK/r150"
expect_code 2
expect_err "gguf-reap: error: --ratio 150%: must be a fraction of experts to prune, above 0 and below 1 (e.g. 0.25 or 25%)"
expect_err_lines 1
[ ! -e "$WORK/r150" ] && _pass || _fail "a refused --ratio made $WORK/r150"

case_ "a legacy imatrix of another model says so, as a GGUF one does"
"$GEN" model --arch qwen3moe --experts 16 --used 2 -o "$WORK/m16.gguf" >/dev/null
"$GEN" imatrix --model "$WORK/m.gguf" --domain chat --format dat -o "$WORK/m.chat.dat" >/dev/null
run "$BIN" rank --model "$WORK/m16.gguf" --imatrix "chat=$WORK/m.chat.dat" --criterion reap-mean --prune 1 -o "$WORK/rl"
expect_code 2
expect_err "gguf-reap: error: $WORK/m.chat.dat: blk.0.ffn_down_exps.weight holds"
expect_err "but $WORK/m16.gguf has 16 experts"
expect_err ": the imatrix was made for another model"
expect_err_lines 1
[ ! -e "$WORK/rl" ] && _pass || _fail "a refused rank left its new output directory $WORK/rl"
run "$BIN" rank --model "$WORK/m16.gguf" --imatrix "chat=$WORK/m.chat.gguf" --criterion reap-mean --prune 1 -o "$WORK/rg"
expect_code 2
expect_err ": the imatrix was made for another model"

case_ "no dead experts is said as such, never as 'blk.0 has 0 dead experts'"
run "$BIN" estimate "$WORK/m.gguf" --sweep --imatrix "chat=$WORK/m.chat.gguf"
expect_code 0
expect_out "dead-only    K = 8: the most experts kept when only dead ones are pruned (no dead experts)"
expect_not_out "0 dead experts"

case_ "splice -o creates its output directory, as rank -o does"
run "$BIN" splice "$WORK/m.gguf" --keeplist "$WORK/drop.json" -o "$WORK/new/dir/o"
expect_code 0
[ -f "$WORK/new/dir/o.gguf" ] && _pass || _fail "no $WORK/new/dir/o.gguf"
run "$BIN" rank --imatrix "chat=$WORK/m.chat.gguf" --prune 1 -o "$WORK/new/rank"
expect_code 0
[ -f "$WORK/new/rank/keeplist.json" ] && _pass || _fail "no $WORK/new/rank/keeplist.json"

# ---- outputs checked before the work (item 3) ------------------------------------------------------
# /proc is a directory where nobody can create a file (root included, which a read-only chmod is not).

proc_refuses() { [ -d /proc/self ] && ! touch /proc/gguf-reap-probe 2>/dev/null; }
if part proc "the unwritable-directory cases: /proc is missing or writable here" proc_refuses; then
    "$BIN" -q splice "$WORK/m.gguf" --keeplist "$WORK/drop.json" -o "$WORK/bad" >/dev/null
    # A byte of a kept expert changed: the audit would report a finding (exit 1) after reading it all.
    printf '\x55' | dd of="$WORK/bad.gguf" bs=1 seek=$(($(stat -c %s "$WORK/bad.gguf") - 100)) conv=notrunc 2>/dev/null

    case_ "audit --manifest-out where nothing can be written fails before the model is read"
    run "$BIN" audit "$WORK/bad.gguf" --source "$WORK/m.gguf" --manifest-out /proc/m.json
    expect_code 3
    expect_err "gguf-reap: error: /proc/m.json: create: "
    expect_no_out

    case_ "rank -o where nothing can be written fails before the imatrices are read"
    run "$BIN" rank --imatrix "chat=$WORK/m.gguf" --prune 1 -o /proc/r
    expect_code 3
    expect_err "gguf-reap: error: /proc/r: create directory"

    case_ "plan-width -o where nothing can be written fails before the imatrices are read"
    run "$BIN" plan-width --imatrix "chat=$WORK/m.gguf" --k 8 -o /proc/p.npz
    expect_code 3
    expect_err "gguf-reap: error: /proc/p.npz: create: "

    case_ "card -o where nothing can be written fails before the inputs are read"
    run "$BIN" card "$WORK/bad.gguf" --source "$WORK/m.gguf" --rank "$WORK/nope" -o /proc/README.md
    expect_code 3
    expect_err "gguf-reap: error: /proc/README.md: create: "

    case_ "estimate --svg where nothing can be written fails before the model is read"
    run "$BIN" estimate "$WORK/nope.gguf" --sweep --svg /proc/s.svg
    expect_code 3
    expect_err "gguf-reap: error: /proc/s.svg: create: "
fi

# A write that fails after the work (a file size limit of 2 KiB, as a full disk; stdout stays below it):
# the results still reach stdout.
nowrite() { run bash -c "ulimit -f 2; trap '' XFSZ; exec \"\$@\"" nowrite "$@"; }

case_ "audit: the manifest cannot be written, the report is still printed (exit 3)"
"$BIN" -q splice "$WORK/m.gguf" --keeplist "$WORK/drop.json" -o "$WORK/good" >/dev/null
nowrite "$BIN" audit "$WORK/good.gguf" --source "$WORK/m.gguf" --manifest-out "$WORK/man.json"
expect_code 3
expect_out "PASS: 1 shard(s)"
expect_err "File too large"
[ ! -e "$WORK/man.json" ] && _pass || _fail "a manifest was left under its final name"
ls -A "$WORK" | grep -q gguf-reap-tmp && _fail "a temporary was left behind" || _pass

case_ "rank: the files cannot be written, the summary is still printed (exit 3)"
nowrite "$BIN" rank --imatrix "chat=$WORK/m.chat.gguf" --prune 1 -o "$WORK/rfull"
expect_code 3
expect_out "keep 7 of 8 per block (--prune 1)"
expect_out "not written: $WORK/rfull/keeplist.json"
expect_err "File too large"
[ ! -e "$WORK/rfull/keeplist.json" ] && _pass || _fail "a keeplist was left under its final name"

case_ "plan-width: the plan cannot be written, its figures are still printed (exit 3)"
nowrite "$BIN" plan-width --imatrix "chat=$WORK/m.chat.gguf" --k 8 -o "$WORK/pw.npz"
expect_code 3
expect_out "kept 8 of 64 channels for 8 experts in each of 4 MoE blocks"
expect_out "not written: $WORK/pw.npz, $WORK/pw.json"
expect_err "File too large"
[ ! -e "$WORK/pw.npz" ] && [ ! -e "$WORK/pw.json" ] && _pass || _fail "a plan or receipt under its final name"

case_ "estimate --svg: the plot cannot be written, the sweep is still printed (exit 3)"
nowrite "$BIN" estimate "$WORK/m.gguf" --sweep --svg "$WORK/s.svg"
expect_code 3
expect_out "decode/token"
expect_not_out "wrote $WORK/s.svg"
expect_err "File too large"

# ---- audit's progress (item 9) ---------------------------------------------------------------------

case_ "audit draws its progress on a terminal, and only there"
run script -qec "\"$BIN\" audit \"$WORK/good.gguf\" --source \"$WORK/m.gguf\"" /dev/null
expect_code 0
grep -q $'\033\[K' "$OUT" && _pass || _fail "no progress line (erased with ESC [K) on a terminal"
run "$BIN" audit "$WORK/good.gguf" --source "$WORK/m.gguf"
expect_code 0
grep -q $'\033' "$ERR" && _fail "escape codes on stderr that is not a terminal" || _pass

# ---- estimates as llama.cpp users run models (item 5) ----------------------------------------------

case_ "estimate: one GPU and RAM first, as llama.cpp places the model (--cpu-moe, --n-cpu-moe N)"
"$BIN" inspect "$WORK/m.gguf" --json >"$WORK/m.inspect.json"
for flags in "" "--cpu-moe" "--n-cpu-moe 1" "--n-cpu-moe 4"; do
    # shellcheck disable=SC2086
    run "$BIN" estimate "$WORK/m.gguf" $flags --ctx 1000 --gpu-mem 2MiB --json
    expect_code 0
    /usr/bin/python3 - "$OUT" "$WORK/m.inspect.json" "$flags" <<'PY' && _pass || _fail "one GPU and RAM disagree with inspect ($flags)"
import json, sys
d, i, flags = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
# What llama.cpp's -ot exps=CPU moves: every tensor whose name has "exps" (inspect's classes), per block.
exps = sum(c["bytes"] for c in i["classes"] if "_exps" in c["class"])
embd = sum(c["bytes"] for c in i["classes"] if c["class"] == "token_embd")
ram_experts = {"": 0, "--cpu-moe": exps, "--n-cpu-moe 1": exps // 4, "--n-cpu-moe 4": exps}[flags]
one = d["one_gpu"]["before"]
assert d["one_gpu"]["offload"] == ({"": None, "--n-cpu-moe 4": "--n-cpu-moe 4"}.get(flags, flags) or None), d["one_gpu"]
assert one["ram"] == {"weights": embd + ram_experts, "experts": ram_experts}, (one, embd, exps)
assert one["gpu"]["weights"] == d["before"]["tensor_bytes"] - embd - ram_experts, one
assert one["gpu"]["kv_cache"] == 1000 * d["kv_cache"]["bytes_per_token"], one
assert one["gpu"]["total"] == one["gpu"]["weights"] + one["gpu"]["kv_cache"] and one["gpu"]["fits"] == (one["gpu"]["total"] <= 2 << 20)
PY
done
run "$BIN" estimate "$WORK/m.gguf" --cpu-moe --ctx 1000
expect_out "one GPU and RAM, as llama.cpp places it (-ngl 99 --cpu-moe): GPU = weights + KV cache (1,000 tokens)"
run "$BIN" estimate "$WORK/m.gguf" --cpu-moe --n-cpu-moe 2
expect_code 2
expect_err "gguf-reap: error: --cpu-moe and --n-cpu-moe: give one (--cpu-moe is every block)"

case_ "estimate: KV cache types as llama.cpp's -ctk/-ctv"
run "$BIN" estimate "$WORK/m.gguf" --json
F16=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["kv_cache"]["bytes_per_token"])' "$OUT")
run "$BIN" estimate "$WORK/m.gguf" -ctk q8_0 -ctv q4_0 --ctx 100 --json
expect_code 0
# K and V rows are equal here: F16 is 2 bytes an element, q8_0 34 and q4_0 18 bytes per 32 elements.
expect_json "d['kv_cache']['bytes_per_token'] * 128 == $F16 * 52 and d['kv_cache']['cache_type_k'] == 'q8_0' and d['kv_cache']['cache_type_v'] == 'q4_0'"
expect_json "d['one_gpu']['before']['gpu']['kv_cache'] == 100 * d['kv_cache']['bytes_per_token'] and d['tensor_parallel'][0]['before']['kv_cache'] == 100 * d['kv_cache']['bytes_per_token']"
run "$BIN" estimate "$WORK/m.gguf" -ctk q8_0 -ctv q4_0
expect_out "KV cache per token (-ctk q8_0 -ctv q4_0): 416 B over 4 attention layers"
run "$BIN" estimate "$WORK/m.gguf" -ctk q9
expect_code 2
expect_err "gguf-reap: error: -ctk 'q9' is not a KV cache type llama.cpp accepts (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1)"

case_ "estimate --fit memory= counts --ctx and --overhead, as the sweep does"
run "$BIN" estimate "$WORK/m.gguf" --fit memory=64MiB --ctx 4096 --overhead 1MiB --json
expect_code 0
expect_json "d['fit']['budget']['ctx'] == 4096 and d['fit']['budget']['overhead'] == 1048576 and d['fit']['at_k']['memory']['kv_cache'] == 4096 * $F16 and d['fit']['at_k']['memory']['overhead'] == 1048576"
run "$BIN" estimate "$WORK/m.gguf" --fit memory=64MiB --ctx 4096
expect_out "--fit memory=64MiB: K = 8,"
expect_not_out "KV cache 0 B"
run "$BIN" estimate "$WORK/m.gguf" --fit memory=64MiB,ctx=8 --ctx 16
expect_code 2
expect_err "gguf-reap: error: --fit 'memory=64MiB,ctx=8' says ctx=8, but --ctx says 16: give it once"

# ---- the plots (item 8): look at them as images too (docs/estimate.md, "The plots") -------------------

case_ "estimate --sweep --svg: even ticks, bytes in MiB, the source as a point, the chosen K and the context"
run "$BIN" estimate "$WORK/m.gguf" --sweep --svg "$WORK/sweep.svg" --tp 2 --ctx 4096 --fit memory=5MiB --gpu-mem 6MiB --json
expect_code 0
/usr/bin/python3 - "$OUT" "$WORK/sweep.svg" <<'PY' && _pass || _fail "the sweep plot breaks a rule of docs/estimate.md, The plots"
import json, sys, xml.etree.ElementTree as ET
d = json.load(open(sys.argv[1]))
root = ET.parse(sys.argv[2]).getroot()
ns = "{http://www.w3.org/2000/svg}"
texts = [t.text or "" for t in root.iter(ns + "text")]
assert "MiB" in texts, texts  # the unit that fits MiB files
src = root.find(f"{ns}g[@class='source']")
assert src is not None and int(src.get("data-k")) == d["expert_count"], "no source point"
chosen = root.find(f"{ns}g[@class='chosen']")
assert chosen is not None and int(chosen.get("data-k")) == d["fit"]["k"], "no chosen K"
assert any("4,096 tokens of context" in t for t in texts), texts
# y ticks: the labels at x = left − 6, evenly spaced values, every one a multiple of the step
ys = [float(t.text) for t in root.iter(ns + "text") if t.get("text-anchor") == "end" and t.get("x") == "84.0"]  # the y ticks
steps = {round(b - a, 9) for a, b in zip(ys, ys[1:])}
assert len(ys) >= 4 and len(steps) == 1, ys
step = steps.pop()
assert all(abs(v / step - round(v / step)) < 1e-6 for v in ys), ys
# the legend keeps the right margin: no other text there but the legend's own
legend = {g.get("data-series") for g in root.findall(f"{ns}g[@class='series']")}
assert all(float(t.get("x")) < 650 or t.get("text-anchor") == "middle" or (t.text or "") in legend
           or (t.text or "").startswith("source") for t in root.iter(ns + "text") if t.get("x")), \
    "a label in the legend's margin"
PY

# ---- one ranking, a family of quants (item 1) ------------------------------------------------------

if fixtures "the f16 and Q8_0 of the trained model"; then
    T=$FIX/trained
    F16=$T/models/tiny-qwen3moe-trained-A-f16.gguf
    Q8=$T/models/tiny-qwen3moe-trained-A-Q8_0.gguf
    "$BIN" -q rank --model "$F16" --imatrix "python=$T/imatrix/tiny-qwen3moe-trained-A.python.imatrix.gguf" \
        --imatrix "legal=$T/imatrix/tiny-qwen3moe-trained-A.legal.imatrix.gguf" --keep 12 -o "$WORK/rank" >/dev/null
    KL=$WORK/rank/keeplist.json
    NOTE="ranked on tiny-qwen3moe-trained-A-f16.gguf, applied to tiny-qwen3moe-trained-A-Q8_0.gguf (the same architecture, expert layout and tensor names)"

    case_ "a keeplist ranked on the f16 applies to its Q8_0: splice says so once"
    run "$BIN" splice "$Q8" --keeplist "$KL" -o "$WORK/q8/A-12-Q8_0"
    expect_code 0
    expect_out "keeplist $NOTE"
    [ "$(grep -c 'ranked on' "$OUT" "$ERR" | awk -F: '{s += $2} END {print s}')" = 1 ] && _pass ||
        _fail "'ranked on' is not said exactly once"
    run "$BIN" splice "$F16" --keeplist "$KL" -o "$WORK/f16/A-12-f16" --json
    expect_code 0
    expect_out '"keeplist_note": null'

    case_ "audit, estimate and card say it too"
    run "$BIN" audit "$WORK/q8/A-12-Q8_0.gguf" --source "$Q8" --keeplist "$KL"
    expect_code 0
    expect_out "note: keeplist $NOTE"
    run "$BIN" estimate "$Q8" --keeplist "$KL"
    expect_code 0
    expect_out "keeplist     $NOTE"
    run "$BIN" card "$WORK/q8/A-12-Q8_0.gguf" --source "$Q8" --rank "$WORK/rank"
    expect_code 0
    expect_out "ranked on tiny-qwen3moe-trained-A-f16.gguf, applied to tiny-qwen3moe-trained-A-Q8_0.gguf: one ranking serves every quantisation of the same network"
    run "$BIN" card "$WORK/q8/A-12-Q8_0.gguf" --source "$Q8" --rank "$WORK/rank" --json
    expect_code 0
    expect_out "\"ranked_on_other\": \"$NOTE\""

    case_ "card: the run lines as people use them, and the hardware table llama.cpp's way"
    run "$BIN" card "$WORK/q8/A-12-Q8_0.gguf" --source "$Q8" --rank "$WORK/rank" --hf-repo org/A-REAP12-GGUF \
        --ctx 4096 --cpu-moe -ctk q8_0 --gpu-mem 8GiB
    expect_code 0
    expect_out "llama-server -hf org/A-REAP12-GGUF:Q8_0 -c 4096 -ngl 99 --cpu-moe -ctk q8_0"
    expect_out "llama-cli -hf org/A-REAP12-GGUF:Q8_0 -c 4096 -ngl 99 --cpu-moe -ctk q8_0"
    expect_out "llama-server -m A-12-Q8_0.gguf -c 4096 -ngl 99 --cpu-moe -ctk q8_0 --port 8080"
    expect_out "One GPU with the host's RAM, as llama.cpp places the build (\`-ngl 99 --cpu-moe\`)"
    expect_out "| GPU | "
    run "$BIN" card "$WORK/q8/A-12-Q8_0.gguf" --source "$Q8" --rank "$WORK/rank" --cpu-moe --ctx 4096 --json
    "$BIN" estimate "$WORK/q8/A-12-Q8_0.gguf" --cpu-moe --ctx 4096 --json >"$WORK/est.json"
    /usr/bin/python3 - "$OUT" "$WORK/est.json" <<'PY' && _pass || _fail "the card's one-GPU row is not estimate's"
import json, sys
c, e = json.load(open(sys.argv[1]))["hardware"]["one_gpu"], json.load(open(sys.argv[2]))["one_gpu"]["before"]
assert c["offload"] == "--cpu-moe" and [c["gpu_weights"], c["gpu_kv_cache"], c["ram_weights"], c["ram_experts"]] == \
    [e["gpu"]["weights"], e["gpu"]["kv_cache"], e["ram"]["weights"], e["ram"]["experts"]], (c, e)
PY

    case_ "splice names the build and its base model; audit expects exactly that"
    run "$BIN" inspect "$WORK/q8/A-12-Q8_0.gguf" --json
    expect_code 0
    NAME=$("$BIN" inspect "$Q8" --json | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["kv"]["general.name"])')
    expect_json "d['kv']['general.name'] == \"$NAME (12 of 16 routed experts)\" and d['kv']['general.base_model.0.name'] == \"$NAME\" and d['kv']['general.base_model.count'] == 1"
    run "$BIN" audit "$WORK/q8/A-12-Q8_0.gguf" --source "$Q8"
    expect_code 0
    run "$BIN" splice "$Q8" --keeplist "$KL" -o "$WORK/q8np/x" --no-provenance
    expect_code 0
    run "$BIN" inspect "$WORK/q8np/x.gguf" --json
    expect_json "d['kv']['general.name'] == \"$NAME\" and 'general.base_model.count' not in d['kv']"

    case_ "the reap tag only for the REAP criterion; the safety margin names its expert and domain"
    run "$BIN" card "$WORK/q8/A-12-Q8_0.gguf" --source "$Q8" --rank "$WORK/rank"
    expect_not_out '- "reap"'
    expect_out "; the closest to being kept is blk."
    expect_json_file() { cp "$1" "$OUT"; expect_json "$2"; }
    expect_json_file "$KL" "all(d['method']['safety_margin'][k] is not None for k in ('block', 'expert', 'domain'))"
    "$BIN" -q rank --model "$Q8" --criterion external --scores "python=$T/scores/tiny-qwen3moe-trained-A.reap.python.json" \
        --scores "legal=$T/scores/tiny-qwen3moe-trained-A.reap.legal.json" --keep 12 -o "$WORK/rank-reap" >/dev/null 2>&1
    "$BIN" -q splice "$Q8" --keeplist "$WORK/rank-reap/keeplist.json" -o "$WORK/reap/A-REAP12-Q8_0" >/dev/null
    run "$BIN" card "$WORK/reap/A-REAP12-Q8_0.gguf" --source "$Q8" --rank "$WORK/rank-reap"
    expect_code 0
    expect_out '- "reap"'

    case_ "files meant for upload name no local directory: keeplist.json, the receipt"
    grep -q '"/' "$KL" && _fail "keeplist.json holds an absolute path" || _pass
    grep -qF "$T/" "$WORK/rank/REAP-KEEPLIST-RECEIPT.md" && _fail "the receipt holds a local path" || _pass
    expect_json_file "$KL" "[x['file'] for x in d['method']['domains']] == ['tiny-qwen3moe-trained-A.python.imatrix.gguf', 'tiny-qwen3moe-trained-A.legal.imatrix.gguf']"

    case_ "card --eval: a quality verdict in the headline; eval.json and eval.svg for upload"
    FAKE=$(cd "$(dirname "$0")/fake-llama" && pwd)
    IM=()
    for d in c changelog legal markdown python; do IM+=(--imatrix "$d=$T/imatrix/tiny-qwen3moe-trained-A.$d.imatrix.gguf"); done
    "$BIN" -q rank --model "$Q8" "${IM[@]}" --keep 12 -o "$WORK/ev/rank12" >/dev/null 2>&1
    "$BIN" -q splice "$Q8" --keeplist "$WORK/ev/rank12/keeplist.json" -o "$WORK/ev/keep12" >/dev/null
    cp "$T/corpora/python.heldout.txt" "$T/corpora/c.heldout.txt" "$WORK/ev/"
    run env -u GGUF_REAP_LLAMA_BIN "$BIN" eval --source "$Q8" "$WORK/ev/keep12.gguf" --text "python=$WORK/ev/python.heldout.txt" \
        --text "c=$WORK/ev/c.heldout.txt" --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/ev/cache" \
        -o "$WORK/ev/eval.json"
    expect_code 0
    grep -q '"/' "$WORK/ev/eval.json" && _fail "eval.json holds an absolute path" || _pass
    run "$BIN" card "$WORK/ev/keep12.gguf" --source "$Q8" --rank "$WORK/ev/rank12" --eval "$WORK/ev/eval.json"
    expect_code 0
    expect_out "**Quality**: KLD 0.64 ± 0.03 on python (504 tokens): often predicts something else; 0.16 ± 0.02 on c (504 tokens): close (mean KL divergence"
    /usr/bin/python3 - "$WORK/ev/eval.svg" <<'PY' && _pass || _fail "eval.svg breaks a rule of docs/estimate.md, The plots"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
texts = [t.text or "" for t in root.iter(ns + "text")]
assert "size on disk (MiB)" in texts, texts
assert "K=12" in texts and "K=16" in texts, texts  # each build's K and the source's
assert root.find(f"{ns}g[@class='source']") is not None, "no source point"
assert len(root.findall(f"{ns}line[@class='err']")) == 2, "an error bar per point"
assert any("context 128 tokens per chunk" in t for t in texts), texts
PY

    case_ "card: each KLD with llama-perplexity's ± and its tokens; held out only when known"
    # The fixture's imatrices were not made by gguf-reap calibrate: whether a text was held out is not
    # known, and the card does not say it was (issue 40).
    expect_out "| python | 504 | "
    expect_out " | not known |"
    run "$BIN" card "$WORK/ev/keep12.gguf" --source "$Q8" --rank "$WORK/ev/rank12" --eval "$WORK/ev/eval.json" --json
    expect_json "[(t['name'], t['tokens'], t['held_out']) for t in d['measured']['texts']] == [('python', 504, None), ('c', 504, None)]"
    expect_json "all(t['kld_mean_err'] == r['kld']['mean_err'] > 0 for t, r in zip(d['measured']['texts'], [x for x in json.load(open('$WORK/ev/eval.json'))['runs'] if x['output'] == 'keep12.gguf']))"
    # A calibration record that says c was calibrated on c.heldout.txt itself, every other domain on its
    # own calibration text: c is calibration text, python is held out.
    /usr/bin/python3 - "$T" "$WORK/ev" <<'PY'
import hashlib, json, sys
t, w = sys.argv[1], sys.argv[2]
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
texts = []
for d in ["c", "changelog", "legal", "markdown", "python"]:
    text = f"{w}/c.heldout.txt" if d == "c" else f"{t}/corpora/{d}.calib.txt"
    u = {"path": text, "sha256": sha(text), "bytes": 1, "tokens": 1}
    texts.append({"name": d, "path": text, "sha256": sha(text), "bytes": 1, "tokens": 1, "used": u, "chunks": 1,
                  "imatrix": f"{d}.imatrix.gguf", "imatrix_sha256": sha(f"{t}/imatrix/tiny-qwen3moe-trained-A.{d}.imatrix.gguf"),
                  "key": "", "seconds": 0, "command": [f"{w}/llama-imatrix", "-f", text], "tokenize_command": []})
json.dump({"tool": "gguf-reap 0.1.0", "texts": texts}, open(f"{w}/cal.json", "w"))
PY
    mkdir -p "$WORK/ev/hc"
    "$BIN" -q rank --model "$Q8" "${IM[@]}" --keep 12 --calibration "$WORK/ev/cal.json" -o "$WORK/ev/rank12c" >/dev/null 2>&1
    "$BIN" -q splice "$Q8" --keeplist "$WORK/ev/rank12c/keeplist.json" -o "$WORK/ev/hc/keep12" >/dev/null
    run env -u GGUF_REAP_LLAMA_BIN "$BIN" eval --source "$Q8" "$WORK/ev/hc/keep12.gguf" --text "python=$WORK/ev/python.heldout.txt" \
        --text "c=$WORK/ev/c.heldout.txt" --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/ev/cache" \
        -o "$WORK/ev/hc/eval.json"
    expect_code 0
    run "$BIN" card "$WORK/ev/hc/keep12.gguf" --source "$Q8" --rank "$WORK/ev/rank12c" --eval "$WORK/ev/hc/eval.json"
    expect_code 0
    expect_out " on python (504 tokens, held-out text): "
    expect_out " on c (504 tokens, calibration text of c): "
    expect_out " % | yes |"
    expect_out " % | no: calibration text of c |"
    run "$BIN" card "$WORK/ev/hc/keep12.gguf" --source "$Q8" --rank "$WORK/ev/rank12c" --eval "$WORK/ev/hc/eval.json" --json
    expect_json "[(t['name'], t['held_out'], t['calibration_domain']) for t in d['measured']['texts']] == [('python', True, None), ('c', False, 'c')]"
    # A calibrate.json from before issue 40 records absolute paths: the keeplist names none of them.
    grep -qF -e "$WORK" -e "$T" "$WORK/ev/rank12c/keeplist.json" && _fail "keeplist.json names a path of this machine" || _pass

    case_ "card --upload-dir: README.md and every file it names; every link resolves inside the folder"
    "$BIN" -q audit "$WORK/ev/keep12.gguf" --source "$Q8" --manifest-out "$WORK/ev/MANIFEST.json" --json >"$WORK/ev/audit.json"
    UP=(card "$WORK/ev/keep12.gguf" --source "$Q8" --rank "$WORK/ev/rank12" --audit "$WORK/ev/audit.json"
        --manifest "$WORK/ev/MANIFEST.json" --eval "$WORK/ev/eval.json")
    run "$BIN" "${UP[@]}" --upload-dir "$WORK/up"
    expect_code 0
    expect_out "wrote $WORK/up/README.md and 7 files ("
    expect_out "publish the folder with \`hf upload ORG/REPO $WORK/up .\`"
    /usr/bin/python3 - "$WORK/up" "$WORK/ev" <<'PY' && _pass || _fail "the upload folder is not the card's files"
import filecmp, os, re, sys, urllib.parse
up, ev = sys.argv[1], sys.argv[2]
want = {"README.md", "keep12.gguf", "MANIFEST.json", "MANIFEST.sha256", "keeplist.json", "REAP-KEEPLIST-RECEIPT.md", "eval.json", "eval.svg"}
have = set(os.listdir(up))
assert have == want, sorted(have ^ want)
md = open(f"{up}/README.md").read()
links = [urllib.parse.unquote(m) for m in re.findall(r"\]\(([^)]+)\)", md)]
for l in links:
    assert "/" not in l and ":" not in l and os.path.isfile(f"{up}/{l}"), l
assert set(links) == want - {"README.md"}, sorted(want - {"README.md"} - set(links))
assert "![mean KLD against size per text](eval.svg)" in md
src = {"keep12.gguf": f"{ev}/keep12.gguf", "MANIFEST.json": f"{ev}/MANIFEST.json", "eval.json": f"{ev}/eval.json",
       "eval.svg": f"{ev}/eval.svg", "keeplist.json": f"{ev}/rank12/keeplist.json"}
for n, p in src.items():
    assert filecmp.cmp(f"{up}/{n}", p, shallow=False), n
assert os.stat(f"{up}/keep12.gguf").st_ino == os.stat(f"{ev}/keep12.gguf").st_ino, "not a hard link"
PY
    (cd "$WORK/up" && sha256sum -c --quiet MANIFEST.sha256) && _pass || _fail "sha256sum -c MANIFEST.sha256 fails in the folder"
    run "$BIN" "${UP[@]}" -o "$WORK/up/README.md" --upload-dir "$WORK/up2"
    expect_code 2
    run "$BIN" "${UP[@]}" --upload-dir "$WORK/up"
    expect_code 2
    expect_err "gguf-reap: error: $WORK/up: holds the files of an earlier upload folder ("
    run "$BIN" "${UP[@]}" --upload-dir "$WORK/up" --force --hf-repo org/keep12-GGUF
    expect_code 0
    expect_out "publish the folder with \`hf upload org/keep12-GGUF $WORK/up .\`"
    echo x >"$WORK/up/notes.txt"
    run "$BIN" "${UP[@]}" --upload-dir "$WORK/up" --force
    expect_code 2
    expect_err "gguf-reap: error: $WORK/up: holds notes.txt, which the card does not name: \`hf upload\` would publish it too; remove it, or give a new or empty folder"
    run "$BIN" card "$WORK/ev/keep12.gguf" --source "$Q8" --rank "$WORK/ev/rank12" --eval "$WORK/ev/audit.json" --upload-dir "$WORK/up3"
    expect_code 2
    [ ! -e "$WORK/up3" ] && _pass || _fail "a refused card left $WORK/up3"

    case_ "a keeplist of another layout is refused everywhere, with one wording"
    mkdir -p "$WORK/other"
    sed 's/"expert_used_count": 4/"expert_used_count": 2/' "$KL" >"$WORK/other/keeplist.json"
    WHY="source.expert_used_count: ranked on a model with 2 experts used per token, but $Q8 has 4: a keeplist applies only to a model with the same architecture, expert layout and tensor names (another model, or an already pruned one?)"
    run "$BIN" splice "$Q8" --keeplist "$WORK/other/keeplist.json" -o "$WORK/q8o/x"
    expect_code 2
    expect_err "gguf-reap: error: $WORK/other/keeplist.json: $WHY"
    expect_err_lines 1
    run "$BIN" audit "$WORK/q8/A-12-Q8_0.gguf" --source "$Q8" --keeplist "$WORK/other/keeplist.json"
    expect_code 2
    expect_err "gguf-reap: error: $WORK/other/keeplist.json: $WHY"
    run "$BIN" estimate "$Q8" --keeplist "$WORK/other/keeplist.json"
    expect_code 2
    expect_err "gguf-reap: error: $WORK/other/keeplist.json: $WHY"
    run "$BIN" card "$WORK/q8/A-12-Q8_0.gguf" --source "$Q8" --rank "$WORK/other"
    expect_code 2
    expect_err "gguf-reap: error: $WORK/other/keeplist.json: $WHY"

    case_ "other tensor names are another layout"
    sed 's/"tensor_names_sha256": "[0-9a-f]*"/"tensor_names_sha256": "'"$(printf '0%.0s' $(seq 64))"'"/' "$KL" \
        >"$WORK/other/keeplist.json"
    run "$BIN" splice "$Q8" --keeplist "$WORK/other/keeplist.json" -o "$WORK/q8o/x"
    expect_code 2
    expect_err "gguf-reap: error: $WORK/other/keeplist.json: source.tensor_names_sha256: ranked on a model with tensor names of sha256 0000000000000000, but $Q8 has other tensor names"
fi

finish
