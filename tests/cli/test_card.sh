source "$(dirname "$0")/lib.sh"
# gguf-reap card on a tiny Kimi-K3-shaped model (896 experts, 16 used, 1 shared; 9 MB in 2 shards):
# every figure of `card --json` against inspect, estimate, keeplist.json, the receipt, the audit and the
# manifest, the Markdown against the same facts, and each refusal with its message.
"$GEN" model --skeleton --preset kimi-k3 --blocks 4 --embd 32 --expert-ff 32 --vocab 64 --shards 2 \
    -o "$WORK/m" >/dev/null
M=$WORK/m-00001-of-00002.gguf
"$GEN" imatrix --model "$M" --domain chat --seed 1 --dead-per-block 2 --super 1:5 -o "$WORK/chat.imatrix.gguf" >/dev/null
"$GEN" imatrix --model "$M" --domain code --seed 1 --dead-per-block 2 -o "$WORK/code.imatrix.gguf" >/dev/null
"$BIN" -q rank --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" --imatrix code="$WORK/code.imatrix.gguf" \
    --ratio 50% -o "$WORK/rank" >/dev/null
mkdir -p "$WORK/out"
"$BIN" -q splice "$M" --keeplist "$WORK/rank/keeplist.json" -o "$WORK/out/p" >/dev/null
P=$WORK/out/p-00001-of-00002.gguf
"$BIN" -q audit "$P" --source "$M" --manifest-out "$WORK/out/man.json" --json >"$WORK/audit.json"
"$BIN" inspect "$M" --json >"$WORK/inspect-src.json"
"$BIN" inspect "$P" --json >"$WORK/inspect-out.json"
"$BIN" estimate "$M" --keeplist "$WORK/rank/keeplist.json" --json >"$WORK/estimate-src.json"
"$BIN" estimate "$P" --tp 4,2 --gpu-mem 2MiB --overhead 64KiB --ctx 1000 --json >"$WORK/estimate-out.json"
CARD=("$BIN" card "$P" --source "$M" --rank "$WORK/rank")

case_ "card --help goes to stdout with exit 0"
run "$BIN" card --help
expect_code 0
expect_out "--manifest"
expect_out "--note"

case_ "card --json: every figure against inspect, estimate, the keeplist, the receipt, the audit, the manifest"
run "${CARD[@]}" --audit "$WORK/audit.json" --manifest "$WORK/out/man.json" --tp 2,4 --gpu-mem 2MiB \
    --overhead 64KiB --ctx 1000 --base-model org/Kimi-K3 --note "Tested only on synthetic weights." --json
expect_code 0
cp "$OUT" "$WORK/card.json"
/usr/bin/python3 - "$WORK" <<'PY' && _pass || _fail "card --json disagrees with its sources"
import hashlib, json, re, sys
w = sys.argv[1]
load = lambda p: json.load(open(f"{w}/{p}"))
card, isrc, iout = load("card.json"), load("inspect-src.json"), load("inspect-out.json")
esrc, eout, aud, man = load("estimate-src.json"), load("estimate-out.json"), load("audit.json"), load("out/man.json")
kl = load("rank/keeplist.json")
receipt = open(f"{w}/rank/REAP-KEEPLIST-RECEIPT.md").read()
sha = lambda p: hashlib.sha256(open(f"{w}/{p}", "rb").read()).hexdigest()
bad = []
def check(what, got, want):
    if got != want: bad.append(f"{what}: card {got!r}, expected {want!r}")

for col, i, e in (("source", isrc, esrc), ("build", iout, eout)):
    c = card[col]
    check(f"{col}.expert_count", c["expert_count"], i["moe"]["experts"])
    check(f"{col}.expert_used_count", c["expert_used_count"], i["moe"]["used"])
    check(f"{col}.moe_blocks", c["moe_blocks"], i["moe"]["blocks"])
    check(f"{col}.expert_width", c["expert_width"], e["before"]["expert_width"])
    check(f"{col}.parameters", c["parameters"], i["parameters"])
    check(f"{col}.active_parameters", c["active_parameters"], e["before"]["active_parameters"])
    check(f"{col}.file_bytes", c["file_bytes"], i["file_size"])
    check(f"{col}.tensor_bytes", c["tensor_bytes"], i["tensor_bytes"])
    check(f"{col}.decode_bytes_per_token", c["decode_bytes_per_token"], i["decode_bytes_per_token"]["total"])
    check(f"{col}.tensor_types", c["tensor_types"], i["tensor_type_histogram"])
    check(f"{col}.shards", c["shards"], len(i["shards"]))
    check(f"{col}.first_shard", c["first_shard"], i["shards"][0]["path"].split("/")[-1])
