# gguf-reap eval --prompts: loops and natural ends of greedy generations, through llama-server, on the trained
# Q8_0 fixture and its builds pruned to 12 and 8 of 16 experts.
#
# Without llama.cpp, tests/cli/fake-llama/llama-server stands in: it replays the replies recorded from the real
# llama-server of llama.cpp 34af94cd9 (tests/data/llama-server/README.md), so every token checked here is one
# the real server generated, and it refuses to start with any argument or value its recordings lack (so a
# change to the command eval builds fails here too). Natural ends, a chat template too long for its slot,
# failures (never healthy, dies, malformed replies, a port race) and an interrupt are checked this way, and
# after each no server may be left running.
# With GGUF_REAP_LLAMA_BIN set to llama.cpp's bin directory, the same evals run the real llama-server too,
# which must generate the recorded tokens.
# ctest-parts: llama
source "$(dirname "$0")/lib.sh"
TR=$FIX/trained
[ -f "$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf" ] || skip_all "no trained fixture in $TR"
FAKE=$(cd "$(dirname "$0")/fake-llama" && pwd)
DATA=$(cd "$(dirname "$0")/../data/llama-server" && pwd)
M=$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf
cp "$DATA/code.txt" "$DATA/prose.txt" "$WORK/"
IM=()
for d in c changelog legal markdown python; do IM+=(--imatrix "$d=$TR/imatrix/tiny-qwen3moe-trained-A.$d.imatrix.gguf"); done
for k in 12 8; do
    "$BIN" -q rank --model "$M" "${IM[@]}" --keep $k -o "$WORK/rank$k" >/dev/null
    "$BIN" -q splice "$M" --keeplist "$WORK/rank$k/keeplist.json" -o "$WORK/keep$k" >/dev/null
done
PANELS=(--prompts code="$WORK/code.txt" --prompts prose="$WORK/prose.txt")
export FAKE_LLAMA_CALLS=$WORK/calls FAKE_LLAMA_PIDS=$WORK/pids
REAL=${GGUF_REAP_LLAMA_BIN:-}
unset GGUF_REAP_LLAMA_BIN

# No server that a run started may be running afterwards (each fake writes its pid to $WORK/pids).
expect_no_server() {
    local left=""
    for p in $(cat "$WORK/pids" 2>/dev/null); do kill -0 "$p" 2>/dev/null && left="$left $p"; done
    [ -s "$WORK/pids" ] && [ -z "$left" ] && _pass || _fail "servers left running:${left:- (none started)}"
    : >"$WORK/pids"
}

# The definitions of docs/eval.md recomputed in Python from a generations file's token ids, compared with
# eval.json's behaviour[] (argument: the directory holding both).
RECOMPUTE='import hashlib, json, math, sys
from fractions import Fraction
d = json.load(open(sys.argv[1] + "/eval.json"))
gens = [json.loads(l) for l in open(sys.argv[1] + "/eval.generations.jsonl")]
def seed(S, T, i, j):  # docs/eval.md, "Sampling"
    v = int.from_bytes(hashlib.sha256(f"{S}/{json.dumps(T)}/{i}/{j}".encode()).digest()[:4], "big")
    return 0xFFFFFFFE if v == 0xFFFFFFFF else v
z = 1.959963984540054
def wilson(k, n):
    p = k / n; den = 1 + z * z / n; c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return [0.0 if k == 0 else c - h, 1.0 if k == n else c + h]
