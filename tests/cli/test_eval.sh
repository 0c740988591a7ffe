# gguf-reap eval and card --eval on the trained Q8_0 fixture pruned to 12 and 8 of 16 experts.
#
# Without llama.cpp, tests/cli/fake-llama/ stands in for llama-perplexity and llama-tokenize: it replays
# the logs recorded from llama.cpp 34af94cd9 (tests/data/llama-perplexity/README.md), so every figure
# checked here is one the real tool printed. Every refusal is checked this way.
# With GGUF_REAP_LLAMA_BIN set to llama.cpp's bin directory, the same eval runs the real tools too, and
# each mean KLD and same-top figure must equal what the same llama-perplexity commands print by hand.
# ctest-parts: llama shim
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fault_lib.sh"
TR=$FIX/trained
[ -f "$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf" ] || skip_all "no trained fixture in $TR"
FAKE=$(cd "$(dirname "$0")/fake-llama" && pwd)
DATA=$(cd "$(dirname "$0")/../data/llama-perplexity" && pwd)
M=$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf
cp "$TR/corpora/python.heldout.txt" "$TR/corpora/c.heldout.txt" "$WORK/"
cp "$DATA/short.txt" "$WORK/short.txt"
IM=()
for d in c changelog legal markdown python; do IM+=(--imatrix "$d=$TR/imatrix/tiny-qwen3moe-trained-A.$d.imatrix.gguf"); done
for k in 12 8; do
    "$BIN" -q rank --model "$M" "${IM[@]}" --keep $k -o "$WORK/rank$k" >/dev/null
    "$BIN" -q splice "$M" --keeplist "$WORK/rank$k/keeplist.json" -o "$WORK/keep$k" >/dev/null
done
TEXTS=(--text python="$WORK/python.heldout.txt" --text c="$WORK/c.heldout.txt")
export FAKE_LLAMA_CALLS=$WORK/calls
REAL=${GGUF_REAP_LLAMA_BIN:-}
unset GGUF_REAP_LLAMA_BIN

case_ "eval replays two builds on two texts; base logits once per text"
run "$BIN" eval --source "$M" "$WORK/keep12.gguf" "$WORK/keep8.gguf" "${TEXTS[@]}" --ctx 128 --chunks 8 \
    --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/eval.json"
expect_code 0
expect_out "wrote $WORK/eval.json and $WORK/eval.svg"
[ "$(grep -c '^base' "$WORK/calls")" -eq 2 ] && _pass || _fail "base runs: $(cat "$WORK/calls")"
[ "$(grep -c '^kld' "$WORK/calls")" -eq 4 ] && _pass || _fail "kld runs: $(cat "$WORK/calls")"
[ ! -s "$ERR" ] && _pass || _fail "stderr is not a tty, yet it printed: $(cat "$ERR")"
grep -q '<polyline' "$WORK/eval.svg" && _pass || _fail "eval.svg has no line"
cp "$WORK/eval.json" "$OUT"
expect_json 'len(d["runs"]) == 4 and [(r["output"].split("/")[-1], r["text"]) for r in d["runs"]] == [("keep12.gguf","python"),("keep12.gguf","c"),("keep8.gguf","python"),("keep8.gguf","c")]'
expect_json 'd["runs"][2]["kld"] == {"mean": 0.865733, "mean_err": 0.038526, "median": 0.689885, "p99": 4.122076, "p999": 6.68995, "max": 7.684709}'
expect_json 'd["runs"][2]["same_top"] == {"mean": 39.881, "err": 2.183} and d["runs"][2]["rms_dp"] == 25.058'
expect_json 'd["runs"][2]["ppl"]["source"] == 33.9906 and d["runs"][2]["ppl"]["output"] == 69.769033 and d["runs"][2]["ln_ppl_ratio"]["mean"] == 0.719106'
expect_json '[r["kld"]["mean"] for r in d["runs"]] == [0.638036, 0.163024, 0.865733, 0.596336] and all(r["from"] == "summary" for r in d["runs"])'
expect_json 'd["runs"][0]["tokens"] == 504 and d["texts"][0]["tokens"] == 19133 and d["texts"][1]["tokens"] == 18726'
expect_json 'd["texts"][0]["base_bytes"] == 4136916 and d["texts"][0]["sha256"] == "'"$(sha256sum "$WORK/python.heldout.txt" | cut -d" " -f1)"'"'
expect_json '[o["expert_count"] for o in d["outputs"]] == [12, 8] and d["outputs"][1]["shards"] == ["keep8.gguf"] and d["source"]["expert_count"] == 16'
expect_json 'd["llama_cpp"]["build"].startswith("version: 0.1.1-dev") and d["runs"][0]["command"][-3:-1] == ["--kl-divergence-base", d["texts"][0]["base_file"]]'
# eval.json is meant for upload: no absolute local path, names relative to it or base names (issue 33).
expect_json 'd["texts"][0]["tokenize_command"][1:] == ["-m", "'"$(basename "$M")"'", "--stdin", "--no-escape", "--ids", "--show-count", "--log-disable"] and d["texts"][0]["tokenize_command"][0] == "llama-tokenize"'
expect_json '"\"/" not in json.dumps(d) and d["texts"][0]["base_file"].startswith("cache/")'
expect_json '"--no-escape" in d["runs"][0]["command"] and d["runs"][0]["command"][d["runs"][0]["command"].index("-c")+1] == "128"'
expect_out "keep8.gguf"

case_ "on a terminal: run i of n and an ETA (a pty from script(1)); cached base runs are not counted"
mkdir -p "$WORK/tty"
script -qec "$(printf '%q ' "$BIN" eval --source "$M" "$WORK/keep12.gguf" "$WORK/keep8.gguf" "${TEXTS[@]}" --ctx 128 \
    --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/tty/cache") >/dev/null" /dev/null | tr '\r' '\n' >"$WORK/tty/first"
script -qec "$(printf '%q ' "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --ctx 128 \
    --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/tty/cache") >/dev/null" /dev/null | tr '\r' '\n' >"$WORK/tty/again"
grep -aq '^run 1/6: base run on python (tiny-qwen3moe-trained-A-Q8_0.gguf): chunk 0/8' "$WORK/tty/first" && _pass || _fail "no 'run 1/6' line: $(grep -a run "$WORK/tty/first" | head -3)"
grep -aq '^run 6/6, ETA [0-9]*:[0-9][0-9]: keep8.gguf on c: chunk 0/8' "$WORK/tty/first" && _pass || _fail "no 'run 6/6, ETA' line: $(grep -a run "$WORK/tty/first" | tail -3)"
grep -aq '^run 1/2: keep8.gguf on python' "$WORK/tty/again" && grep -aq '^run 2/2, ETA' "$WORK/tty/again" && _pass || _fail "cached bases counted: $(grep -a run "$WORK/tty/again")"

