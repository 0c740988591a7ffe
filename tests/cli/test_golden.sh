# The text summaries of inspect, rank, splice, audit and estimate, compared whole against
# tests/golden/*.txt, on inputs the generator makes the same way every time. Paths are written as
# <WORK>, timings as <TIME>. After a deliberate change of a summary, regenerate the files with
#   tools/regen-golden.sh [BUILD_DIR]
# and read the diff before committing it.
source "$(dirname "$0")/lib.sh"
GOLDEN=$(cd "$(dirname "$0")/../golden" && pwd)

# golden NAME CMD...: runs CMD (exit 0 expected) and compares its normalised stdout with NAME.txt.
golden() {
    local name=$1
    shift
    case_ "golden $name"
    run "$@"
    expect_code 0
    sed -e "s|$WORK|<WORK>|g" -e 's/^time  *[0-9.]* s ([0-9.]* GB\/s)$/time     <TIME>/' "$OUT" >"$WORK/$name.txt"
    if [ -n "${REGEN_GOLDEN:-}" ]; then
        cp "$WORK/$name.txt" "$GOLDEN/$name.txt"
        _pass
    elif diff -u "$GOLDEN/$name.txt" "$WORK/$name.txt" >"$WORK/diff"; then
        _pass
    else
        _fail "stdout differs from tests/golden/$name.txt:
$(head -40 "$WORK/diff")"
    fi
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
finish