# What estimate predicted for the keeplist is what the build is.
check("build = estimate's after, file bytes", card["build"]["file_bytes"], esrc["after"]["file_bytes"])
check("build = estimate's after, parameters", card["build"]["parameters"], esrc["after"]["parameters"])
check("build = estimate's after, decode", card["build"]["decode_bytes_per_token"],
      esrc["after"]["decode_bytes_per_token"]["total"])
h = card["headline"]
check("headline.experts_per_layer", h["experts_per_layer"], kl["source"]["expert_count"])
check("headline.experts_kept_per_layer", h["experts_kept_per_layer"], kl["n_keep"])
check("headline.experts_removed_per_layer", h["experts_removed_per_layer"], kl["source"]["expert_count"] - kl["n_keep"])
check("headline.file_bytes", h["file_bytes"], iout["file_size"])
check("headline.file_gb", h["file_gb"], f"{iout['file_size'] / 1e6:.1f} MB")
check("headline.shards", h["shards"], 2)
check("base_model", [card["base_model"], card["base_model_from"]], ["org/Kimi-K3", "--base-model"])
# `reap` only for the REAP criterion: this keeplist's criterion is energy.
check("tags", card["tags"], [isrc["arch"], "expert-pruning"] + sorted(iout["tensor_type_histogram"]))

m, km = card["method"], kl["method"]
check("criterion", m["criterion"], km["criterion"])
check("consensus", m["consensus"], km["consensus"])
check("rule", m["rule"], km["rule"])
check("criterion in words, as the receipt", f"- Criterion `{m['criterion']}`: {m['criterion_words']}." in receipt, True)
check("consensus in words, as the receipt", f"- Consensus `{m['consensus']}`: {m['consensus_words']}." in receipt, True)
check("domains", [(d["name"], d["tokens"], d["datasets"]) for d in m["domains"]],
      [(d["name"], d["tokens"], d["datasets"]) for d in km["domains"]])
check("dead_experts", m["dead_experts"], sum(len(b["dead"]) for b in kl["blocks"]))
check("dead_blocks", m["dead_blocks"], sum(1 for b in kl["blocks"] if b["dead"]))
check("dead > 0 in this fixture", m["dead_experts"] > 0, True)
check("super_experts", [(s["block"], s["expert"], s["reason"]) for s in m["super_experts"]],
      [(b["block"], p["expert"], p["reason"]) for b in kl["blocks"] for p in b["protected"]])
check("one super-expert in this fixture", len(m["super_experts"]), 1)
for s in m["super_experts"]:
    r = re.search(r"- blk\.%d expert %d: share ([0-9.]+) %% of the block's" % (s["block"], s["expert"]), receipt)
    check("super-expert share against the receipt", r is not None and abs(float(r.group(1)) - s["share_percent"]) <= 0.051, True)
check("thresholds", [m["super_expert_thresholds"]["share"], m["super_expert_thresholds"]["channel_ratio"]],
      [km["super_expert"]["share_threshold"], km["super_expert"]["channel_ratio_threshold"]])
sm = m["safety_margin"]
check("safety margin numbers", [sm["best_pruned_rank"], sm["of"], sm["median_layer"]],
      [km["safety_margin"]["best_pruned_rank"], km["safety_margin"]["of"], km["safety_margin"]["median_layer"]])
check("safety margin sentence, as the receipt", f"- Safety margin: {sm['sentence']}." in receipt, True)
check("keeplist sha256", m["keeplist_sha256"], sha("rank/keeplist.json"))
check("keeplist sha256 = the output's provenance", m["keeplist_sha256"], iout["kv"]["gguf_reap.keeplist_sha256"])
check("receipt", m["receipt"], {"name": "REAP-KEEPLIST-RECEIPT.md", "sha256": sha("rank/REAP-KEEPLIST-RECEIPT.md")})