case_ "a second eval reuses the cached base logits"
: >"$WORK/calls"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --ctx 128 --chunks 8 --llama-bin "$FAKE" \
    --cache-dir "$WORK/cache" --json
expect_code 0
[ "$(grep -c '^base' "$WORK/calls")" -eq 0 ] && _pass || _fail "base runs again: $(cat "$WORK/calls")"
expect_json 'all(t["base_cached"] for t in d["texts"]) and d["runs"][0]["kld"]["mean"] == 0.865733'

case_ "eval --calibration: each text held out or not, by sha256; without it, not known (issue 40)"
# A calibrate.json whose domain c was calibrated on c.heldout.txt itself, every other domain on its own
# calibration text, each with the fixture's imatrix of that domain (which rank8 was ranked from).
# calibration WRONG OUT: writes it; WRONG=1 gives every imatrix another sha256 (the calibration of
# another build).
calibration() {
    /usr/bin/python3 - "$TR" "$WORK" "$1" "$2" <<'PY'
import hashlib, json, sys
t, w, wrong, out = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
texts = []
for d in ["c", "changelog", "legal", "markdown", "python"]:
    text = f"{w}/c.heldout.txt" if d == "c" else f"{t}/corpora/{d}.calib.txt"
    im = "0" * 64 if wrong else sha(f"{t}/imatrix/tiny-qwen3moe-trained-A.{d}.imatrix.gguf")
    u = {"path": text, "sha256": sha(text), "bytes": 1, "tokens": 1}
    texts.append({"name": d, "path": text, "sha256": sha(text), "bytes": 1, "tokens": 1, "used": u, "chunks": 1,
                  "imatrix": f"{d}.imatrix.gguf", "imatrix_sha256": im, "key": "", "seconds": 0,
                  "command": [], "tokenize_command": []})
json.dump({"tool": "gguf-reap 0.1.0", "texts": texts}, open(out, "w"))
PY
}
mkdir -p "$WORK/held" "$WORK/held-other"
calibration 0 "$WORK/held/calibrate.json"
calibration 1 "$WORK/held-other/calibrate.json"
EV8=(eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache")
run "$BIN" "${EV8[@]}" --calibration "$WORK/held/calibrate.json" -o "$WORK/held/eval.json"
expect_code 0
expect_out "text    python: $WORK/python.heldout.txt (19133 tokens, 8 chunks of 128, 504 scored), base cached; held out: yes"
expect_out "text    c: $WORK/c.heldout.txt (18726 tokens, 8 chunks of 128, 504 scored), base cached; held out: no, calibration text of c"
cp "$WORK/held/eval.json" "$OUT"
expect_json '[(t["held_out"], t["calibration_domain"]) for t in d["texts"]] == [(True, None), (False, "c")]'
expect_json 'd["calibration"]["path"] == "calibrate.json" and d["calibration"]["sha256"] == "'"$(sha256sum "$WORK/held/calibrate.json" | cut -d" " -f1)"'" and len(d["calibration"]["texts"]) == 5'
run "$BIN" "${EV8[@]}" -o "$WORK/held/plain.json"
expect_code 0
expect_out "base cached; held out: not known (no --calibration)"
cp "$WORK/held/plain.json" "$OUT"
expect_json 'all(t["held_out"] is None and t["calibration_domain"] is None for t in d["texts"]) and d["calibration"] is None'
: >"$WORK/calls"
run "$BIN" "${EV8[@]}" --calibration "$WORK/python.heldout.txt"
expect_code 2
expect_err "$WORK/python.heldout.txt"
[ ! -s "$WORK/calls" ] && _pass || _fail "llama.cpp ran before the calibrate.json was read: $(cat "$WORK/calls")"

case_ "card: held out from eval.json's calibration record, or from --calibration; never from another build's"
"$BIN" -q audit "$WORK/keep8.gguf" --source "$M" --json >"$WORK/audit8.json"
CARD8=(card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json")
# rank8's keeplist records no calibration text (the fixture's imatrices were made by hand).
run "$BIN" "${CARD8[@]}" --eval "$WORK/held/plain.json"
expect_code 0
expect_out " % | not known |"
run "$BIN" "${CARD8[@]}" --eval "$WORK/held/eval.json"
expect_code 0
expect_out " % | yes |"
expect_out " % | no: calibration text of c |"
expect_out " on c (504 tokens, calibration text of c): "
run "$BIN" "${CARD8[@]}" --eval "$WORK/held/plain.json" --calibration "$WORK/held/calibrate.json"
expect_code 0
expect_out " % | yes |"
expect_out " % | no: calibration text of c |"
run "$BIN" "${EV8[@]}" --calibration "$WORK/held-other/calibrate.json" -o "$WORK/held-other/eval.json"
expect_code 0
expect_out "held out: no, calibration text of c"
run "$BIN" "${CARD8[@]}" --eval "$WORK/held-other/eval.json"
expect_code 0
expect_out " % | not known |"

case_ "a cached base-logits file cut short (a full disk, a copy cut off) is made again, not reused"
: >"$WORK/calls"
for f in "$WORK"/cache/base-*.kld; do truncate -s 4000000 "$f"; done
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --ctx 128 --chunks 8 --llama-bin "$FAKE" \
    --cache-dir "$WORK/cache" --json
expect_code 0
[ "$(grep -c '^base' "$WORK/calls")" -eq 2 ] && _pass || _fail "base runs: $(cat "$WORK/calls"), expected 2"
expect_json 'not any(t["base_cached"] for t in d["texts"])'
[ "$(stat -c %s "$WORK"/cache/base-*.kld | sort -u)" = 4136916 ] && _pass || _fail "cache entries: $(ls -l "$WORK/cache")"

case_ "a base run that wrote fewer bytes of logits than it must: exit 3, and no cache entry"
# The fake, then its logits file (after --kl-divergence-base, in a base run) cut short, as a full disk would.
mkdir -p "$WORK/shortbin"
printf '#!/usr/bin/env bash\nexec "%s/llama-tokenize" "$@"\n' "$FAKE" >"$WORK/shortbin/llama-tokenize"
cat >"$WORK/shortbin/llama-perplexity" <<EOF
#!/usr/bin/env bash
"$FAKE/llama-perplexity" "\$@" || exit
case " \$* " in *" --kl-divergence "*) exit 0 ;; esac
while [ \$# -gt 1 ] && [ "\$1" != --kl-divergence-base ]; do shift; done
[ "\$1" = --kl-divergence-base ] && truncate -s 4000000 "\$2"
exit 0
EOF
chmod +x "$WORK/shortbin/llama-perplexity" "$WORK/shortbin/llama-tokenize"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" --ctx 128 --chunks 8 \
    --llama-bin "$WORK/shortbin" --cache-dir "$WORK/shortcache" --json
expect_code 3
expect_err "the base run on python (tiny-qwen3moe-trained-A-Q8_0.gguf) wrote 4000000 of 4136916 bytes of logits; its last lines:"
[ -z "$(ls -A "$WORK/shortcache")" ] && _pass || _fail "the cache holds: $(ls -A "$WORK/shortcache")"

case_ "the summary lost its last lines in every run: run 3 times, then figures from the last chunk row"
: >"$WORK/calls"
run env FAKE_LLAMA_MODE=cut "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
    --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache" --json
expect_code 0
expect_json 'd["runs"][0]["from"] == "last chunk row" and d["runs"][0]["kld"]["mean"] == 0.86573 and d["runs"][0]["kld"]["p99"] is None and d["runs"][0]["ppl"]["source"] == 33.9905'
[ "$(grep -c '^kld' "$WORK/calls")" -eq 3 ] && _pass || _fail "kld runs: $(cat "$WORK/calls"), expected 3"
expect_err "keep8.gguf on python: llama-perplexity's output lost its last lines (8 of 8 chunk rows, summary incomplete); running it again (2 of 3)"
expect_err "keep8.gguf on python: llama-perplexity's summary was incomplete in all 3 runs; the figures are its last chunk row's"

case_ "a run that lost its last rows is run again, and the whole second run is taken"
: >"$WORK/calls"
run env FAKE_LLAMA_MODE=cut-once "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
    --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache" --json
expect_code 0
[ "$(grep -c '^kld' "$WORK/calls")" -eq 2 ] && _pass || _fail "kld runs: $(cat "$WORK/calls"), expected 2"
expect_err "llama-perplexity's output lost its last lines (5 of 8 chunk rows, no summary); running it again (2 of 3)"
expect_json 'd["runs"][0]["from"] == "summary" and d["runs"][0]["kld"]["mean"] == 0.865733 and d["runs"][0]["kld"]["p99"] == 4.122076'

case_ "every run lost its last rows: exit 3 after 3 runs, no eval.json"
: >"$WORK/calls"
run env FAKE_LLAMA_MODE=rows-lost "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
    --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/rowslost.json"
expect_code 3
[ "$(grep -c '^kld' "$WORK/calls")" -eq 3 ] && _pass || _fail "kld runs: $(cat "$WORK/calls"), expected 3"
expect_err "keep8.gguf on python: printed 5 of 8 chunk rows and no complete summary; its last lines:"
[ ! -e "$WORK/rowslost.json" ] && _pass || _fail "rowslost.json written"

case_ "llama-perplexity computed other chunks than asked: exit 3"
run env FAKE_LLAMA_MODE=chunks1 "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
    --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/chunks1.json"
expect_code 3
expect_err "keep8.gguf on python: computed 1 chunks of 128 tokens where 8 chunks of 128 were asked for; its last lines:"
[ ! -e "$WORK/chunks1.json" ] && _pass || _fail "chunks1.json written"

case_ "the fakes replay only the recorded commands: another -c is refused, not replayed"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
    --ctx 256 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache"
expect_code 3
expect_err "fake llama-perplexity: -c 256: the recorded runs used -c 128"

case_ "card --eval: the measured section"
"$BIN" -q audit "$WORK/keep8.gguf" --source "$M" --json >"$WORK/audit8.json"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/eval.json"
expect_code 0
expect_out "## Measured against the source"
expect_out "| python | 504 | 33.991 → 69.769 | 0.8657 ± 0.0385 | 4.1221 | 39.88 % |"
expect_out "| c | 504 | 27.005 → 48.972 | 0.5963 ± 0.0390 | 4.3308 | 58.73 % |"
expect_out "No task benchmark; KLD measured only on these texts: python (504 tokens), c (504 tokens)."
expect_out 'Plot: `eval.svg`'
expect_out "llama.cpp: \`version: 0.1.1-dev (build 0, commit unknown); built with"

# The recorded figure of a run (tests/data/llama-perplexity), read independently of gguf-reap.
recorded() { sed -n "s/^$1: *\([0-9.]*\) .*/\1/p" "$DATA/$2.txt"; }
F16=$TR/models/tiny-qwen3moe-trained-A-f16.gguf
mkdir -p "$WORK/ref"

case_ "eval --reference: the source and each build also against the f16 model's logits (issue 33)"
: >"$WORK/calls"
run "$BIN" eval --source "$M" "$WORK/keep12.gguf" "$WORK/keep8.gguf" "${TEXTS[@]}" --reference "$F16" --ctx 128 \
    --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/ref/eval.json"
expect_code 0
# The source's base logits are cached by the first eval; the reference's are made once per text, and the
# source and both builds run against them.
[ "$(grep -c '^base' "$WORK/calls")" -eq 2 ] && [ "$(grep -c '^base f16' "$WORK/calls")" -eq 2 ] && _pass ||
    _fail "base runs: $(cat "$WORK/calls")"
[ "$(grep -c '^kld .* f16$' "$WORK/calls")" -eq 6 ] && [ "$(grep -c '^kld' "$WORK/calls")" -eq 10 ] && _pass ||
    _fail "kld runs: $(cat "$WORK/calls")"
expect_out "against the source (Q8_0): what pruning cost"
expect_out "against the reference $F16 (F16): what the whole build costs, the source's quantisation included"
cp "$WORK/ref/eval.json" "$OUT"
expect_json 'd["reference"]["shards"] == ["tiny-qwen3moe-trained-A-f16.gguf"] and d["reference"]["main_type"] == "F16" and d["source"]["main_type"] == "Q8_0" and d["reference"]["expert_count"] == 16'
expect_json '[(r["output"].split("/")[-1], r["text"]) for r in d["reference_runs"]] == [(s, t) for s in ("tiny-qwen3moe-trained-A-Q8_0.gguf", "keep12.gguf", "keep8.gguf") for t in ("python", "c")]'
expect_json "[r['kld']['mean'] for r in d['reference_runs']] == [$(recorded 'Mean    KLD' kld-source-f16-python), $(recorded 'Mean    KLD' kld-source-f16-c), $(recorded 'Mean    KLD' kld-keep12-f16-python), $(recorded 'Mean    KLD' kld-keep12-f16-c), $(recorded 'Mean    KLD' kld-keep8-f16-python), $(recorded 'Mean    KLD' kld-keep8-f16-c)]"
expect_json "[r['same_top']['mean'] for r in d['reference_runs']][4] == $(recorded 'Same top p' kld-keep8-f16-python)"
# Against the source, the figures are the ones without --reference.
expect_json '[r["kld"]["mean"] for r in d["runs"]] == [0.638036, 0.163024, 0.865733, 0.596336]'
expect_json 'd["texts"][0]["reference_base"]["ppl"] == 33.9487 and d["texts"][0]["reference_base"]["file"] != d["texts"][0]["base_file"] and d["reference_runs"][0]["command"][d["reference_runs"][0]["command"].index("--kl-divergence-base") + 1] == d["texts"][0]["reference_base"]["file"]'

case_ "card --eval with --reference: both figures, each labelled"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/ref/eval.json"
expect_code 0
expect_out "| python | 504 | 33.991 → 69.769 | 0.8657 ± 0.0385 | 4.1221 | 39.88 % |"
expect_out 'The same measures against the unpruned reference `tiny-qwen3moe-trained-A-f16.gguf` (F16) instead of the source'
expect_out "| python | the source (Q8_0) | 504 | 33.949 → 33.991 | 0.0006 ± 0.0002 | 0.0102 | 98.81 % |"
expect_out "| python | this build | 504 | 33.949 → 69.769 | 0.8656 ± 0.0385 | 4.1215 | 40.48 % |"
expect_out "| c | this build | 504 | 26.966 → 48.972 | 0.5975 ± 0.0390 | 4.3337 | 59.13 % |"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/ref/eval.json" --json
expect_code 0
expect_json 'd["measured"]["reference"]["build"][0]["kld_mean"] == 0.865645 and d["measured"]["reference"]["source"][1]["name"] == "c" and d["measured"]["reference"]["main_type"] == "F16"'

case_ "eval --reference refuses what is not the source at another quantisation"
"$GEN" model --arch qwen3moe --experts 16 --vocab 4096 -o "$WORK/vocab.gguf" >/dev/null
"$GEN" model --arch qwen3moe --experts 16 --vocab 4000 -o "$WORK/vocab4000.gguf" >/dev/null
"$GEN" model --arch deepseek2 --experts 16 --vocab 4096 -o "$WORK/ds.gguf" >/dev/null
: >"$WORK/calls"
for r in "$M" "$WORK/vocab.gguf" "$WORK/vocab4000.gguf" "$WORK/ds.gguf" "$WORK/keep12.gguf"; do
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --reference "$r" --ctx 128 --chunks 8 \
        --llama-bin "$FAKE" --cache-dir "$WORK/cache"
    expect_code 2
    expect_err_lines 1
    case $r in
        "$M") expect_err "error: --reference $M: this is the source tiny-qwen3moe-trained-A-Q8_0.gguf itself (the same header bytes)" ;;
        *vocab.gguf) expect_err "vocab.gguf: tokenizer.ggml.tokens at offset 215 (0xd7): token 0 differs from the source tiny-qwen3moe-trained-A-Q8_0.gguf's: another vocabulary; --reference must be the source model at another quantisation" ;;
        *vocab4000.gguf) expect_err "4000 tokens where the source tiny-qwen3moe-trained-A-Q8_0.gguf has 4096: another vocabulary" ;;
        *ds.gguf) expect_err "ds.gguf: general.architecture at offset 24 (0x18): is deepseek2 where the source tiny-qwen3moe-trained-A-Q8_0.gguf is qwen3moe" ;;
        *) expect_err "keep12.gguf: qwen3moe.expert_count at offset" && expect_err "12 experts per block where the source tiny-qwen3moe-trained-A-Q8_0.gguf has 16: --reference must be the source model at another quantisation" ;;
    esac
