# The text summaries of inspect, rank, splice, audit and estimate, and a model card, compared whole
# against tests/golden/*.txt, on inputs the generator makes the same way every time; and the main
# refusals of each command, their exit code and every stderr line, against tests/golden/*-refusals.txt.
# Paths are written as <WORK>, timings as <TIME>. After a deliberate change of a summary or a message,
# regenerate the files with
#   tools/regen-golden.sh [BUILD_DIR]
# and read the diff before committing it. REGEN_GOLDEN=1 (what that script sets) rewrites the files
# instead of comparing them, so it makes this test pass whatever the output: under CI=true it fails.
# ctest-parts: trained
source "$(dirname "$0")/lib.sh"
GOLDEN=$(cd "$(dirname "$0")/../golden" && pwd)
if [ -n "${REGEN_GOLDEN:-}" ] && [ "${CI:-}" = true ]; then
    echo "FAIL: REGEN_GOLDEN is set under CI=true: the goldens would be rewritten, not compared" >&2
    exit 1
fi

normalise() { sed -e "s|$WORK|<WORK>|g" -e 's/^time  *[0-9.]* s ([0-9.]* GB\/s)$/time     <TIME>/'; }

# compare NAME: $WORK/NAME.txt against tests/golden/NAME.txt (or, with REGEN_GOLDEN, written there).
compare() {
    local name=$1
    if [ -n "${REGEN_GOLDEN:-}" ]; then
        cp "$WORK/$name.txt" "$GOLDEN/$name.txt"
        _pass
    elif diff -u "$GOLDEN/$name.txt" "$WORK/$name.txt" >"$WORK/diff"; then
        _pass
    else
        _fail "differs from tests/golden/$name.txt:
$(head -40 "$WORK/diff")"
    fi
}

# golden NAME CMD...: runs CMD (exit 0 expected) and compares its normalised stdout with NAME.txt.
golden() {
    local name=$1
    shift
    case_ "golden $name"
    run "$@"
    expect_code 0
    normalise <"$OUT" >"$WORK/$name.txt"
    compare "$name"
}

# refuses NAME ARGS...: `gguf-reap ARGS` must fail with nothing on stdout; the command line, the exit
# code and the whole of stderr are added to $WORK/NAME-refusals.txt, which `refusals NAME` compares.
refuses() {
    local name=$1
    shift
    case_ "refusal: $name $*"
    run "$BIN" "$@"
    [ "$CODE" -ne 0 ] && _pass || _fail "exit code 0, expected a refusal"
    expect_no_out
    { echo "\$ gguf-reap $*" && echo "exit $CODE" && cat "$ERR" && echo; } | normalise >>"$WORK/$name-refusals.txt"
}
refusals() {
    case_ "golden $1-refusals"
    compare "$1-refusals"
}

# Kimi-K2's layout at the demo size, in two shards, and two calibration domains.
"$GEN" model --skeleton --preset demo --shards 2 -o "$WORK/model" >/dev/null
M=$WORK/model-00001-of-00002.gguf
"$GEN" imatrix --model "$M" --domain chat --seed 7 --dead-per-block 2 --super 3:5 -o "$WORK/chat.imatrix.gguf" >/dev/null
"$GEN" imatrix --model "$M" --domain code --seed 7 --dead-per-block 2 -o "$WORK/code.imatrix.gguf" >/dev/null

golden inspect-model "$BIN" inspect "$M"
golden inspect-imatrix "$BIN" inspect "$WORK/chat.imatrix.gguf"
golden rank "$BIN" rank --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" \
    --imatrix code="$WORK/code.imatrix.gguf" --ratio 25% -o "$WORK/rank"
golden splice-dry-run "$BIN" splice "$M" --keeplist "$WORK/rank/keeplist.json" -o "$WORK/pruned" --dry-run
golden splice "$BIN" -q splice "$M" --keeplist "$WORK/rank/keeplist.json" -o "$WORK/pruned"
golden audit "$BIN" audit "$WORK/pruned-00001-of-00002.gguf" --source "$M"
golden audit-structure "$BIN" audit "$WORK/pruned-00002-of-00002.gguf"
golden estimate "$BIN" estimate "$M" --keeplist "$WORK/rank/keeplist.json" --tp 2,4 --gpu-mem 24GiB \
    --overhead 1GiB --ctx 8192