v, s = card["verified"], aud["summary"]
check("audited", [v["audited"], v["result"], v["with_source"], v["hashed"]], [True, aud["result"], True, True])
check("audit tool and date", [v["tool"], v["date"]], [aud["tool"], aud["date"]])
for k in ("shards", "tensors", "tensors_identical", "expert_tensors", "slabs", "bytes_compared", "kvs_checked"):
    check(f"verified.{k}", v[k], s[k])
check("manifest", v["manifest"], {"name": "man.json", "sha256": sha("out/man.json")})
files = card["files"]["shards"]
check("files", [(f["name"], f["size"], f["sha256"]) for f in files],
      [(x["name"], x["size"], x["sha256"]) for x in man["shards"]])
check("files = the audit's", [(f["name"], f["size"], f["sha256"]) for f in files],
      [(x["path"].split("/")[-1], x["size"], x["sha256"]) for x in aud["shards"]])
check("files on disk", [f["size"] for f in files], [x["file_size"] for x in iout["shards"]])
check("sha256_from", card["files"]["sha256_from"], "manifest")

hw = card["hardware"]
check("gpu_mem, overhead, ctx", [hw["gpu_mem"], hw["overhead"], hw["ctx"]], [eout["gpu_mem"], eout["overhead"], eout["ctx"]])
check("kv bytes per token", hw["kv_bytes_per_token"], eout["kv_cache"]["bytes_per_token"])
check("tp", [r["tp"] for r in hw["tensor_parallel"]], [r["tp"] for r in eout["tensor_parallel"]])
for r, e in zip(hw["tensor_parallel"], eout["tensor_parallel"]):
    b = e["before"]
    check(f"tp {r['tp']}", [r["weights"], r["kv_cache"], r["overhead"], r["need"], r["fits"], r["kv_bytes_per_token"]],
          [b["weights"], b["kv_cache"], b["overhead"], b["need"], b["fits"], e["kv_bytes_per_token"]])
check("fits differ by TP in this fixture", sorted({r["fits"] for r in hw["tensor_parallel"]}), [False, True])
check("run", card["run"], {"llama_cli": "llama-cli -m p-00001-of-00002.gguf -c 1000",
                           "llama_server": "llama-server -m p-00001-of-00002.gguf -c 1000 --port 8080",
                           "llama_server_hf": None, "llama_cli_hf": None})
one = hw["one_gpu"]
check("one GPU and RAM = estimate's", one, {"offload": None, "gpu_weights": eout["one_gpu"]["before"]["gpu"]["weights"],
      "gpu_kv_cache": eout["one_gpu"]["before"]["gpu"]["kv_cache"], "gpu_overhead": eout["one_gpu"]["before"]["gpu"]["overhead"],
      "gpu_total": eout["one_gpu"]["before"]["gpu"]["total"], "fits": eout["one_gpu"]["before"]["gpu"]["fits"],
      "ram_weights": eout["one_gpu"]["before"]["ram"]["weights"], "ram_experts": 0})
check("the note is under Not verified", card["not_verified"][-1], "Tested only on synthetic weights.")
check("calibration line", any("chat (16,384 tokens), code (16,384 tokens)" in n for n in card["not_verified"]), True)
check("no task benchmark line", card["not_verified"][0].startswith("No task benchmark"), True)
check("written", card["written"], None)
check("identities", [m["source_identified"], m["output_names_keeplist"]], [True, True])
for b in bad: print(b)
sys.exit(1 if bad else 0)
PY

case_ "the Markdown states the same facts"
run "${CARD[@]}" --audit "$WORK/audit.json" --manifest "$WORK/out/man.json" --tp 2,4 --gpu-mem 2MiB \
    --overhead 64KiB --ctx 1000 --base-model org/Kimi-K3 --note "Tested only on synthetic weights."