done
[ ! -s "$WORK/calls" ] && _pass || _fail "llama.cpp ran before the reference was refused: $(cat "$WORK/calls")"
for args in "--source https://127.0.0.1:9/m.gguf $WORK/keep8.gguf" "--source $M hf://org/repo/keep8.gguf" \
    "--source $M $WORK/keep8.gguf --reference http://127.0.0.1:9/f16.gguf"; do
    # shellcheck disable=SC2086
    run "$BIN" eval $args "${TEXTS[@]}" --llama-bin "$FAKE"
    expect_code 2
    expect_err "llama.cpp's tools, which eval runs on every model, read only local files; download it first and give its path"
done
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts p="$WORK/python.heldout.txt" --reference "$F16" --llama-bin "$FAKE"
expect_code 2
expect_err "--reference $F16: give --text NAME=FILE too; the reference is measured by KL divergence on texts"

case_ "card --eval refuses an eval of another build"
"$BIN" -q audit "$WORK/keep12.gguf" --source "$M" --json >"$WORK/audit12.json"
"$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" --ctx 128 --chunks 8 \
    --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/eval8.json" >/dev/null
run "$BIN" card "$WORK/keep12.gguf" --source "$M" --rank "$WORK/rank12" --audit "$WORK/audit12.json" --eval "$WORK/eval8.json"
expect_code 2
expect_err "eval8.json: outputs"
expect_err "not this build (keep12.gguf"