# The model card of a tiny Kimi-K3-shaped build (896 experts, 16 used, 1 shared). Everything runs inside
# one directory with relative paths: keeplist.json records its imatrix paths, and its sha256 is both in
# the card and in the output's provenance key, so a temporary directory in them would change every
# hash. The audit's date is input to the card and changes every run: it is fixed here.
K3=$WORK/k3
mkdir -p "$K3/out"
ABS_BIN=$(realpath "$BIN")
ABS_GEN=$(realpath "$GEN")
(
    cd "$K3" || exit 1
    "$ABS_GEN" model --skeleton --preset kimi-k3 --blocks 4 --embd 32 --expert-ff 32 --vocab 64 --shards 2 -o m >/dev/null
    "$ABS_GEN" imatrix --model m-00001-of-00002.gguf --domain chat --seed 1 --dead-per-block 2 --super 1:5 \
        -o chat.imatrix.gguf >/dev/null
    "$ABS_GEN" imatrix --model m-00001-of-00002.gguf --domain code --seed 1 --dead-per-block 2 -o code.imatrix.gguf >/dev/null
    "$ABS_BIN" -q rank --model m-00001-of-00002.gguf --imatrix chat=chat.imatrix.gguf --imatrix code=code.imatrix.gguf \
        --ratio 50% -o rank >/dev/null
    "$ABS_BIN" -q splice m-00001-of-00002.gguf --keeplist rank/keeplist.json -o out/Kimi-K3-REAP-Q8_0 >/dev/null
    "$ABS_BIN" -q audit out/Kimi-K3-REAP-Q8_0-00001-of-00002.gguf --source m-00001-of-00002.gguf \
        --manifest-out out/MANIFEST.json --json | sed 's/"date": "[^"]*"/"date": "2026-01-02T03:04:05Z"/' >audit.json
)
golden card "$BIN" card "$K3/out/Kimi-K3-REAP-Q8_0-00001-of-00002.gguf" --source "$K3/m-00001-of-00002.gguf" \
    --rank "$K3/rank" --audit "$K3/audit.json" --manifest "$K3/out/MANIFEST.json" --base-model org/Kimi-K3 \
    --tp 2,4,8 --gpu-mem 4MiB --overhead 1MiB --ctx 4096 --note "Synthetic weights: the generator's, not a trained model."

# The main refusals of each command: bad input exits 2 with one line naming the file, the offset and the
# field; a missing file exits 3; a usage error exits 2 with CLI11's line and the pointer to --help.
"$GEN" model --skeleton --preset tiny -o "$WORK/other.gguf" >/dev/null
"$GEN" imatrix --model "$WORK/other.gguf" -o "$WORK/other.imatrix.gguf" >/dev/null
head -c 100 "$M" >"$WORK/cut.gguf"
echo hello >"$WORK/text.gguf"
printf '{"drop": {"1": [0' >"$WORK/bad.json"
"$BIN" -q audit "$M" --manifest-out "$WORK/source.json" >/dev/null
sed 's/"version": 2/"version": 1/' "$WORK/source.json" >"$WORK/v1.json"
P=$WORK/pruned-00001-of-00002.gguf

refuses inspect inspect
refuses inspect inspect "$WORK/none.gguf"
refuses inspect inspect "$WORK/cut.gguf"
refuses inspect inspect "$WORK/text.gguf"
refusals inspect

refuses rank rank --imatrix chat="$WORK/chat.imatrix.gguf" -o "$WORK/r"
refuses rank rank --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" --keep 0 -o "$WORK/r"
refuses rank rank --model "$M" --imatrix chat="$WORK/other.imatrix.gguf" --prune 1 -o "$WORK/r"
refuses rank rank --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" --imatrix chat="$WORK/code.imatrix.gguf" \
    --prune 1 -o "$WORK/r"
refuses rank rank --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" --criterion nope --prune 1 -o "$WORK/r"
refusals rank