expect_code 0
cp "$OUT" "$WORK/card.md"
/usr/bin/python3 - "$WORK" <<'PY' && _pass || _fail "the Markdown card disagrees with card --json"
import json, sys
w = sys.argv[1]
c, md = json.load(open(f"{w}/card.json")), open(f"{w}/card.md").read()
com = lambda n: f"{n:,}"
want = [
    "---\nbase_model: \"org/Kimi-K3\"\nlibrary_name: gguf\n",
    "**448 of 896 routed experts removed per MoE layer** (448 kept in each of the 3 MoE layers, 16 routed per token): "
    f"{c['headline']['file_gb']} in 2 shards",
    f"| parameters | {com(c['source']['parameters'])} | {com(c['build']['parameters'])} |",
    f"| size on disk, bytes | {com(c['source']['file_bytes'])} (",
    f"| decode bytes per token | {com(c['source']['decode_bytes_per_token'])} (",
    f"verified {com(c['verified']['tensors'])} tensors in 2 shards",
    f"Manifest `man.json`, sha256 `{c['verified']['manifest']['sha256']}`",
    "- Tested only on synthetic weights.\n",
    "## Not verified\n\n- No task benchmark",
    f"KV cache: {com(c['hardware']['kv_bytes_per_token'])} bytes per token",
    "llama-cli -m p-00001-of-00002.gguf -c 1000\n",
] + [f"| `{f['name']}` | {com(f['size'])} | `{f['sha256']}` |" for f in c["files"]["shards"]] \
  + [f"| {r['tp']} | " for r in c["hardware"]["tensor_parallel"]]
missing = [x for x in want if x not in md]
for x in missing: print("missing:", x)
sys.exit(1 if missing else 0)
PY

case_ "not audited: no audit, no manifest"
run "${CARD[@]}" --json
expect_code 0
expect_json "d['verified'] == {'audited': False, 'manifest': None}"
expect_json "[f['sha256'] for f in d['files']['shards']] == [None, None] and d['files']['sha256_from'] is None"
expect_json "any(n.startswith('The files were not audited') for n in d['not_verified'])"
expect_json "d['base_model'] is None"
expect_err "names no Hugging Face repository"
run "${CARD[@]}"
expect_code 0
expect_out "## Verified

Not audited."
expect_out "| \`p-00001-of-00002.gguf\` | 2,122,976 | not recorded |"
expect_out "The sha256 of the shards is not recorded: run \`gguf-reap audit p-00001-of-00002.gguf --source m-00001-of-00002.gguf --manifest-out MANIFEST.json\`"

case_ "a hashing audit without --manifest gives the sha256"
run "${CARD[@]}" --audit "$WORK/audit.json" --json
expect_code 0
expect_json "d['files']['sha256_from'] == 'audit' and all(f['sha256'] for f in d['files']['shards'])"

case_ "an audit against a manifest of the source: the card names that manifest and its sha256"
"$BIN" -q audit "$M" --manifest-out "$WORK/src-man.json"
"$BIN" -q audit "$P" --source-manifest "$WORK/src-man.json" --json >"$WORK/audit-sm.json"
run "${CARD[@]}" --audit "$WORK/audit-sm.json" --json
expect_code 0
SM_SHA=$(sha256sum "$WORK/src-man.json" | cut -d' ' -f1)
expect_json "d['verified']['with_source'] and d['verified']['source_manifest'] == {'name': 'src-man.json', 'sha256': '$SM_SHA'}"
expect_json "d['verified']['slabs'] == json.load(open('$WORK/audit.json'))['summary']['slabs'] == json.load(open('$WORK/audit-sm.json'))['summary']['slabs']"
run "${CARD[@]}" --audit "$WORK/audit-sm.json"
expect_out "The bytes were compared by sha256 with the source's manifest \`src-man.json\` (sha256 \`$SM_SHA\`"
expect_out "**PASS**: \`gguf-reap audit\`"

case_ "-o writes the card; an existing file needs --force; an input is never overwritten"
run "${CARD[@]}" --audit "$WORK/audit.json" -o "$WORK/README.md"
expect_code 0
expect_out "wrote $WORK/README.md ("
run "${CARD[@]}" --audit "$WORK/audit.json"
cmp -s "$OUT" "$WORK/README.md" && _pass || _fail "README.md differs from the card printed"
[ -z "$(ls -A "$WORK" | grep gguf-reap-tmp)" ] && _pass || _fail "a temporary was left behind"
run "${CARD[@]}" -o "$WORK/README.md"
expect_code 2
expect_err "gguf-reap: error: $WORK/README.md exists; use --force to overwrite it"
run "${CARD[@]}" -o "$WORK/README.md" --force --json
expect_code 0
expect_json "d['written'] == '$WORK/README.md' and d['verified']['audited'] is False"
run "${CARD[@]}" -o "$WORK/out/p-00002-of-00002.gguf" --force
expect_code 2
expect_err "gguf-reap: error: $WORK/out/p-00002-of-00002.gguf is an input ($WORK/out/p-00002-of-00002.gguf): refusing to write over it"