case_ "card --eval refuses an eval of another source"
sed 's/"identity": "[0-9a-f]*"/"identity": "'"$(printf '0%.0s' {1..64})"'"/' "$WORK/eval.json" >"$WORK/eval-other.json"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/eval-other.json"
expect_code 2
expect_err "source.identity"
expect_err "this eval measured builds of another source"

# The recorded smoke runs (tests/data/llama-perplexity/README.md), read independently of gguf-reap: the
# prompt's token count from the log, the token ids after it from the session file, the text llama-completion
# printed after the prompt (up to its "saving final output" line), each as a Python literal.
prompt_tokens() { sed -n 's/.*number of tokens in prompt = \([0-9]*\).*/\1/p' "$DATA/smoke-$1.txt"; }
session_ids() {
    /usr/bin/python3 -c 'import struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack_from("<I", d, 8)[0]
print(list(struct.unpack_from("<%di" % n, d, 12))[int(sys.argv[2]):])' "$DATA/smoke-$1.session" "$(prompt_tokens "$1")"
}
printed_text() {
    /usr/bin/python3 -c 'import sys
s = open(sys.argv[1], encoding="utf-8").read()
print(repr(s[len("def main("):s.index("\nllama_completion: saving final output")]))' "$DATA/smoke-$1.stdout"
}