refuses splice splice "$WORK/other.gguf" --keeplist "$WORK/rank/keeplist.json" -o "$WORK/o"
refuses splice splice "$M" --keeplist "$WORK/bad.json" -o "$WORK/o"
refuses splice splice "$M" --keeplist "$WORK/rank/keeplist.json" -o "$WORK/pruned"
refuses splice splice "$M" --keeplist "$WORK/rank/keeplist.json" -o "$WORK/model"
refusals splice

refuses audit audit "$P" --manifest "$WORK/bad.json"
refuses audit audit "$P" --source-manifest "$WORK/v1.json"
refuses audit audit "$P" --source "$M" --keeplist "$WORK/other.imatrix.gguf"
refusals audit

refuses estimate estimate "$M" --tp 0
refuses estimate estimate "$M" --gpu-mem lots
refuses estimate estimate "$M" --gpu-mem 80
refuses estimate estimate "$M" --fit size=3.5
refuses estimate estimate "$M" --keeplist "$WORK/bad.json"
refusals estimate

refuses card card "$P"
refuses card card "$P" --source "$M" --rank "$WORK/rank" --audit "$WORK/bad.json"
refuses card card "$P" --source "$WORK/other.gguf" --rank "$WORK/rank"
refusals card

refuses plan-width plan-width --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" -o "$WORK/w"
refuses plan-width plan-width --model "$M" --imatrix chat="$WORK/chat.imatrix.gguf" --k 100000 -o "$WORK/w"
refuses plan-width plan-width --model "$M" --imatrix chat="$WORK/other.imatrix.gguf" --k 16 -o "$WORK/w"
refusals plan-width
# A card with its "Measured against the source" section: the trained Q8_0 fixture pruned to 8 experts
# (ranked on its five domains, as the recorded build was), measured by `eval` through tests/cli/fake-llama
# (the llama-perplexity and llama-completion runs recorded from llama.cpp 34af94cd9, replayed). Relative paths only, the imatrices linked in: the keeplist records its inputs'
# paths and eval.json its commands, and both sha256 are in the card, so an absolute path (the fixtures
# are elsewhere on CI) would change them.
TR=$(realpath "$FIX/trained" 2>/dev/null || echo "$FIX/trained")
if part trained "the golden card with a measured section (no $TR)" [ -f "$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf" ]; then
    EV=$WORK/ev
    mkdir -p "$EV/fake"
    cp "$(dirname "$0")"/fake-llama/* "$EV/fake/"
    DATA=$(cd "$(dirname "$0")/../data/llama-perplexity" && pwd)
    (
        cd "$EV" || exit 1
        ln -s "$TR/models/tiny-qwen3moe-trained-A-Q8_0.gguf" m.gguf
        IM=()
        for d in c changelog legal markdown python; do
            ln -s "$TR/imatrix/tiny-qwen3moe-trained-A.$d.imatrix.gguf" $d.imatrix.gguf
            IM+=(--imatrix $d=$d.imatrix.gguf)
        done
        cp "$TR/corpora/python.heldout.txt" "$TR/corpora/c.heldout.txt" .
        "$ABS_BIN" -q rank --model m.gguf "${IM[@]}" --keep 8 -o rank >/dev/null 2>&1
        "$ABS_BIN" -q splice m.gguf --keeplist rank/keeplist.json -o keep8 >/dev/null
        "$ABS_BIN" -q audit keep8.gguf --source m.gguf --json | sed 's/"date": "[^"]*"/"date": "2026-01-02T03:04:05Z"/' >audit.json
        FAKE_LLAMA_DATA=$DATA "$ABS_BIN" -q eval --source m.gguf keep8.gguf --text python=python.heldout.txt \
            --text c=c.heldout.txt --ctx 128 --chunks 8 --llama-bin fake --cache-dir cache --smoke-prompt 'def main(' \
            -o eval.json >/dev/null
    )
    golden card-measured "$BIN" card "$EV/keep8.gguf" --source "$EV/m.gguf" --rank "$EV/rank" --audit "$EV/audit.json" \
        --eval "$EV/eval.json" --base-model org/tiny-qwen3moe-trained-A
fi
finish