case_ "a width-spliced build: where the width restriction came from, under Not verified"
W=$WORK/width
mkdir -p "$W"
"$GEN" model --skeleton --blocks 3 --dense-blocks 1 --experts 8 --used 2 --shared 1 --embd 64 --ff 128 \
    --expert-ff 32 --vocab 256 --heads 4 --type-exps Q8_0 --type-down F16 -o "$W/w.gguf" >/dev/null
"$GEN" imatrix --model "$W/w.gguf" --domain chat --seed 3 -o "$W/chat.imatrix.gguf" >/dev/null
"$BIN" -q rank --model "$W/w.gguf" --imatrix chat="$W/chat.imatrix.gguf" --keep 6 -o "$W/rank" >/dev/null 2>&1
"$BIN" -q plan-width --model "$W/w.gguf" --imatrix chat="$W/chat.imatrix.gguf" --k 16 -o "$W/plan.npz" >/dev/null
"$BIN" -q splice "$W/w.gguf" --keeplist "$W/rank/keeplist.json" --neuron-plan "$W/plan.npz" -o "$W/o" >/dev/null
"$BIN" -q audit "$W/o.gguf" --source "$W/w.gguf" --neuron-plan "$W/plan.npz" --json >"$W/audit.json"
PLAN_SHA=$(sha256sum "$W/plan.npz" | cut -d' ' -f1)
run "$BIN" card "$W/o.gguf" --source "$W/w.gguf" --rank "$W/rank" --audit "$W/audit.json" --json
expect_code 0
expect_json "d['width'] == {'source_width': 32, 'width': 16, 'plan_sha256': '$PLAN_SHA', 'plan_file': 'plan.npz'}"
expect_json "d['source']['expert_width'] == 32 and d['build']['expert_width'] == 16"
expect_json "any(n.startswith('Expert FFN width: every routed expert was cut from 32 to 16 channels by a neuron plan (\`plan.npz\`, sha256 $PLAN_SHA') and n.endswith('the quality cost of the width restriction is not measured.') for n in d['not_verified'])"
run "$BIN" card "$P" --source "$M" --rank "$WORK/rank" --json
expect_json "d['width'] is None and not any(n.startswith('Expert FFN width') for n in d['not_verified'])"

case_ "rank --from-plan: the card says the kept experts are another tool's plan"
"$BIN" -q rank --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" --imatrix code="$WORK/code.imatrix.gguf" \
    --ratio 50% --export keepmap -o "$WORK/rank-exp" >/dev/null
"$BIN" -q rank --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" --imatrix code="$WORK/code.imatrix.gguf" \
    --from-plan "$WORK/rank-exp/reap_plan.json" -o "$WORK/rank-imp" >/dev/null 2>&1
mkdir -p "$WORK/out3"
"$BIN" -q splice "$M" --keeplist "$WORK/rank-imp/keeplist.json" -o "$WORK/out3/i" >/dev/null
PLAN_SHA=$(sha256sum "$WORK/rank-exp/reap_plan.json" | cut -d' ' -f1)
run "$BIN" card "$WORK/out3/i-00001-of-00002.gguf" --source "$M" --rank "$WORK/rank-imp" --json
expect_code 0
expect_json "d['method']['from_plan'] == {'file': 'reap_plan.json', 'format': 'keepmap', 'sha256': '$PLAN_SHA'}"
run "$BIN" card "$WORK/out3/i-00001-of-00002.gguf" --source "$M" --rank "$WORK/rank-imp"
expect_out "- **The kept experts come from another tool's plan**: \`reap_plan.json\` (keepmap format, sha256 \`$PLAN_SHA\`), imported with \`rank --from-plan\`."

# refuse CASE MESSAGE ARGS...: exit 2, nothing on stdout, exactly one line on stderr: the message.
refuse() {
    case_ "$1"
    local msg=$2
    shift 2
    run "$@"
    expect_code 2
    expect_no_out
    expect_err_lines 1
    expect_err "gguf-reap: error: $msg"
}