case_ "eval --smoke-prompt: each build's greedy tokens against the source's"
: >"$WORK/calls"
mkdir -p "$WORK/smoke"
run "$BIN" eval --source "$M" "$WORK/keep12.gguf" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
    --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache" --smoke-prompt 'def main(' --smoke-tokens 16 \
    -o "$WORK/smoke/eval.json"
expect_code 0
[ "$(grep -c '^smoke' "$WORK/calls")" -eq 3 ] && _pass || _fail "smoke runs: $(cat "$WORK/calls")"
expect_out 'smoke   16 greedy tokens after "def main(" (llama-completion --temp 0)'
expect_out '  source  16 tokens: "self._package, self._package)\n "'
expect_out "  $WORK/keep12.gguf  7/16 identical, first difference at token 8: \" self\" (source) → \"\\n\""
expect_out "  $WORK/keep8.gguf  6/16 identical, first difference at token 7: \",\" (source) → \"_\""
cp "$WORK/smoke/eval.json" "$OUT"
# The token ids are the recorded session files' (after the prompt's P tokens, P from the recorded log),
# and their text is what llama-completion printed after the prompt.
expect_json "[t['id'] for t in d['smoke']['source']['tokens']] == $(session_ids source)"
expect_json "[t['id'] for t in d['outputs'][1]['smoke']['tokens']] == $(session_ids keep8)"
expect_json "d['smoke']['source']['text'] == $(printed_text source)"
expect_json "d['outputs'][1]['smoke']['text'] == $(printed_text keep8)"
expect_json 'd["smoke"]["prompt"] == "def main(" and d["smoke"]["tokens_requested"] == 16 and d["smoke"]["prompt_tokens"] == '"$(prompt_tokens source)"
expect_json 'd["outputs"][0]["smoke"]["identical"] == 7 and d["outputs"][1]["smoke"]["identical"] == 6'
expect_json 'd["outputs"][1]["smoke"]["first_diff"] == {"index": 7, "source": {"id": 11, "text": ","}, "output": {"id": 62, "text": "_"}}'
expect_json '"SESSION" in d["smoke"]["source"]["command"] and "--no-escape" in d["smoke"]["source"]["command"] and d["smoke"]["source"]["command"][d["smoke"]["source"]["command"].index("-p")+1] == "def main("'

case_ "card --eval: the smoke line"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/smoke/eval.json"
expect_code 0
expect_out 'Smoke test: greedy decoding (`llama-completion --temp 0`) of 16 tokens after the prompt `"def main("`: the first 6 tokens are identical to the source'"'"'s; token 7 is `"_"` where the source has `","`.'
"$BIN" -q audit "$WORK/keep12.gguf" --source "$M" --json >"$WORK/audit12.json"
run "$BIN" card "$WORK/keep12.gguf" --source "$M" --rank "$WORK/rank12" --audit "$WORK/audit12.json" --eval "$WORK/smoke/eval.json"
expect_code 0
expect_out 'token 8 is `"\n"` where the source has `" self"`.'

case_ "smoke test refusals"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --llama-bin "$FAKE" --smoke-tokens 16
expect_code 2
expect_err_lines 1
expect_err "--smoke-tokens needs --smoke-prompt TEXT"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --llama-bin "$FAKE" --smoke-prompt x --smoke-tokens 0
expect_code 2
expect_err "--smoke-tokens 0: give 1 to 1024 tokens"
mkdir -p "$WORK/nocompletion"
ln -sf "$FAKE/llama-perplexity" "$FAKE/llama-tokenize" "$WORK/nocompletion/"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --llama-bin "$WORK/nocompletion" --smoke-prompt 'def main('
expect_code 2
expect_err_lines 1
expect_err "llama-completion not found in --llama-bin $WORK/nocompletion"

case_ "a build whose prompt is another number of tokens: exit 3, its tokens are not compared"
run env FAKE_LLAMA_MODE=smoke-prompt5 "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
    --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache" --smoke-prompt 'def main(' -o "$WORK/prompt5.json"
expect_code 3
expect_err "smoke test on keep8.gguf: the prompt is 5 tokens, but 4 on the source"
[ ! -e "$WORK/prompt5.json" ] && _pass || _fail "prompt5.json written"

case_ "llama-completion fails or saves no session: exit 3 with its last lines, no eval.json"
for mode in smoke-exit1 smoke-nosession; do
    run env FAKE_LLAMA_MODE=$mode "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
        --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache" --smoke-prompt 'def main(' -o "$WORK/smokefail.json"
    expect_code 3
    [ $mode = smoke-exit1 ] && expect_err "smoke test on tiny-qwen3moe-trained-A-Q8_0.gguf failed (exit code 1); its last lines:"
    [ $mode = smoke-nosession ] && expect_err "smoke test on tiny-qwen3moe-trained-A-Q8_0.gguf: saved no session (--prompt-cache); its last lines:"
    [ ! -e "$WORK/smokefail.json" ] && _pass || _fail "smokefail.json written"
done

case_ "no llama-perplexity: exit 2, one line saying how to point at it"
run env PATH=/usr/bin:/bin "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}"
expect_code 2
expect_err_lines 1
expect_err "llama-perplexity not found on PATH: give --llama-bin DIR (llama.cpp's build/bin) or set GGUF_REAP_LLAMA_BIN=DIR"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --llama-bin "$WORK"
expect_code 2
expect_err "llama-perplexity not found in --llama-bin $WORK"

case_ "a --text name that cannot name a file"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text "a/b=$WORK/python.heldout.txt" --llama-bin "$FAKE"
expect_code 2
expect_err_lines 1
expect_err "--text 'a/b=$WORK/python.heldout.txt': NAME must be 1 to 64 letters, digits, '_', '-' or '.'"

case_ "a --text name given twice"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text a="$WORK/python.heldout.txt" --text a="$WORK/c.heldout.txt" --llama-bin "$FAKE"
expect_code 2
expect_err_lines 1
expect_err "--text a is given twice"