def loops(t, end):
    L = min(256, len(t) // 2)
    if end == "eog" or L < 4: return False
    T = t[-L:]
    return any(all(T[j] == T[j + p] for j in range(L - p)) for p in range(1, L // 4 + 1))
bad = 0
for b in d["behaviour"]:
    T, N = b["temperature"], b["samples"]
    g = [x for x in gens if x["model"] == b["model"] and x["panel"] == b["panel"] and x["temperature"] == T]
    assert [(x["index"], x["sample"]) for x in g] == [(i, j) for i in range(b["prompts"]) for j in range(N)], \
        "generations out of order"
    assert T > 0 or N == 1, "greedy with samples"
    want_seeds = [seed(d["generation"]["seed"], T, i, j) if T > 0 else None for i in range(b["prompts"]) for j in range(N)]
    if [x["seed"] for x in g] != want_seeds: print(b["model"], b["panel"], T, "seeds differ from the derivation"); bad += 1
    ids = json.dumps([x["tokens"] for x in g], separators=(",", ":"))
    if b["tokens_sha256"] != hashlib.sha256(ids.encode()).hexdigest(): print(b["model"], T, "tokens_sha256"); bad += 1
    n = len(g); k = sum(loops(x["tokens"], x["end"]) for x in g); e = sum(x["end"] == "eog" for x in g)
    r = sum(x["end"] == "error" for x in g)
    grams = [tuple(x["tokens"][i:i + 4]) for x in g for i in range(len(x["tokens"]) - 3)]
    want = {"loops": k, "loop_rate": k / n, "natural_ends": e, "natural_end_rate": e / n, "errors": r,
            "error_rate": r / n, "mean_tokens": sum(len(x["tokens"]) for x in g) / n,
            "distinct_4": len(set(grams)) / len(grams) if grams else None,
            "outcomes": ["error" if x["end"] == "error" else "eog" if x["end"] == "eog" else
                         "loop" if loops(x["tokens"], x["end"]) else "limit" for x in g],
            "generations": n,
            "prompt_errors": [dict({"index": x["index"], "error": x["error"]}, **({"sample": x["sample"]} if T > 0 else {}))
                              for x in g if x["end"] == "error"]}
    for key, v in want.items():
        if b[key] != v: print(b["model"], b["panel"], key, b[key], "!=", v); bad += 1
    for key, (kk, nn) in (("loop_rate_ci", (k, n)), ("natural_end_rate_ci", (e, n)), ("error_rate_ci", (r, n))):
        if any(abs(a - w) > 1e-12 for a, w in zip(b[key], wilson(kk, nn))): print(key, b[key]); bad += 1
    # The paired test against the source, prompt by prompt: McNemar exact, as exact fractions.
    src = [x for x in d["behaviour"] if x["model"] == "source" and x["panel"] == b["panel"] and x["temperature"] == T][0]
    if b["model"] != "source":
        for key, o in (("loops", "loop"), ("natural_ends", "eog"), ("errors", "error")):
            bo = sum(t == o and s != o for s, t in zip(src["outcomes"], b["outcomes"]))
            so = sum(s == o and t != o for s, t in zip(src["outcomes"], b["outcomes"]))
            m = bo + so
            p = 1 if m == 0 else min(1, 2 * sum(Fraction(math.comb(m, i), 2 ** m) for i in range(min(bo, so) + 1)))
            v = b["versus_source"][key]
            if (v["n"], v["build_only"], v["source_only"], v["differs"]) != (n, bo, so, p < Fraction(1, 20)) or \
                    abs(v["p"] - float(p)) > 1e-12:
                print(b["model"], b["panel"], "versus_source", key, v, "!=", bo, so, float(p)); bad += 1
    elif "versus_source" in b: print("the source has versus_source"); bad += 1
sys.exit(1 if bad else 0)'

# The recorded replies' token ids and stop types, read from the recordings independently of gguf-reap:
# recorded_tokens BUILD PANEL [EXTRA]: [end, tokens] per prompt of PANEL, from the greedy recording whose
# server arguments were the usual ones (-np 4 ... localhost) followed by the words of EXTRA.
recorded_tokens() {
    /usr/bin/env python3 -c 'import json, sys
recs = {}
for l in open(sys.argv[1] + "/" + sys.argv[2] + ".jsonl"):
    r = json.loads(l)
    if r["endpoint"] == "/completion" and r["args"][7:] == sys.argv[4].split() and r["request"]["temperature"] == 0:
        rep = json.loads(r["reply"]); recs[r["request"]["prompt"]] = (rep["stop_type"], rep["tokens"])
prompts = [p for p in open(sys.argv[3]).read().split("\n") if p.strip()]
print(json.dumps([[("eog" if recs[p][0] == "eos" else "limit"), recs[p][1]] for p in prompts]))' "$DATA" "$1" "$2" "${3:-}"
}

case_ "eval --prompts: two panels on the source and two builds, one server per model"
: >"$WORK/calls"
mkdir -p "$WORK/out"
run "$BIN" eval --source "$M" "$WORK/keep12.gguf" "$WORK/keep8.gguf" "${PANELS[@]}" --gen-tokens 64 \
    --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/out/eval.json"
expect_code 0
expect_no_server
[ "$(cat "$WORK/calls")" = "$(printf 'server source\nserver keep12\nserver keep8')" ] && _pass || _fail "server starts: $(cat "$WORK/calls")"
[ ! -s "$ERR" ] && _pass || _fail "stderr is not a tty, yet it printed: $(cat "$ERR")"
expect_out "behaviour  code: 8 prompts, up to 64 greedy tokens each (llama-server, 4 slots)"
expect_out "wrote $WORK/out/eval.json, $WORK/out/eval.svg and $WORK/out/eval.generations.jsonl"
/usr/bin/env python3 -c "$RECOMPUTE" "$WORK/out" >"$WORK/recompute.txt" 2>&1 && _pass || _fail "behaviour[] differs from the definitions recomputed from the generations: $(cat "$WORK/recompute.txt")"
cp "$WORK/out/eval.json" "$OUT"
expect_json '[(b["model"].split("/")[-1], b["panel"]) for b in d["behaviour"]] == [("source","code"),("source","prose"),("keep12.gguf","code"),("keep12.gguf","prose"),("keep8.gguf","code"),("keep8.gguf","prose")]'
expect_json '[p["name"] for p in d["panels"]] == ["code", "prose"] and [p["prompts"] for p in d["panels"]] == [8, 6]'
expect_json 'd["panels"][0]["sha256"] == "'"$(sha256sum "$WORK/code.txt" | cut -d' ' -f1)"'" and d["panels"][0]["path"] == "code.txt"'
expect_json 'all(b["gen_tokens"] == 64 and b["server_command"][0] == "llama-server" for b in d["behaviour"])'
expect_json 'all(b["server_command"][b["server_command"].index("--host") + 1] == "127.0.0.1" and b["server_command"][b["server_command"].index("-np") + 1] == "4" for b in d["behaviour"])'
expect_json 'd["files"]["generations"] == "eval.generations.jsonl" and d["generation"]["request"]["n_predict"] == 64 and d["generation"]["request"]["top_k"] == 1'
# The figures on the recorded tokens (checked against the recomputation above): pruning to 8 experts loops on
# every prose prompt where the source loops on 2 of 6.
expect_json '[(b["loops"], b["natural_ends"]) for b in d["behaviour"]] == [(7, 0), (2, 0), (7, 0), (1, 0), (8, 0), (6, 0)]'
# The tokens are the recorded replies', in panel order.
for b in source keep12 keep8; do
    model=source
    [ $b = source ] || model=$b.gguf  # eval.json and the generations name paths relative to themselves
    for p in code prose; do
        want=$(recorded_tokens $b "$WORK/$p.txt")
        got=$(/usr/bin/env python3 -c 'import json, sys
print(json.dumps([[g["end"], g["tokens"]] for g in map(json.loads, open(sys.argv[1])) if g["model"] == sys.argv[2] and g["panel"] == sys.argv[3]]))' "$WORK/out/eval.generations.jsonl" "$model" $p)
        [ "$got" = "$want" ] && _pass || _fail "$b on $p: the generations differ from the recorded replies"
    done
done
grep -q 'Loop, natural-end and error rates per panel' "$WORK/out/eval.svg" && _pass || _fail "eval.svg has no behaviour panel"

"$BIN" -q audit "$WORK/keep8.gguf" --source "$M" --json >"$WORK/audit8.json"
case_ "natural ends: llama-server stopping at its end-of-generation token, which --override-kv makes '.'"
# The trained model never learnt to end (its training text had no end-of-text token), so every reply above
# ends by limit. These recordings make '.' (token 13) its end-of-generation token, as a user could with
# --llama-args: a reply then ends naturally at the first full stop (tests/data/llama-server/README.md).
EOS="--override-kv tokenizer.ggml.eos_token_id=int:13"
mkdir -p "$WORK/eos"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${PANELS[@]}" --gen-tokens 64 --llama-bin "$FAKE" \
    --cache-dir "$WORK/cache" --llama-args "$EOS" -o "$WORK/eos/eval.json"
expect_code 0
expect_no_server
/usr/bin/env python3 -c "$RECOMPUTE" "$WORK/eos" >"$WORK/recompute.txt" 2>&1 && _pass || _fail "behaviour[] differs from the definitions recomputed from the generations: $(cat "$WORK/recompute.txt")"
cp "$WORK/eos/eval.json" "$OUT"
expect_json '[(b["panel"], b["natural_ends"], b["natural_end_rate"]) for b in d["behaviour"]] == [("code", 2, 0.25), ("prose", 3, 0.5), ("code", 1, 0.125), ("prose", 2, 2 / 6)]'
expect_json '[b["loops"] for b in d["behaviour"]] == [6, 1, 7, 4] and all(b["server_command"][-2:] == "'"$EOS"'".split() for b in d["behaviour"])'
for b in source keep8; do
    model=source
    [ $b = source ] || model=$b.gguf
    for p in code prose; do
        want=$(recorded_tokens $b "$WORK/$p.txt" "$EOS")
        got=$(/usr/bin/env python3 -c 'import json, sys
print(json.dumps([[g["end"], g["tokens"]] for g in map(json.loads, open(sys.argv[1])) if g["model"] == sys.argv[2] and g["panel"] == sys.argv[3]]))' "$WORK/eos/eval.generations.jsonl" "$model" $p)
        [ "$got" = "$want" ] && _pass || _fail "$b on $p: the generations differ from the recorded replies"
    done
done
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/eos/eval.json"
expect_code 0
expect_out '| ends naturally | 1 of 8 (12.5 %, 95 % interval 2.2–47.1 %) | 2 of 8 (25.0 %, 95 % interval 7.1–59.1 %) | no difference measured at n = 8 ('

case_ "card --eval: each build's loops and natural ends against the source's, with n"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/out/eval.json"
expect_code 0
expect_out "## Measured against the source"
expect_out 'Generation on the prompt panel `code` (greedy, up to 64 tokens per prompt, llama-server; `gguf-reap eval --prompts`), the same 8 prompts on this build and on the source; 95 % Wilson intervals, and McNemar'"'"'s exact test on the prompts where the two differ:'
expect_out '| falls into a repetition loop | 8 of 8 (100.0 %, 95 % interval 67.6–100.0 %) | 7 of 8 (87.5 %, 95 % interval 52.9–97.8 %) | no difference measured at n = 8 (1 prompt only this build, 0 only the source; McNemar p = 1.000) |'
expect_out '| ends naturally | 0 of 8 (0.0 %, 95 % interval 0.0–32.4 %) | 0 of 8 (0.0 %, 95 % interval 0.0–32.4 %) | no difference measured at n = 8 (0 prompts only this build, 0 only the source; McNemar p = 1.000) |'
expect_out 'Generation on the prompt panel `prose`'
expect_out "No task benchmark and no KLD: only generation behaviour was measured"
! grep -q "| text | tokens |" "$OUT" && _pass || _fail "a KLD table without texts"
"$BIN" -q audit "$WORK/keep12.gguf" --source "$M" --json >"$WORK/audit12.json"
run "$BIN" card "$WORK/keep12.gguf" --source "$M" --rank "$WORK/rank12" --audit "$WORK/audit12.json" --eval "$WORK/out/eval.json" --json
expect_code 0
expect_json '[(b["panel"], b["loops"]["k"], b["source_loops"]["k"], b["loops"]["n"]) for b in d["measured"]["behaviour"]] == [("code", 7, 7, 8), ("prose", 1, 2, 6)]'

case_ "--llama-args reach llama-server after gguf-reap's own; what gguf-reap sets is refused"
FAKE_LLAMA_ALLOW="-ngl 0" run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" --gen-tokens 64 \
    --llama-bin "$FAKE" --cache-dir "$WORK/cache" --llama-args "-ngl 0" --json
expect_code 0
expect_no_server
expect_json 'all(b["server_command"][-2:] == ["-ngl", "0"] for b in d["behaviour"])'
for a in "-np 2" "--port 8080" "-n 5"; do
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" --llama-bin "$FAKE" --llama-args "$a"
    expect_code 2
    expect_err_lines 1
done
expect_err "--llama-args -n: each request sets its length; give --gen-tokens N"
# An argument the recordings lack reaches the fake, which refuses it (exit 1, saying which), and eval's
# error shows that line from the server's log.
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" --gen-tokens 64 --llama-bin "$FAKE" \
    --cache-dir "$WORK/cache" --llama-args "--metrics" --json
expect_code 3
expect_no_server
expect_err "llama-server on tiny-qwen3moe-trained-A-Q8_0.gguf exited before it was ready"
expect_err "fake llama-server: --metrics: not an argument of the recorded runs"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" --gen-tokens 64 --llama-bin "$FAKE" \
    --cache-dir "$WORK/cache" --llama-args "--override-kv tokenizer.ggml.eos_token_id=int:12" --json
expect_code 3
expect_no_server
expect_err "fake llama-server: --override-kv tokenizer.ggml.eos_token_id=int:12: the recorded runs used --override-kv tokenizer.ggml.eos_token_id=int:13"

case_ "a .jsonl panel with the same prompts gives the same generations"
/usr/bin/env python3 -c 'import json, sys
for p in open(sys.argv[1]).read().split("\n"):
    if p.strip(): print(json.dumps({"prompt": p, "id": 1}))' "$WORK/code.txt" >"$WORK/code.jsonl"
mkdir -p "$WORK/jsonl"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts code="$WORK/code.jsonl" --gen-tokens 64 --llama-bin "$FAKE" \
    --cache-dir "$WORK/cache" -o "$WORK/jsonl/eval.json"
expect_code 0
expect_no_server
cmp -s <(grep '"panel":"code"' "$WORK/out/eval.generations.jsonl" | grep -v keep12) "$WORK/jsonl/eval.generations.jsonl" && _pass || _fail "the .jsonl panel's generations differ"

case_ "--chat: each prompt through the server's /apply-template, then /completion"
: >"$WORK/calls"
mkdir -p "$WORK/chat"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" --gen-tokens 64 --chat \
    --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/chat/eval.json"
expect_code 0
expect_no_server
expect_out "(llama-server, 4 slots, chat template)"
/usr/bin/env python3 -c "$RECOMPUTE" "$WORK/chat" >"$WORK/recompute.txt" 2>&1 && _pass || _fail "behaviour[] differs from the definitions: $(cat "$WORK/recompute.txt")"
cp "$WORK/chat/eval.json" "$OUT"
expect_json 'd["generation"]["chat"] is True and d["generation"]["endpoint"] == "/apply-template, then /completion"'
# The tokens are the recorded replies to the rendered prompts (read from the recording independently).
want=$(/usr/bin/env python3 -c 'import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if len(json.loads(l)["args"]) == 7]
tpl = {r["request"]["messages"][0]["content"]: json.loads(r["reply"])["prompt"] for r in recs if r["endpoint"] == "/apply-template"}
out = {r["request"]["prompt"]: json.loads(r["reply"])["tokens"] for r in recs if r["endpoint"] == "/completion"}
print(json.dumps([out[tpl[p]] for p in open(sys.argv[2]).read().split("\n") if p.strip()]))' "$DATA/keep8.jsonl" "$WORK/prose.txt")
got=$(/usr/bin/env python3 -c 'import json, sys
print(json.dumps([g["tokens"] for g in map(json.loads, open(sys.argv[1])) if g["model"] != "source"]))' "$WORK/chat/eval.generations.jsonl")
[ "$got" = "$want" ] && _pass || _fail "--chat generations differ from the recorded replies"

case_ "--chat: a template that makes a prompt longer than its slot has room for: exit 3, no /completion sent"
# long-system.jinja adds a system message of about 1,300 bytes, more than the 1,024 eval allows a template.
cp "$DATA/long-system.jinja" "$WORK/"
mkdir -p "$WORK/fail"
rm -f "$WORK/cache/llama-server.0.log"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" --gen-tokens 64 --chat \
    --llama-bin "$FAKE" --cache-dir "$WORK/cache" --llama-args "--chat-template-file $WORK/long-system.jinja" \
    -o "$WORK/fail/eval.json"
expect_code 3
expect_no_server
# The slot: the longest prompt (74 bytes) + 1,024 + 64 + 8, rounded up to 256: 1,280, of which 1,208 are
# for the prompt. Which prompt is named depends on which reply came first; its size must be the one the
# recording rendered for it.
/usr/bin/env python3 -c 'import json, re, sys
m = re.search(r"the chat template makes prompt (\d+) of prose (\d+) bytes, more than the 1208 its slot has room for with 64 generated tokens; stopped", open(sys.argv[1]).read())
recs = [json.loads(l) for l in open(sys.argv[2])]
tpl = {r["request"]["messages"][0]["content"]: json.loads(r["reply"])["prompt"] for r in recs
       if r["endpoint"] == "/apply-template" and "--chat-template-file" in r["args"]}
prompts = [p for p in open(sys.argv[3]).read().split("\n") if p.strip()]
sys.exit(0 if m and len(tpl[prompts[int(m[1]) - 1]].encode()) == int(m[2]) else 1)' "$ERR" "$DATA/source.jsonl" "$WORK/prose.txt" &&
    _pass || _fail "no refusal naming a prompt and its rendered size"
! grep -q "POST /completion" "$WORK/cache/llama-server.0.log" && _pass || _fail "a /completion was sent"
[ -z "$(ls -A "$WORK/fail")" ] && _pass || _fail "files left: $(ls -A "$WORK/fail")"

case_ "--prompts with --text: both measured, one document"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$TR/corpora/python.heldout.txt" --ctx 128 --chunks 8 \
    --prompts prose="$WORK/prose.txt" --gen-tokens 64 --llama-bin "$FAKE" --cache-dir "$WORK/cache" --json
expect_code 0
expect_no_server
expect_json 'len(d["runs"]) == 1 and d["runs"][0]["kld"]["mean"] == 0.865733 and [b["loops"] for b in d["behaviour"]] == [2, 6]'
expect_json 'd["files"]["generations"] is None'

case_ "--temp 0 --temp 0.7 --samples 4: greedy as before, and each sample at its derived seed"
# The recordings at 0.7 were made with record.py's own derivation of the seeds (tests/data/llama-server/README.md):
# the fake answers only requests whose seed is the recorded one, so exit 0 says eval derived the same seeds.
SAMP=(--temp 0.7 --temp 0 --samples 4 --seed 0)
mkdir -p "$WORK/samp"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" --gen-tokens 64 "${SAMP[@]}" \
    --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/samp/eval.json"
expect_code 0
expect_no_server
expect_out "behaviour  prose: 6 prompts, up to 64 greedy tokens each (llama-server, 4 slots)"
expect_out "behaviour  prose at temperature 0.7: 6 prompts × 4 samples (seeds from --seed 0), up to 64 tokens each (llama-server, 4 slots)"
/usr/bin/env python3 -c "$RECOMPUTE" "$WORK/samp" >"$WORK/recompute.txt" 2>&1 && _pass || _fail "behaviour[] differs from the definitions: $(cat "$WORK/recompute.txt")"
cp "$WORK/samp/eval.json" "$OUT"
expect_json '[(b["model"], b["temperature"], b["samples"], b["seed"], b["prompts"], b["generations"]) for b in d["behaviour"]] == [("source", 0, 1, None, 6, 6), ("source", 0.7, 4, 0, 6, 24), ("keep8.gguf", 0, 1, None, 6, 6), ("keep8.gguf", 0.7, 4, 0, 6, 24)]'
expect_json 'd["generation"]["temperatures"] == [0, 0.7] and d["generation"]["samples"] == 4 and d["generation"]["seed"] == 0 and d["generation"]["request"]["top_k"] == 1 and d["generation"]["sampled_request"] == {"n_predict": 64, "temperature": None, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "seed": None, "return_tokens": True, "cache_prompt": False, "stream": False}'
# Greedy is what a greedy-only eval gives: the same rates as the -o out run above, the same tokens.
/usr/bin/env python3 -c 'import json, sys
a = [b for b in json.load(open(sys.argv[1]))["behaviour"] if b["panel"] == "prose" and b["model"] != "keep12.gguf"]
b = [b for b in json.load(open(sys.argv[2]))["behaviour"] if b["temperature"] == 0]
keys = ("loops", "loop_rate", "loop_rate_ci", "natural_ends", "errors", "outcomes", "tokens_sha256", "mean_tokens", "distinct_4")
sys.exit(0 if [[x[k] for k in keys] for x in a] == [[x[k] for k in keys] for x in b] else 1)' "$WORK/out/eval.json" "$WORK/samp/eval.json" &&
    _pass || _fail "greedy entries differ from a greedy-only eval's"
# Each sampled generation is the recorded reply to the request with its prompt and seed, read from the recording.
for b in source keep8; do
    model=source
    [ $b = source ] || model=$b.gguf
    /usr/bin/env python3 -c 'import json, sys
recs = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["endpoint"] == "/completion" and r["request"]["temperature"] == 0.7:
        rep = json.loads(r["reply"]); recs[(r["request"]["prompt"], r["request"]["seed"])] = rep["tokens"]
prompts = [p for p in open(sys.argv[2]).read().split("\n") if p.strip()]
g = [x for x in map(json.loads, open(sys.argv[3])) if x["model"] == sys.argv[4] and x["temperature"] == 0.7]
sys.exit(0 if len(g) == 24 and all(x["tokens"] == recs[(prompts[x["index"]], x["seed"])] for x in g) else 1)' \
        "$DATA/$b.jsonl" "$WORK/prose.txt" "$WORK/samp/eval.generations.jsonl" $model &&
        _pass || _fail "$b at 0.7: the generations differ from the recorded replies"
done
grep -q '>prose, T = 0.7 (n = 24)</text>' "$WORK/samp/eval.svg" && grep -q '>prose, T = 0 (n = 6)</text>' "$WORK/samp/eval.svg" &&
    [ "$(grep -c 'class="rate"' "$WORK/samp/eval.svg")" -eq 12 ] && _pass || _fail "eval.svg has no group per temperature"
"$BIN" -q audit "$WORK/keep8.gguf" --source "$M" --json >"$WORK/audit8.json"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/samp/eval.json"
expect_code 0
expect_out 'Generation on the prompt panel `prose` (greedy, up to 64 tokens per prompt, llama-server;'
expect_out 'Generation on the prompt panel `prose` at temperature 0.7 (4 samples per prompt, each with its own seed derived from the eval seed 0, up to 64 tokens, llama-server; `gguf-reap eval --prompts`), the same 6 prompts on this build and on the source, 24 generations each,'
expect_out '| per generation, the model | this build | the source | this build against the source |'
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/samp/eval.json" --json
expect_code 0
expect_json '[(b["temperature"], b["samples"], b["loops"]["n"], b["loops_versus_source"]["n"]) for b in d["measured"]["behaviour"]] == [(0, 1, 6, 6), (0.7, 4, 24, 24)]'

case_ "--temp with another --seed: the requests change, and the fake, which has no recording of them, refuses them"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" --gen-tokens 64 --temp 0.7 \
    --samples 4 --seed 1 --llama-bin "$FAKE" --cache-dir "$WORK/cache" --json
expect_code 3
expect_no_server
expect_err "of prose: HTTP 400: {\"error\": \"fake llama-server: no recording of /completion with this request for source\"}; stopped; its log"

case_ "the fake llama-server checks each /completion request's fields and refuses what eval never sends"
port=$(/usr/bin/env python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$FAKE/llama-server" -m "$M" --host 127.0.0.1 --port "$port" -np 4 -c 1024 --no-webui --cors-origins localhost \
    >"$WORK/fake.log" 2>&1 &
fake=$!
wait_for "the fake server answering /health" /usr/bin/env python3 -c 'import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2)' "$port"
/usr/bin/env python3 - "$port" "$WORK/prose.txt" >"$WORK/fake-check.txt" 2>&1 <<'PY' && _pass || _fail "$(cat "$WORK/fake-check.txt")"
import json, sys, urllib.error, urllib.request
port, prompt = sys.argv[1], open(sys.argv[2]).read().split("\n")[0]
greedy = {"prompt": prompt, "n_predict": 64, "temperature": 0, "top_k": 1, "seed": 1, "return_tokens": True,
          "cache_prompt": False, "stream": False}
sampled = dict(greedy, temperature=0.7, top_k=40, top_p=0.95, min_p=0.05, seed=12345)
def post(body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
cases = [(greedy, 200, None),
         (dict(greedy, temperature=-0.5), 400, "temperature -0.5: not a finite number of 0 or more"),
         (dict(greedy, temperature="0.7"), 400, 'temperature \\"0.7\\": not a finite number'),
         ({k: v for k, v in sampled.items() if k != "seed"}, 400, "[] unexpected and ['seed'] missing in a sampled request"),
         (dict(greedy, top_p=0.95), 400, "['top_p'] unexpected and [] missing in a greedy request"),
         (dict(sampled, seed=4294967295), 400, "seed 4294967295: not a fixed seed"),
         (dict(sampled, seed=-1), 400, "seed -1: not a fixed seed"),
         (dict(greedy, seed=7), 400, "a greedy request with top_k 1 and seed 7, not 1 and 1"),
         (dict(sampled, top_k=1), 400, "a sampled request with top_k 1, top_p 0.95, min_p 0.05, not 40, 0.95, 0.05"),
         (dict(sampled, return_tokens=False), 400, "return_tokens, cache_prompt and stream not true, false and false"),
         (sampled, 400, "no recording of /completion with this request")]
bad = 0
for body, status, text in cases:
    st, reply = post(body)
    if st != status or (text and text not in reply):
        print(st, reply, "for", {k: v for k, v in body.items() if k != "prompt"}); bad += 1
sys.exit(1 if bad else 0)
PY
kill "$fake"
wait "$fake" 2>/dev/null || true

case_ "llama-server errors on some prompts (HTTP 500, no reply in time, an empty answer): recorded, exit 0"
# keep8's prompt 2 gets llama-server's 500 for output that is not valid UTF-8, prompt 5 an empty answer, and
# prompt 7 no reply at all; --server-timeout 8 gives it 8 s.
mkdir -p "$WORK/err"
: >"$WORK/calls"
run env FAKE_LLAMA_FAULT="500:keep8:f2py2e empty:keep8:Permission hang:keep8:WARRANTY" "$BIN" eval --source "$M" \
    "$WORK/keep12.gguf" "$WORK/keep8.gguf" --prompts code="$WORK/code.txt" --gen-tokens 64 --llama-bin "$FAKE" \
    --cache-dir "$WORK/cache" --server-timeout 8 -o "$WORK/err/eval.json"
expect_code 0
expect_no_server
expect_err_lines 1
expect_err 'warning: keep8.gguf on code: 3 of 8 prompts got no generation (prompt 2: HTTP 500: {"error":{"code":500,"message":"[json.exception.type_error.316] invalid UTF-8 byte at index 61: 0xE2","type":"server_error"}}); each is recorded as an error'
/usr/bin/env python3 -c "$RECOMPUTE" "$WORK/err" >"$WORK/recompute.txt" 2>&1 && _pass || _fail "behaviour[] differs from the definitions: $(cat "$WORK/recompute.txt")"
cp "$WORK/err/eval.json" "$OUT"
expect_json '[(b["loops"], b["errors"]) for b in d["behaviour"]] == [(7, 0), (7, 0), (5, 3)]'
expect_json 'd["behaviour"][2]["outcomes"] == ["loop", "error", "loop", "loop", "error", "loop", "error", "loop"]'
expect_json '[e["index"] for e in d["behaviour"][2]["prompt_errors"]] == [1, 4, 6] and d["behaviour"][2]["prompt_errors"][1]["error"] == "an empty answer: no token generated" and d["behaviour"][2]["prompt_errors"][2]["error"] == "no reply within 8 s (--server-timeout)"'
expect_json 'd["behaviour"][2]["error_rate"] == 3 / 8 and [d["behaviour"][2]["versus_source"]["errors"][k] for k in ("n", "build_only", "source_only", "differs")] == [8, 3, 0, False] and abs(d["behaviour"][2]["versus_source"]["errors"]["p"] - 0.25) < 1e-12'
grep -q '"index":1,"tokens":\[\],"end":"error","text":"","error":"HTTP 500: ' "$WORK/err/eval.generations.jsonl" && _pass || _fail "no error line in the generations"
"$BIN" -q audit "$WORK/keep8.gguf" --source "$M" --json >"$WORK/audit8.json"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/err/eval.json"
expect_code 0
expect_out '| gets no generation (an error) | 3 of 8 (37.5 %, 95 % interval 13.7–69.4 %) | 0 of 8 (0.0 %, 95 % interval 0.0–32.4 %) | no difference measured at n = 8 (3 prompts only this build, 0 only the source; McNemar p = 0.250) |'
expect_out 'llama-server gave this build no generation for 3 of the 8 prompts (`prompt_errors` in the eval'"'"'s JSON); the first, prompt 2: `HTTP 500: {"error":{"code":500,"message":"[json.exception.type_error.316] invalid UTF-8 byte at index 61: 0xE2","type":"server_error"}}`.'

case_ "a build whose every prompt errors is a result: exit 0, every build kept, the difference called"
mkdir -p "$WORK/cat"
run env FAKE_LLAMA_FAULT="500:keep8" "$BIN" eval --source "$M" "$WORK/keep12.gguf" "$WORK/keep8.gguf" \
    --prompts code="$WORK/code.txt" --gen-tokens 64 --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/cat/eval.json"
expect_code 0
expect_no_server
/usr/bin/env python3 -c "$RECOMPUTE" "$WORK/cat" >"$WORK/recompute.txt" 2>&1 && _pass || _fail "behaviour[] differs from the definitions: $(cat "$WORK/recompute.txt")"
cp "$WORK/cat/eval.json" "$OUT"
# The intervals: 0 of 8 is 0–32.4 %, 8 of 8 is 67.6–100 % (tests/behaviour_stats_test.cpp's reference).
expect_json '[(b["loops"], b["errors"]) for b in d["behaviour"]] == [(7, 0), (7, 0), (0, 8)] and d["behaviour"][1]["error_rate_ci"][0] == 0 and abs(d["behaviour"][1]["error_rate_ci"][1] - 0.324407564883880213) < 1e-12 and abs(d["behaviour"][2]["error_rate_ci"][0] - 0.675592435116119787) < 1e-12 and d["behaviour"][2]["error_rate_ci"][1] == 1'
expect_json 'd["behaviour"][2]["mean_tokens"] == 0 and d["behaviour"][2]["distinct_4"] is None'
grep -q 'class="legend"' "$WORK/cat/eval.svg" && grep -q '>errors</text>' "$WORK/cat/eval.svg" && _pass || _fail "eval.svg has no error rates"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/cat/eval.json"
expect_code 0
expect_out '| gets no generation (an error) | 8 of 8 (100.0 %, 95 % interval 67.6–100.0 %) | 0 of 8 (0.0 %, 95 % interval 0.0–32.4 %) | more often than the source: 8 prompts only this build, 0 only the source (McNemar p = 0.008) |'
expect_out '| falls into a repetition loop | 0 of 8 (0.0 %, 95 % interval 0.0–32.4 %) | 7 of 8 (87.5 %, 95 % interval 52.9–97.8 %) | less often than the source: 0 prompts only this build, 7 only the source (McNemar p = 0.016) |'
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/cat/eval.json" --json
expect_code 0
expect_json '[d["measured"]["behaviour"][0]["errors_versus_source"][k] for k in ("n", "build_only", "source_only", "differs")] == [8, 8, 0, True] and abs(d["measured"]["behaviour"][0]["errors_versus_source"]["p"] - 0.0078125) < 1e-12'

case_ "eval.svg: a long build name is shortened in the legend, not cut; a rate of 0 is a mark"
cp "$WORK/keep8.gguf" "$WORK/tiny-qwen3moe-trained-A-Q8_0-reap-keep8-of-16-experts.gguf"
cp "$WORK/keep12.gguf" "$WORK/tiny-qwen3moe-trained-A-Q8_0-reap-keep12-of-16-experts.gguf"
mkdir -p "$WORK/long"
run "$BIN" eval --source "$M" "$WORK/tiny-qwen3moe-trained-A-Q8_0-reap-keep12-of-16-experts.gguf" \
    "$WORK/tiny-qwen3moe-trained-A-Q8_0-reap-keep8-of-16-experts.gguf" --prompts code="$WORK/code.txt" --gen-tokens 64 \
    --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/long/eval.json"
expect_code 0
expect_no_server
# The names share "tiny-qwen3moe-trained-A-Q8_0-reap-": the legend keeps what tells them apart.
/usr/bin/env python3 - "$WORK/long/eval.svg" >"$WORK/legend.txt" <<'PY' && _pass || _fail "legend: $(cat "$WORK/legend.txt")"
import re, sys
svg = open(sys.argv[1]).read()
names = re.findall(r'<text class="legend"[^>]*>([^<]*)<title>([^<]*)</title>', svg)
print(names)
assert [n for n, _ in names] == ["source", "…keep12-of-16-experts", "…keep8-of-16-experts"], names
assert [t for _, t in names][1:] == ["tiny-qwen3moe-trained-A-Q8_0-reap-keep12-of-16-experts.gguf",
                                     "tiny-qwen3moe-trained-A-Q8_0-reap-keep8-of-16-experts.gguf"]
# Every rate has its mark, 0 included: 3 models × 3 rates, each a mark and an interval bar.
assert svg.count('class="rate"') == 9 and svg.count('class="ci"') == 9
PY
rm -f "$WORK"/tiny-qwen3moe-trained-A-Q8_0-reap-*.gguf

case_ "a port taken between choosing it and binding it: retried on another port"
: >"$WORK/calls"
rm -f "$WORK/state"
run env FAKE_LLAMA_MODE=server-port-race FAKE_LLAMA_STATE="$WORK/state" "$BIN" eval --source "$M" "$WORK/keep8.gguf" \
    --prompts prose="$WORK/prose.txt" --gen-tokens 64 --llama-bin "$FAKE" --cache-dir "$WORK/cache" --json
expect_code 0
expect_no_server
expect_err "was taken before it could bind it; trying another"
[ "$(grep -c . "$WORK/calls")" -eq 3 ] && _pass || _fail "server starts: $(cat "$WORK/calls")"
expect_json '[b["loops"] for b in d["behaviour"]] == [2, 6]'

case_ "a server that never becomes healthy: exit 3 with its log's last lines, none left"
# 10 s: long enough for the fake (a Python program) to be up and answering 503 on a loaded machine.
mkdir -p "$WORK/fail"
run env FAKE_LLAMA_MODE=server-never-healthy "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" \
    --gen-tokens 64 --llama-bin "$FAKE" --cache-dir "$WORK/cache" --server-timeout 10 -o "$WORK/fail/eval.json"
expect_code 3
expect_no_server
expect_err "was not ready (GET /health: HTTP 503) after 10 s; stopped; its log $WORK/cache/llama-server.0.log ends:"
expect_err 'fake llama-server: "GET /health HTTP/1.1" 503'

[ -z "$(ls -A "$WORK/fail")" ] && _pass || _fail "files left: $(ls -A "$WORK/fail")"

case_ "a server that dies mid-run: exit 3, no eval.json"
run env FAKE_LLAMA_MODE=server-die:3 "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts code="$WORK/code.txt" \
    --gen-tokens 64 --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/fail/eval.json"
expect_code 3
expect_no_server
expect_err "llama-server on tiny-qwen3moe-trained-A-Q8_0.gguf exited while generating (exit code 1)"
expect_err "fake llama-server: dying as asked"
[ -z "$(ls -A "$WORK/fail")" ] && _pass || _fail "files left: $(ls -A "$WORK/fail")"

case_ "malformed JSON from /completion: exit 3 naming the reply, none left"
run env FAKE_LLAMA_MODE=server-malformed "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts code="$WORK/code.txt" \
    --gen-tokens 64 --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/fail/eval.json"
expect_code 3
expect_no_server
expect_err "of code: not JSON; the reply: {"
[ -z "$(ls -A "$WORK/fail")" ] && _pass || _fail "files left: $(ls -A "$WORK/fail")"

case_ "a request the server refuses: exit 3 with its answer"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts code="$WORK/code.txt" --gen-tokens 65 \
    --llama-bin "$FAKE" --cache-dir "$WORK/cache" --json
expect_code 3
expect_no_server
expect_err "of code: HTTP 400: {\"error\": \"fake llama-server: no recording of /completion with this request for source\"}; stopped; its log"

case_ "interrupted mid-run: 130, the server stopped, no eval.json"
: >"$WORK/calls"
FAKE_LLAMA_MODE=server-hang "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts code="$WORK/code.txt" --gen-tokens 64 \
    --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/fail/eval.json" >"$OUT" 2>"$ERR" &
pid=$!
# The server has read a /completion request, which it never answers: eval cannot finish before the interrupt.
wait_for "a /completion request reaching the server" grep -q '^completion source$' "$WORK/calls"
kill -INT $pid
CODE=0
wait $pid || CODE=$?
expect_code 130
expect_no_server
[ -z "$(ls -A "$WORK/fail")" ] && _pass || _fail "files left: $(ls -A "$WORK/fail")"

case_ "chat lines with tools: /v1/chat/completions on a --jinja server, template errors and tool calls per build"
# tests/data/llama-server/chat.jsonl: line 1 asks for the weather offering get_weather, line 2 a booking whose
# assistant turn is written (the real server answers it HTTP 500: the output does not parse as the template's
# tool-call format), line 3 a plain prompt (/completion, as before), line 4 a question without tools. The fake
# answers each chat request only with its recorded messages and tools (else HTTP 400, a template error the
# counts below would show), refuses one at /completion (exit 3), and starts only with --jinja, which the
# recordings have. Tool calls are the fake's made-up replies (FAKE_LLAMA_FAULT call*).
cp "$DATA/chat.jsonl" "$DATA/tools.jinja" "$WORK/"
CHAT=(--prompts chat="$WORK/chat.jsonl" --gen-tokens 64 --llama-args "--chat-template-file $WORK/tools.jinja")
mkdir -p "$WORK/tools"
run env FAKE_LLAMA_FAULT="call:source:Paris call-unknown:keep8:Paris" "$BIN" eval --source "$M" "$WORK/keep8.gguf" \
    "${CHAT[@]}" --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/tools/eval.json"
expect_code 0
expect_no_server
expect_out 'chat lines: 3 of 4, 2 offering tools'
grep -qE '^source +1/3 33\.3% \[6\.1, 79\.2\] +1/2 50\.0% \[9\.5, 90\.5\]$' "$OUT" &&
    grep -qE '/keep8\.gguf +1/3 33\.3% \[6\.1, 79\.2\] +0/2 0\.0% \[0\.0, 65\.8\]$' "$OUT" && _pass ||
    _fail "the table's chat rows"
cp "$WORK/tools/eval.json" "$OUT"
expect_json 'd["panels"][0]["chat_lines"] == 3 and d["panels"][0]["tool_lines"] == 2 and d["generation"]["chat_endpoint"] == "/v1/chat/completions"'
expect_json 'all(b["server_command"][-3:] == ["--jinja", "--chat-template-file", "tools.jinja"] for b in d["behaviour"])'
expect_json '[b["chat_outcomes"] for b in d["behaviour"]] == [["tool_call", "template_error", None, "text"], ["bad_tool_call", "template_error", None, "text"]]'
# eval.svg widens for the chat measures: the title (about 8 px a character at 14 px, from x = 70) fits.
/usr/bin/env python3 -c 'import re, sys
s = open(sys.argv[1]).read()
w = float(re.search(r"<svg [^>]*width=\"([0-9.]+)\"", s).group(1))
t = re.search(r"<text [^>]*font-size=\"14\">([^<]*)</text>", s).group(1)
sys.exit(0 if "template-error" in t and w >= 70 + 8 * len(t) + 20 else 1)' "$WORK/tools/eval.svg" && _pass ||
    _fail "eval.svg is narrower than its title: $(head -c 300 "$WORK/tools/eval.svg")"
expect_json '[b["tools_offered"] for b in d["behaviour"]] == [[True, True, False, False]] * 2'
expect_json '[(b["chat_generations"], b["template_errors"], b["tool_generations"], b["tool_calls"]) for b in d["behaviour"]] == [(3, 1, 2, 1), (3, 1, 2, 0)]'
expect_json 'd["behaviour"][1]["bad_tool_calls"] == [{"index": 0, "error": "tool_calls[0]: \"get_weather_v2\" is not an offered tool"}]'
expect_json 'd["behaviour"][0]["outcomes"] == ["eog", "error", "loop", "limit"] and d["behaviour"][0]["prompt_errors"][0]["index"] == 1 and d["behaviour"][0]["prompt_errors"][0]["error"].startswith("HTTP 500: {\"error\":{\"code\":500,\"message\":\"The model produced output that does not match the expected peg-native format\"")'
expect_json '{k: d["behaviour"][1]["versus_source"]["tool_calls"][k] for k in ("n", "build_only", "source_only", "differs", "changed")} == {"n": 2, "build_only": 0, "source_only": 1, "differs": False, "changed": [{"index": 0, "build": False, "excerpt": "What is the weather in Paris?"}]}'
# A valid call and an invalid one both end the reply ("tool_calls"): a natural end on both.
expect_json 'd["behaviour"][1]["versus_source"]["template_errors"]["changed"] == [] and d["behaviour"][1]["versus_source"]["natural_ends"]["changed"] == []'
/usr/bin/env python3 - "$WORK/tools/eval.generations.jsonl" <<'PY' && _pass || _fail "the generations file's chat lines"
import json, sys
g = [json.loads(l) for l in open(sys.argv[1])]
assert [x.get("chat") for x in g] == ["tool_call", "template_error", None, "text"] + ["bad_tool_call", "template_error", None, "text"], g
assert g[0]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": "{\"city\": \"x\"}"} and g[0]["end"] == "eog"
assert g[4]["tool_call_error"] == "tool_calls[0]: \"get_weather_v2\" is not an offered tool"
assert g[3]["tokens"] == [] and g[3]["completion_tokens"] == 64 and g[3]["text"].startswith("\n<!-- YAML")
assert len(g[2]["tokens"]) == 64 and "chat" not in g[2]
PY
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/tools/eval.json"
expect_code 0
expect_out '| gets a template error (HTTP 4xx/5xx, chat lines) | 1 of 3 (33.3 %, 95 % interval 6.1–79.2 %) | 1 of 3 (33.3 %, 95 % interval 6.1–79.2 %) | no difference measured at n = 3 (0 prompts only this build, 0 only the source; McNemar p = 1.000) |'
expect_out '| makes a valid tool call (lines offering tools) | 0 of 2 (0.0 %, 95 % interval 0.0–65.8 %) | 1 of 2 (50.0 %, 95 % interval 9.5–90.5 %) | no difference measured at n = 2 (0 prompts only this build, 1 only the source; McNemar p = 1.000) |'
expect_out '- prompt 1 `What is the weather in Paris?`: makes a valid tool call on the source, not on this build'

case_ "chat lines: arguments not JSON, a schema violation, an HTTP 500 on the build only"
mkdir -p "$WORK/tools2"
run env FAKE_LLAMA_FAULT="call-schema:source:Paris call-notjson:keep8:Paris 500:keep8:licence" "$BIN" eval \
    --source "$M" "$WORK/keep8.gguf" "${CHAT[@]}" --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/tools2/eval.json"
expect_code 0
expect_no_server
cp "$WORK/tools2/eval.json" "$OUT"
expect_json '[b["chat_outcomes"] for b in d["behaviour"]] == [["bad_tool_call", "template_error", None, "text"], ["bad_tool_call", "template_error", None, "template_error"]]'
expect_json '[[e["error"] for e in b["bad_tool_calls"]] for b in d["behaviour"]] == [["tool_calls[0].arguments: the required key \"city\" is missing (get_weather)"], ["tool_calls[0] (get_weather): the arguments are not JSON: {get_weather: "]]'
expect_json '[(b["template_errors"], b["tool_calls"]) for b in d["behaviour"]] == [(1, 0), (2, 0)] and d["behaviour"][1]["template_error_rate"] == 2 / 3'
expect_json 'd["behaviour"][1]["versus_source"]["template_errors"]["changed"] == [{"index": 3, "build": True, "excerpt": "Summarise the licence in one line."}]'

case_ "chat lines: a bad line is refused (exit 2) naming the line and field, before any server starts"
: >"$WORK/pids"
for bad in '{"tools": []}|line 1.tools: given without "messages": tools are offered in a chat line' \
    '{"messages": [{"content": "hi"}]}|line 1.messages[0].role: missing or not a string (a message is {"role": ..., "content": ...})' \
    '{"messages": []}|line 1.messages: not a non-empty array of messages' \
    '{"messages": [{"role": "user"}], "tools": [{"function": {"name": ""}}]}|line 1.tools[0].function.name: missing, empty or not a string' \
    '{"prompt": "x", "messages": [{"role": "user"}]}|line 1: holds both "prompt" and "messages"; give one (a chat line has "messages")'; do
    printf '%s\n' "${bad%%|*}" >"$WORK/bad-chat.jsonl"
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts b="$WORK/bad-chat.jsonl" --llama-bin "$FAKE" --cache-dir "$WORK/cache"
    expect_code 2
    expect_err_lines 1
    field=${bad#*|}
    expect_err "$WORK/bad-chat.jsonl: ${field%%: *} at offset 0 (0x0): ${field#*: }"
done
[ ! -s "$WORK/pids" ] && _pass || _fail "a refused eval started a server: $(cat "$WORK/pids")"

case_ "refusals: exit 2, one line, before any server starts"
: >"$WORK/pids"
printf '\n  \n\n' >"$WORK/empty.txt"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts e="$WORK/empty.txt" --llama-bin "$FAKE" --cache-dir "$WORK/cache"
expect_code 2
expect_err_lines 1
expect_err "$WORK/empty.txt: prompts: --prompts e: the panel has no prompt (blank lines are skipped)"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts a="$WORK/code.txt" --prompts a="$WORK/prose.txt" --llama-bin "$FAKE"
expect_code 2
expect_err_lines 1
expect_err "--prompts a is given twice; give each panel one name"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${PANELS[@]}" --gen-tokens 0 --llama-bin "$FAKE"
expect_code 2
expect_err_lines 1
expect_err "--gen-tokens 0: give 1 to 32768 tokens"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${PANELS[@]}" --parallel 0 --llama-bin "$FAKE"
expect_code 2
expect_err "--parallel 0: give 1 to 256 slots"
mkdir -p "$WORK/noserver"
ln -sf "$FAKE/llama-perplexity" "$FAKE/llama-tokenize" "$WORK/noserver/"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${PANELS[@]}" --llama-bin "$WORK/noserver"
expect_code 2
expect_err_lines 1
expect_err "llama-server not found in --llama-bin $WORK/noserver: --prompts runs it; give --llama-bin DIR"
run env PATH=/usr/bin:/bin "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${PANELS[@]}"
expect_code 2
expect_err "llama-server not found on PATH"
printf '{"prompt": "a"}\n{"text": "b"}\n' >"$WORK/bad.jsonl"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts b="$WORK/bad.jsonl" --llama-bin "$FAKE"
expect_code 2
expect_err_lines 1
expect_err "$WORK/bad.jsonl: line 2.prompt at offset 16 (0x10): missing or not a string"
/usr/bin/env python3 -c 'print("{\"prompt\": " + "[" * 1000000)' >"$WORK/deep.jsonl"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts d="$WORK/deep.jsonl" --llama-bin "$FAKE"
expect_code 2
expect_err "$WORK/deep.jsonl: line 1 at offset 0 (0x0): not a JSON object"
printf 'ok\n\xff\xfe\n' >"$WORK/bad.txt"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts b="$WORK/bad.txt" --llama-bin "$FAKE"
expect_code 2
expect_err "$WORK/bad.txt: line 2 at offset 3 (0x3): not valid UTF-8"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --chat --text python="$TR/corpora/python.heldout.txt" --llama-bin "$FAKE"
expect_code 2
expect_err "--chat needs --prompts NAME=FILE"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --llama-bin "$FAKE"
expect_code 2
expect_err "eval: give at least one --text NAME=FILE or --prompts NAME=FILE"
# --temp, --samples and --seed: one line naming the option and its value.
while IFS='|' read -r args want; do
    read -ra a <<<"$args"
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" "${a[@]}" --llama-bin "$FAKE"
    expect_code 2
    expect_err_lines 1
    expect_err "$want"
done <<'REFUSALS'
--temp -0.5|--temp -0.5: give a finite temperature of 0 or more (0 is greedy)
--temp nan|--temp nan: give a finite temperature of 0 or more (0 is greedy)
--temp inf|--temp inf: give a finite temperature of 0 or more (0 is greedy)
--temp 0.7x|--temp '0.7x' is not a temperature: give a number of 0 or more, e.g. 0.7
--temp 0.7 --temp 0.70|--temp 0.7 is given twice; give each temperature once
--temp 0.7 --samples 0|--samples 0: give 1 to 1000 generations per prompt
--temp 0.7 --samples 1001|--samples 1001: give 1 to 1000 generations per prompt
--temp 0.7 --samples -1|--samples '-1' is not a number of generations (e.g. 4)
--samples 4|--samples 4: only a temperature above 0 is sampled, and none is given; greedy decoding (temperature 0) is one generation per prompt; give --temp T
--temp 0 --seed 5|--seed 5: only a temperature above 0 is sampled, and none is given; greedy decoding (temperature 0) is one generation per prompt; give --temp T
--temp 0.7 --seed -1|--seed '-1' is not a seed: give a whole number from 0 to 18446744073709551615
--temp 0.7 --seed 18446744073709551616|--seed '18446744073709551616' is not a seed: give a whole number from 0 to 18446744073709551615
REFUSALS
/usr/bin/env python3 -c 'print("\n".join(f"prompt {i}" for i in range(101)))' >"$WORK/p101.txt"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts many="$WORK/p101.txt" --temp 0.7 --samples 1000 --llama-bin "$FAKE"
expect_code 2
expect_err_lines 1
expect_err "--samples 1000: panel many has 101 prompts, so 101000 generations per temperature, more than the 100000 eval runs at most"
for a in "--temp 0.7" "--samples 2" "--seed 3"; do
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$TR/corpora/python.heldout.txt" $a --llama-bin "$FAKE"
    expect_code 2
    expect_err "${a%% *} needs --prompts NAME=FILE: it sets how prompts are generated"
done
cp "$WORK/code.txt" "$WORK/code.json"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts code="$WORK/code.json" --llama-bin "$FAKE" -o "$WORK/code.json"
expect_code 2
expect_err "-o $WORK/code.json: $WORK/code.json is an input of this eval"
rm -f "$WORK/code.json"
[ ! -s "$WORK/pids" ] && _pass || _fail "a refused eval started a server: $(cat "$WORK/pids")"

# With llama.cpp: the same eval through the real llama-server.
if part llama "the real llama-server run $(live_why)" [ -n "$REAL" ]; then
    case_ "real llama-server: the recorded tokens, and no server left"
    mkdir -p "$WORK/real" "$WORK/wrap"
    # A wrapper that records the real server's pid (exec keeps it), so the test can check it is gone.
    cat >"$WORK/wrap/llama-server" <<SH
#!/usr/bin/env bash
echo \$\$ >>"$WORK/pids"
exec "$REAL/llama-server" "\$@"
SH
    chmod +x "$WORK/wrap/llama-server"
    run "$BIN" eval --source "$M" "$WORK/keep12.gguf" "$WORK/keep8.gguf" "${PANELS[@]}" --gen-tokens 64 \
        --llama-bin "$WORK/wrap" --cache-dir "$WORK/real-cache" -o "$WORK/real/eval.json"
    expect_code 0
    expect_no_server
    /usr/bin/env python3 -c "$RECOMPUTE" "$WORK/real" >"$WORK/recompute.txt" 2>&1 && _pass || _fail "behaviour[] differs from the definitions: $(cat "$WORK/recompute.txt")"
    for b in source keep12 keep8; do
        model=source
        [ $b = source ] || model=$b.gguf  # eval.json and the generations name paths relative to themselves
        for p in code prose; do
            want=$(recorded_tokens $b "$WORK/$p.txt")
            got=$(/usr/bin/env python3 -c 'import json, sys
print(json.dumps([[g["end"], g["tokens"]] for g in map(json.loads, open(sys.argv[1])) if g["model"] == sys.argv[2] and g["panel"] == sys.argv[3]]))' "$WORK/real/eval.generations.jsonl" "$model" $p)
            [ "$got" = "$want" ] && _pass || _fail "real $b on $p: the tokens differ from the recording"
        done
    done
    case_ "real llama-server: --chat through the model's template, the recorded tokens"
    mkdir -p "$WORK/real-chat"
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" --gen-tokens 64 --chat \
        --llama-bin "$WORK/wrap" --cache-dir "$WORK/real-cache" -o "$WORK/real-chat/eval.json"
    expect_code 0
    expect_no_server
    cmp -s "$WORK/chat/eval.generations.jsonl" "$WORK/real-chat/eval.generations.jsonl" && _pass ||
        _fail "real --chat generations differ from the recorded ones"
    case_ "real llama-server: the natural ends of the recording with '.' as end-of-generation token"
    mkdir -p "$WORK/real-eos"
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${PANELS[@]}" --gen-tokens 64 --llama-bin "$WORK/wrap" \
        --cache-dir "$WORK/real-cache" --llama-args "$EOS" -o "$WORK/real-eos/eval.json"
    expect_code 0
    expect_no_server
    cmp -s "$WORK/eos/eval.generations.jsonl" "$WORK/real-eos/eval.generations.jsonl" && _pass ||
        _fail "real generations with $EOS differ from the recorded ones"
    case_ "real llama-server: --temp 0 --temp 0.7 --samples 4 run twice with the same seed: identical token ids"
    # Sampling reproducible: the same seed gives the same tokens on a rerun (and the recorded ones).
    for k in 1 2; do
        mkdir -p "$WORK/real-samp$k"
        run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts prose="$WORK/prose.txt" --gen-tokens 64 "${SAMP[@]}" \
            --llama-bin "$WORK/wrap" --cache-dir "$WORK/real-cache" -o "$WORK/real-samp$k/eval.json"
        expect_code 0
        expect_no_server
    done
    /usr/bin/env python3 -c "$RECOMPUTE" "$WORK/real-samp1" >"$WORK/recompute.txt" 2>&1 && _pass || _fail "behaviour[] differs from the definitions: $(cat "$WORK/recompute.txt")"
    cmp -s "$WORK/real-samp1/eval.generations.jsonl" "$WORK/real-samp2/eval.generations.jsonl" && _pass ||
        _fail "two runs with --seed 0 generated different tokens"
    /usr/bin/env python3 -c 'import json, sys
h = [[b["tokens_sha256"] for b in json.load(open(f))["behaviour"]] for f in sys.argv[1:]]
sys.exit(0 if h[0] == h[1] and len(set(h[0])) == 4 else 1)' "$WORK/real-samp1/eval.json" "$WORK/real-samp2/eval.json" &&
        _pass || _fail "tokens_sha256 differs between the two runs"
    cmp -s "$WORK/samp/eval.generations.jsonl" "$WORK/real-samp1/eval.generations.jsonl" && _pass ||
        _fail "the real sampled generations differ from the recorded ones"
    case_ "real llama-server --jinja: a chat panel with tools, template errors and tool calls per build"
    mkdir -p "$WORK/real-tools"
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${CHAT[@]}" --llama-bin "$WORK/wrap" --cache-dir "$WORK/real-cache" \
        -o "$WORK/real-tools/eval.json"
    expect_code 0
    expect_no_server
    expect_out 'chat lines: 3 of 4, 2 offering tools'
    cp "$WORK/real-tools/eval.json" "$OUT"
    # The recorded replies again: the booking line's HTTP 500 on both, text elsewhere.
    expect_json '[b["chat_outcomes"] for b in d["behaviour"]] == [["text", "template_error", None, "text"]] * 2 and [(b["template_errors"], b["chat_generations"], b["tool_calls"], b["tool_generations"]) for b in d["behaviour"]] == [(1, 3, 0, 2)] * 2'
    expect_json 'all("template_error_rate_ci" in b and "tool_call_rate_ci" in b and b["server_command"][-3] == "--jinja" for b in d["behaviour"])'
fi

finish