/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
a = json.load(open(f"{w}/audit.json"))
a["result"], a["summary"]["findings"] = "fail", 3
json.dump(a, open(f"{w}/audit-fail.json", "w"))
kl = json.load(open(f"{w}/rank/keeplist.json"))
kl["source"]["tensor_count"] += 1  # another layout (other shard sizes alone are another quant: accepted)
import os
os.makedirs(f"{w}/rank-other", exist_ok=True)
json.dump(kl, open(f"{w}/rank-other/keeplist.json", "w"))
PY
refuse "a failed audit" \
    "$WORK/audit-fail.json: result: 'fail' (3 finding(s)): the audit of $P did not pass, and a card states only what a passing audit verified" \
    "${CARD[@]}" --audit "$WORK/audit-fail.json"

# Another output set of the same keeplist: q-0000N instead of p-0000N, so its audit and manifest are
# of other files.
mkdir -p "$WORK/out2"
"$BIN" -q splice "$M" --keeplist "$WORK/rank/keeplist.json" -o "$WORK/out2/q" >/dev/null
"$BIN" -q audit "$WORK/out2/q-00001-of-00002.gguf" --source "$M" --manifest-out "$WORK/out2/man.json" --json \
    >"$WORK/audit-q.json"
refuse "an audit of another output" \
    "$WORK/audit-q.json: shards: the audit is of other files than $P: it lists shard 1 as q-00001-of-00002.gguf (2122976 bytes) where the set on disk has p-00001-of-00002.gguf (2122976 bytes)" \
    "${CARD[@]}" --audit "$WORK/audit-q.json"
# The output audited against a manifest of another model's files (the q set stands in for a source).
"$BIN" -q audit "$WORK/out2/q-00001-of-00002.gguf" --manifest-out "$WORK/q-man.json"
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
a = json.load(open(f"{w}/audit-sm.json"))
a["source_manifest"] = f"{w}/q-man.json"
json.dump(a, open(f"{w}/audit-sm-other.json", "w"))
PY
refuse "an audit against a manifest of another source" \
    "$WORK/audit-sm-other.json: source_manifest: the audit verified against $WORK/q-man.json, a manifest of other files than $M: it lists shard 1 as q-00001-of-00002.gguf (2122976 bytes) where the set on disk has m-00001-of-00002.gguf (4185088 bytes)" \
    "${CARD[@]}" --audit "$WORK/audit-sm-other.json"
case_ "an output without provenance keys: Not verified says what was not checked"
"$BIN" -q splice "$M" --keeplist "$WORK/rank/keeplist.json" -o "$WORK/out2/np" --no-provenance >/dev/null
run "$BIN" card "$WORK/out2/np-00001-of-00002.gguf" --source "$M" --rank "$WORK/rank" --json
expect_code 0
expect_json "d['method']['output_names_keeplist'] is False"
expect_json "'The output carries no gguf_reap.keeplist_sha256 (spliced with --no-provenance?): that it was made with this keeplist is checked only by its expert count.' in d['not_verified']"
refuse "a manifest of another set" \
    "$WORK/out2/man.json: shards: the manifest is of other files than $P: it lists shard 1 as q-00001-of-00002.gguf (2122976 bytes) where the set on disk has p-00001-of-00002.gguf (2122976 bytes)" \
    "${CARD[@]}" --manifest "$WORK/out2/man.json"
SIZE2=$(stat -c %s "$WORK/m-00002-of-00002.gguf")
TC=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["source"]["tensor_count"])' "$WORK/rank/keeplist.json")
refuse "a keeplist of another model" \
    "$WORK/rank-other/keeplist.json: source.tensor_count: ranked on a model with $((TC + 1)) tensors, but $M has $TC: a keeplist applies only to a model with the same architecture, expert layout and tensor names (another model, or an already pruned one?)" \
    "$BIN" card "$P" --source "$M" --rank "$WORK/rank-other"
"$BIN" -q rank --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" --imatrix code="$WORK/code.imatrix.gguf" \
    --ratio 25% -o "$WORK/rank25" >/dev/null
refuse "a keeplist the output was not spliced with" \
    "$WORK/rank25/keeplist.json: n_keep: 672 experts kept per block, but $P has 448: the output was not spliced with this keeplist" \
    "$BIN" card "$P" --source "$M" --rank "$WORK/rank25"