case_ "bad option values"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --llama-bin "$FAKE" --chunks -3
expect_code 2
expect_err "--chunks '-3' is not a number of chunks"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --llama-bin "$FAKE" --chunks 0
expect_code 2
expect_err "--chunks 0: give at least 1 chunk"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python "$WORK/python.heldout.txt" --llama-bin "$FAKE"
expect_code 2
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python --llama-bin "$FAKE"
expect_code 2
expect_err "--text 'python': write NAME=FILE"

case_ "a text too short for one chunk"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text short="$WORK/short.txt" --ctx 128 --llama-bin "$FAKE" --cache-dir "$WORK/cache"
expect_code 2
expect_err_lines 1
expect_err "--text short=$WORK/short.txt: 94 tokens, too short for one chunk at --ctx 128 (llama-perplexity needs at least 2 x ctx = 256)"

case_ "an output path that is an input (the JSON, or its plot)"
cp "$WORK/python.heldout.txt" "$WORK/held.json"
cp "$WORK/c.heldout.txt" "$WORK/plot.svg"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/held.json" --llama-bin "$FAKE" -o "$WORK/held.json"
expect_code 2
expect_err_lines 1
expect_err "-o $WORK/held.json: $WORK/held.json is an input of this eval"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text c="$WORK/plot.svg" --llama-bin "$FAKE" -o "$WORK/plot.json"
expect_code 2
expect_err "-o $WORK/plot.json: $WORK/plot.svg is an input of this eval"
rm -f "$WORK/held.json" "$WORK/plot.svg"

case_ "an OUT that is the source itself (or a copy): refused, it would measure KLD 0"
cp "$M" "$WORK/copy-of-source.gguf"
for o in "$M" "$WORK/copy-of-source.gguf"; do
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "$o" "${TEXTS[@]}" --llama-bin "$FAKE" --cache-dir "$WORK/cache"
    expect_code 2
    expect_err_lines 1
    expect_err "$o: this is the source $M itself (the same header bytes), not a build of it; give the pruned builds as OUT"
done
rm -f "$WORK/copy-of-source.gguf"

case_ "-o names a .json file, so its plot (FILE.svg) belongs to no other -o"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --llama-bin "$FAKE" -o "$WORK/eval.txt"
expect_code 2
expect_err_lines 1
expect_err "-o $WORK/eval.txt: name a .json file, e.g. eval.json (its plot is written beside it, eval.svg)"

case_ "-o in a directory that cannot be made: exit 3 before any llama.cpp run"
: >"$WORK/calls"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --ctx 128 --chunks 8 --llama-bin "$FAKE" \
    --cache-dir "$WORK/cache" -o /proc/no-such-dir/eval.json
expect_code 3
expect_err "gguf-reap: error: /proc/no-such-dir: cannot create the output directory: "
! grep -q '^base\|^kld' "$WORK/calls" && _pass || _fail "llama-perplexity ran before the output was checked: $(cat "$WORK/calls")"

case_ "-o in a missing directory: it is made, as rank and splice make theirs"
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --ctx 128 --chunks 8 --llama-bin "$FAKE" \
    --cache-dir "$WORK/cache" -o "$WORK/new/deeper/eval.json"
expect_code 0
expect_out "wrote $WORK/new/deeper/eval.json and $WORK/new/deeper/eval.svg"
[ -s "$WORK/new/deeper/eval.json" ] && [ -s "$WORK/new/deeper/eval.svg" ] && _pass || _fail "no eval.json and eval.svg in $WORK/new/deeper"

case_ "the same OUT twice is refused, however spelled or copied; the refused eval leaves no folder it made"
cp "$WORK/keep8.gguf" "$WORK/keep8-copy.gguf"
for twice in "$WORK/keep8.gguf" "$WORK/./keep8.gguf" "$WORK/keep8-copy.gguf"; do
    : >"$WORK/calls"
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "$WORK/keep12.gguf" "$twice" "${TEXTS[@]}" --ctx 128 \
        --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/twice/sub/eval.json"
    expect_code 2
    expect_err_lines 1
    expect_err "gguf-reap: error: $twice: the same build as OUT $WORK/keep8.gguf (the same header bytes), given twice; give each build once"
    ! grep -q '^base\|^kld' "$WORK/calls" && _pass || _fail "llama-perplexity ran: $(cat "$WORK/calls")"
    [ ! -e "$WORK/twice" ] && _pass || _fail "the refused eval left $(find "$WORK/twice")"
done
rm -f "$WORK/keep8-copy.gguf"

case_ "a killed eval's temporaries (of the same -o, and in the cache) are removed by the next run; a live one's stay"
mkdir -p "$WORK/killed"
DEAD=$(sh -c 'echo $$')  # a process that has exited
for f in ".beh.json.gguf-reap-tmp.$DEAD.0" ".beh.svg.gguf-reap-tmp.$DEAD.1" \
    ".beh.generations.jsonl.gguf-reap-tmp.$DEAD.2"; do
    : >"$WORK/killed/$f"
done
: >"$WORK/cache/.text.stdin.gguf-reap-tmp.$DEAD.3"
: >"$WORK/killed/.beh.json.gguf-reap-tmp.$$.4"  # this shell's: alive
run "$BIN" eval --source "$M" "$WORK/keep8.gguf" "${TEXTS[@]}" --ctx 128 --chunks 8 --llama-bin "$FAKE" \
    --cache-dir "$WORK/cache" -o "$WORK/killed/beh.json"
expect_code 0
[ -z "$(find "$WORK/killed" "$WORK/cache" -name "*.gguf-reap-tmp.$DEAD.*")" ] && _pass ||
    _fail "left: $(find "$WORK/killed" "$WORK/cache" -name "*.gguf-reap-tmp.$DEAD.*")"
[ -e "$WORK/killed/.beh.json.gguf-reap-tmp.$$.4" ] && _pass || _fail "a live process's temporary was removed"
rm -f "$WORK/killed/.beh.json.gguf-reap-tmp.$$.4"

case_ "invalid UTF-8 in a panel, as docs/eval.md says: at the bad byte, in lines and in .jsonl; an escape that is no character as invalid JSON"
printf 'hello\nab\377cd\n' >"$WORK/utf8.txt"
printf '{"prompt": "ok"}\n{"prompt": "a\377b"}\n' >"$WORK/utf8.jsonl"
printf '{"prompt": "a\\ud800b"}\n' >"$WORK/surrogate.jsonl"
for p in "utf8.txt|line 2 at offset 8 (0x8): not valid UTF-8" \
    "utf8.jsonl|line 2 at offset 30 (0x1e): not valid UTF-8 (a .jsonl line is JSON, UTF-8)" \
    "surrogate.jsonl|line 1 at offset 0 (0x0): not a JSON object (a .jsonl panel has one per line)"; do
    run "$BIN" eval --source "$M" "$WORK/keep8.gguf" --prompts p="$WORK/${p%%|*}" --llama-bin "$FAKE"
    expect_code 2
    expect_err_lines 1
    expect_err "gguf-reap: error: $WORK/${p%%|*}: ${p#*|}"
done

case_ "card --eval refuses a plot that is not the eval's (eval.json records its sha256)"
cp "$WORK/eval.json" "$WORK/svgcheck.json"
cp "$WORK/eval.svg" "$WORK/svgcheck.svg"
"$BIN" -q audit "$WORK/keep8.gguf" --source "$M" --json >"$WORK/audit8.json"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/svgcheck.json"
expect_code 0
echo '<svg xmlns="http://www.w3.org/2000/svg"/>' >"$WORK/eval.svg.other"
sed -i 's/"svg": "eval.svg"/"svg": "svgcheck.svg"/' "$WORK/svgcheck.json"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/svgcheck.json"
expect_code 0
cp "$WORK/eval.svg.other" "$WORK/svgcheck.svg"
run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/svgcheck.json"
expect_code 2
expect_err_lines 1
expect_err "svgcheck.svg: files.svg_sha256: the plot's sha256 is not the"
expect_err "that svgcheck.json records: it is not this eval's plot"

case_ "an OUT of another source"
"$GEN" model --skeleton --preset demo -o "$WORK/other.gguf" >/dev/null
run "$BIN" eval --source "$M" "$WORK/other.gguf" "${TEXTS[@]}" --llama-bin "$FAKE" --cache-dir "$WORK/cache"
expect_code 2
expect_err_lines 1
expect_err "$WORK/other.gguf"

case_ "llama-perplexity fails: exit 3 with its last lines"
run env FAKE_LLAMA_MODE=fail "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
    --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache" -o "$WORK/fail.json"
expect_code 3
expect_err "printed 0 of 8 chunk rows and no complete summary; its last lines:"
expect_err "E kl_divergence: failed to open missing.kld"
[ ! -e "$WORK/fail.json" ] && _pass || _fail "fail.json written"
run env FAKE_LLAMA_MODE=exit1 "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
    --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache"
expect_code 3
expect_err "failed (exit code 1); its last lines:"

case_ "no room for the base logits: exit 2 before llama-perplexity writes them"
# The fault shim makes statvfs report a nearly full disk (what a real one can say); eval's own free-space
# check must refuse. One byte short is refused, exactly enough is not.
if part shim "the disk-full refusal (needs the fault shim, GGUF_REAP_FAULT_SHIM, which CTest sets)" have_shim; then
    mkdir -p "$WORK/cache-full"
    : >"$WORK/calls"
    faulty FAULT_FREE_BYTES=4136915 FAULT_PATH="$WORK/cache-full" "$BIN" eval --source "$M" "$WORK/keep8.gguf" \
        --text python="$WORK/python.heldout.txt" --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache-full"
    expect_code 2
    expect_err_lines 1
    expect_err "the base logits of --text python need 3.9 MiB (4136916 bytes) in $WORK/cache-full, which has 3.9 MiB free"
    ! grep -q '^base' "$WORK/calls" && _pass || _fail "llama-perplexity ran its base run: $(cat "$WORK/calls")"
    [ -z "$(ls -A "$WORK/cache-full")" ] && _pass || _fail "the cache holds $(ls -A "$WORK/cache-full")"
    faulty FAULT_FREE_BYTES=4136960 FAULT_PATH="$WORK/cache-full" "$BIN" eval --source "$M" "$WORK/keep8.gguf" \
        --text python="$WORK/python.heldout.txt" --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache-full"
    expect_code 0
    case_ "the report cannot be written after every run: exit 3, the figures still on stdout, no eval.json"
    faulty FAULT_OP=write FAULT_PATH=".late.json.gguf-reap-tmp" FAULT_ERRNO=ENOSPC "$BIN" eval --source "$M" \
        "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" --ctx 128 --chunks 8 --llama-bin "$FAKE" \
        --cache-dir "$WORK/cache" -o "$WORK/late.json"
    expect_code 3
    expect_out "keep8.gguf"
    expect_out "0.8657"
    expect_err "$WORK/late.json: not written ("
    expect_err "No space left on device); the figures on stdout are this eval's"
    [ ! -e "$WORK/late.json" ] && [ ! -e "$WORK/late.svg" ] && _pass || _fail "late.json or late.svg written"
    [ -z "$(ls -A "$WORK" | grep 'gguf-reap-tmp')" ] && _pass || _fail "temporaries left: $(ls -A "$WORK")"
fi

case_ "interrupted: 130, the child ended, no eval.json and no base file under its final name"
rm -f "$WORK/calls.pid"
FAKE_LLAMA_MODE=sleep "$BIN" eval --source "$M" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
    --ctx 128 --chunks 8 --llama-bin "$FAKE" --cache-dir "$WORK/cache2" -o "$WORK/int.json" >"$OUT" 2>"$ERR" &
pid=$!
wait_for "llama-perplexity's start (its pid in calls.pid)" test -s "$WORK/calls.pid"
kill -INT $pid
CODE=0
wait $pid || CODE=$?
expect_code 130
child=$(cat "$WORK/calls.pid" 2>/dev/null)
[ -n "$child" ] && ! kill -0 "$child" 2>/dev/null && _pass || _fail "the fake llama-perplexity ($child) still runs"
[ ! -e "$WORK/int.json" ] && _pass || _fail "int.json written"
[ -z "$(ls "$WORK/cache2" | grep -v '^\.' | grep '\.kld$')" ] && _pass || _fail "a base file under its final name: $(ls -a "$WORK/cache2")"

# With llama.cpp: the same eval through the real tools, against the same commands run by hand.
if part llama "the real llama.cpp run $(live_why)" [ -n "$REAL" ]; then
    case_ "real llama.cpp: eval on two builds and two texts equals llama-perplexity run by hand"
    mkdir -p "$WORK/real" "$WORK/counting"
    # A wrapper that counts the base runs (--kl-divergence-base without --kl-divergence), then runs the
    # real tool with the same arguments.
    cat >"$WORK/counting/llama-perplexity" <<SH