"$BIN" -q rank --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" --imatrix code="$WORK/code.imatrix.gguf" \
    --ratio 50% --criterion frequency -o "$WORK/rank-freq" >/dev/null
KL_SHA=$(sha256sum "$WORK/rank/keeplist.json" | cut -d' ' -f1)
FREQ_SHA=$(sha256sum "$WORK/rank-freq/keeplist.json" | cut -d' ' -f1)
refuse "another keeplist with the same count" \
    "$P: gguf_reap.keeplist_sha256: $KL_SHA, but $WORK/rank-freq/keeplist.json hashes to $FREQ_SHA: the output was spliced from another keeplist" \
    "$BIN" card "$P" --source "$M" --rank "$WORK/rank-freq"
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
a = json.load(open(f"{w}/audit.json"))
a["source"] = "/elsewhere/other-00001-of-00002.gguf"
json.dump(a, open(f"{w}/audit-src.json", "w"))
m = json.load(open(f"{w}/out/man.json"))
m["shards"][1]["sha256"] = "0" * 64
json.dump(m, open(f"{w}/man-bad.json", "w"))
PY
refuse "an audit against another source" \
    "$WORK/audit-src.json: source: the audit compared the output with other-00001-of-00002.gguf, which is not a shard of $M (m-00001-of-00002.gguf ($(stat -c %s "$M") bytes), m-00002-of-00002.gguf ($SIZE2 bytes))" \
    "${CARD[@]}" --audit "$WORK/audit-src.json"
AUD_SHA2=$(/usr/bin/python3 -c "import json; print(json.load(open('$WORK/audit.json'))['shards'][1]['sha256'])")
refuse "a manifest whose sha256 differs from the audit's" \
    "$WORK/man-bad.json: shards[1].sha256: $(printf '0%.0s' $(seq 64)) for p-00002-of-00002.gguf, but the audit $WORK/audit.json hashed it as $AUD_SHA2" \
    "${CARD[@]}" --audit "$WORK/audit.json" --manifest "$WORK/man-bad.json"
head -c 100 "$WORK/audit.json" >"$WORK/audit-cut.json"
refuse "a truncated audit report: the byte offset" \
    "$WORK/audit-cut.json: json at offset 100 (0x64): not valid JSON" \
    "${CARD[@]}" --audit "$WORK/audit-cut.json"
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
a = json.load(open(f"{w}/audit.json"))
a["summary"]["tensors"] = -1
json.dump(a, open(f"{w}/audit-field.json", "w"))
PY
refuse "an audit report with a bad field: its JSON path" \
    "$WORK/audit-field.json: summary.tensors: missing or not a non-negative integer" \
    "${CARD[@]}" --audit "$WORK/audit-field.json"
refuse "a missing rank directory" \
    "$WORK/no-such-dir: does not exist" \
    "$BIN" card "$P" --source "$M" --rank "$WORK/no-such-dir"
mkdir -p "$WORK/empty"
refuse "a rank directory without keeplist.json" \
    "$WORK/empty: keeplist.json: missing (give the directory \`gguf-reap rank -o\` wrote)" \
    "$BIN" card "$P" --source "$M" --rank "$WORK/empty"
refuse "a rank directory that is a file" \
    "$WORK/audit.json: not a directory (give the directory \`gguf-reap rank -o\` wrote)" \
    "$BIN" card "$P" --source "$M" --rank "$WORK/audit.json"
refuse "an --eval report that is not eval's" \
    "$WORK/audit.json: kind: not a \`gguf-reap eval -o\` report" \
    "${CARD[@]}" --eval "$WORK/audit.json"
# The hardware options are estimate's, with its messages; a bad one fails before a model is opened.
refuse "--gpu-mem 0" "--gpu-mem must be more than 0 bytes" "${CARD[@]}" --gpu-mem 0
refuse "--ctx -1" "--ctx '-1' is not a number of tokens (a whole number, e.g. 131072)" "${CARD[@]}" --ctx -1
refuse "--overhead lots" "--overhead 'lots' is not a size (write e.g. 141GiB, 80GB, 512MB; units: B, KB, MB, GB, TB (or K, M, G, T) and KiB, MiB, GiB, TiB)" "${CARD[@]}" --overhead lots
refuse "an empty --note" "--note: give one non-empty line of text" "${CARD[@]}" --note ""
finish