#!/usr/bin/env bash
case " \$* " in *" --kl-divergence "*) ;; *" --kl-divergence-base "*) echo base >>"$WORK/real-base-runs" ;; esac
exec "$REAL/llama-perplexity" "\$@"
SH
    chmod +x "$WORK/counting/llama-perplexity"
    ln -s "$REAL/llama-tokenize" "$WORK/counting/llama-tokenize"
    run "$BIN" eval --source "$M" "$WORK/keep12.gguf" "$WORK/keep8.gguf" "${TEXTS[@]}" --ctx 128 --chunks 8 \
        --llama-bin "$WORK/counting" --cache-dir "$WORK/real-cache" -o "$WORK/real/eval.json"
    expect_code 0
    [ "$(wc -l <"$WORK/real-base-runs")" -eq 2 ] && _pass || _fail "base runs: $(wc -l <"$WORK/real-base-runs"), expected 2 (one per text)"
    [ -s "$WORK/real/eval.svg" ] && _pass || _fail "no eval.svg"
    cp "$WORK/real/eval.json" "$WORK/real.json"
    cp "$WORK/real.json" "$OUT"
    expect_json 'all(not t["base_cached"] for t in d["texts"]) and len(set(t["base_file"] for t in d["texts"])) == 2'
    for t in python c; do
        "$REAL/llama-perplexity" -m "$M" -f "$WORK/$t.heldout.txt" -c 128 -b 2048 --chunks 8 --no-escape \
            --kl-divergence-base "$WORK/$t.byhand.kld" >"$WORK/$t.base.log" 2>&1
        for k in 12 8; do
            # By hand as eval does it: llama.cpp's logger may lose the summary's last lines, so until it is whole.
            for _ in 1 2 3; do
                "$REAL/llama-perplexity" -m "$WORK/keep$k.gguf" -f "$WORK/$t.heldout.txt" -c 128 -b 2048 --chunks 8 \
                    --no-escape --kl-divergence-base "$WORK/$t.byhand.kld" --kl-divergence >"$WORK/$k.$t.log" 2>&1
                grep -q '^Same top p:' "$WORK/$k.$t.log" && break
            done
            kld=$(sed -n 's/^Mean    KLD: *\([0-9.]*\) .*/\1/p' "$WORK/$k.$t.log")
            top=$(sed -n 's/^Same top p: *\([0-9.]*\) .*/\1/p' "$WORK/$k.$t.log")
            expect_json "[(r['kld']['mean'], r['same_top']['mean']) for r in d['runs'] if r['output'].endswith('keep$k.gguf') and r['text'] == '$t'] == [($kld, $top)]"
        done
    done
    case_ "real llama.cpp: its figures are the recorded ones the fakes replay (tests/data/llama-perplexity)"
    # The recordings come from this build (tools/record-llama.sh): the eval replayed at the top and this
    # real one must agree on every figure, or the replayed tests check another build's numbers.
    expect_json '[(r["output"], r["text"], r["kld"], r["same_top"], r["ppl"]) for r in d["runs"]] == [(r["output"], r["text"], r["kld"], r["same_top"], r["ppl"]) for r in json.load(open("'"$WORK/eval.json"'"))["runs"]]'
    case_ "real llama.cpp: --reference figures are the recorded ones too"
    run "$BIN" eval --source "$M" "$WORK/keep12.gguf" "$WORK/keep8.gguf" "${TEXTS[@]}" --reference "$F16" --ctx 128 \
        --chunks 8 --llama-bin "$REAL" --cache-dir "$WORK/real-cache" --json
    expect_code 0
    expect_json '[(r["output"].split("/")[-1], r["text"], r["kld"], r["same_top"], r["ppl"]) for r in d["reference_runs"]] == [(r["output"].split("/")[-1], r["text"], r["kld"], r["same_top"], r["ppl"]) for r in json.load(open("'"$WORK/ref/eval.json"'"))["reference_runs"]]'
    case_ "real llama.cpp: a second ratio reuses the base logits (base computed once per text)"
    run "$BIN" eval --source "$M" "$WORK/keep12.gguf" "${TEXTS[@]}" --ctx 128 --chunks 8 --llama-bin "$REAL" \
        --cache-dir "$WORK/real-cache" --json
    expect_code 0
    expect_json 'all(t["base_cached"] for t in d["texts"])'
    case_ "real llama.cpp: the smoke test's tokens are llama-completion's greedy tokens, as recorded"
    run "$BIN" eval --source "$M" "$WORK/keep12.gguf" "$WORK/keep8.gguf" --text python="$WORK/python.heldout.txt" \
        --ctx 128 --chunks 8 --llama-bin "$REAL" --cache-dir "$WORK/real-cache" --smoke-prompt 'def main(' --json
    expect_code 0
    # llama.cpp's logger may lose the last tokens it prints at exit: by hand until the text is all there.
    want_len=$(/usr/bin/python3 -c 'import json, sys; print(len("def main(" + json.load(open(sys.argv[1]))["smoke"]["source"]["text"]))' "$OUT")
    for _ in 1 2 3 4 5; do
        "$REAL/llama-completion" -m "$M" -p 'def main(' -n 16 --temp 0 --top-k 1 -s 1 -no-cnv --no-warmup \
            >"$WORK/smoke-byhand.out" 2>/dev/null
        [ "$(/usr/bin/python3 -c 'import sys; print(len(open(sys.argv[1], encoding="utf-8").read()))' "$WORK/smoke-byhand.out")" -ge "$want_len" ] && break
    done
    expect_json 'open("'"$WORK/smoke-byhand.out"'", encoding="utf-8").read().startswith("def main(" + d["smoke"]["source"]["text"])'
    expect_json "[t['id'] for t in d['smoke']['source']['tokens']] == $(session_ids source)"
    expect_json "[t['id'] for t in d['outputs'][0]['smoke']['tokens']] == $(session_ids keep12)"
    expect_json "[t['id'] for t in d['outputs'][1]['smoke']['tokens']] == $(session_ids keep8)"
    case_ "real llama.cpp: card --eval"
    run "$BIN" card "$WORK/keep8.gguf" --source "$M" --rank "$WORK/rank8" --audit "$WORK/audit8.json" --eval "$WORK/real/eval.json"
    expect_code 0
    expect_out "## Measured against the source"
fi
finish
