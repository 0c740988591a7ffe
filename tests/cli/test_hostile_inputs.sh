# Hostile and mismatched inputs through the real binary (docs/reliability.md "Inputs"): each one exits 2
# (bad input) or 3 (the system refused), prints one line that names the file and what to do, and writes
# nothing. Generated models only, so this runs without ../shared. Parser-level cases (ids, counts,
# depth) are in tests/hostile_inputs_test.cpp; alias and overwrite refusals in test_splice_errors.sh.
# ctest-parts: proc
source "$(dirname "$0")/lib.sh"

mkdir -p "$WORK/out"
no_output() {  # nothing under $WORK/out, final names or temporaries
    [ -z "$(ls -A "$WORK/out" 2>/dev/null)" ] && _pass || _fail "left files: $(ls -A "$WORK/out")"
}
"$GEN" model --skeleton -o "$WORK/m.gguf" >/dev/null || { echo "gen failed"; exit 1; }
"$GEN" imatrix --model "$WORK/m.gguf" -o "$WORK/m.imatrix.gguf" >/dev/null || exit 1
M=$WORK/m.gguf
DROP=$WORK/drop.json
printf '{"drop": {"1": [0], "2": [0], "3": [0]}}' >"$DROP"

refused() {  # refused "case" 'keeplist text' "expected stderr after the path"
    case_ "$1"
    printf '%s' "$2" >"$WORK/k.json"
    run "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$WORK/out/o"
    expect_code 2
    expect_err "gguf-reap: error: $WORK/k.json: $3"
    expect_err_lines 1
    no_output
}
refused "an expert id of 10^12" '{"drop": {"1": [1000000000000], "2": [0], "3": [0]}}' \
    "block 1: dropped id 1000000000000 is out of range (the model has experts 0..15)"
refused "expert_count 2^40" '{"version": 1, "source": {"architecture": "deepseek2", "expert_count": 1099511627776}, "blocks": []}' \
    "source.expert_count: ranked on a model with 1099511627776 experts per block, but $M has 16: a keeplist applies only to a model with the same architecture, expert layout and tensor names (another model, or an already pruned one?)"
refused "n_keep 10^12" '{"version": 1, "n_keep": 1000000000000, "blocks": [{"block": 1, "keep": [0,1,2,3]}, {"block": 2, "keep": [0,1,2,3]}, {"block": 3, "keep": [0,1,2,3]}]}' \
    "n_keep is 1000000000000 but the blocks keep 4 experts each"
refused "a negative id" '{"drop": {"1": [-1], "2": [0], "3": [0]}}' \
    "block 1: dropped id -1 is out of range (the model has experts 0..15)"
refused "a duplicate id" '{"drop": {"1": [4, 4], "2": [0, 1], "3": [0, 1]}}' \
    "block 1: dropped id 4 is listed twice"
refused "a non-integer id" '{"drop": {"1": [1.5], "2": [0], "3": [0]}}' \
    "drop.1[0]: expert id must be an integer, found 1.5"
refused "another architecture" '{"version": 1, "source": {"architecture": "qwen3moe", "expert_count": 16}, "blocks": []}' \
    "source.architecture: ranked on a model with architecture 'qwen3moe', but $M has architecture 'deepseek2'"

case_ "100,000 levels of nesting: refused on a scan of the text, no stack overflow"
/usr/bin/python3 -c "import sys; sys.stdout.write('[' * 100000 + ']' * 100000)" >"$WORK/deep.json"
run "$BIN" splice "$M" --keeplist "$WORK/deep.json" -o "$WORK/out/o"
expect_code 2
expect_err "gguf-reap: error: $WORK/deep.json: json at offset 64 (0x40): nested deeper than 64 levels"
no_output
run "$BIN" audit "$M" --source "$M" --keeplist "$WORK/deep.json"
expect_code 2
expect_err "gguf-reap: error: $WORK/deep.json: json at offset 64 (0x40): nested deeper than 64 levels"
/usr/bin/python3 -c "import sys; sys.stdout.write('{\"1\": ' + '[' * 100000 + ']' * 100000 + '}')" >"$WORK/deep-scores.json"
run "$BIN" rank --criterion external --scores p="$WORK/deep-scores.json" --model "$M" --keep 12 -o "$WORK/out/r"
expect_code 2
expect_err "gguf-reap: error: $WORK/deep-scores.json: json: nested deeper than 32 levels"
no_output

case_ "a keeplist over the 64 MiB cap is refused before it is read"
truncate -s 65M "$WORK/huge.json"
run "$BIN" splice "$M" --keeplist "$WORK/huge.json" -o "$WORK/out/o"
expect_code 2
expect_err "gguf-reap: error: $WORK/huge.json: file: 68157440 bytes is too large for a keeplist (limit 64 MiB)"
no_output

case_ "a keeplist of 33 million ids (64 MiB) is refused while parsing, in bounded memory"
/usr/bin/python3 -c "import sys; sys.stdout.write('{\"drop\": {\"1\": [' + '0,' * (32 * 1024 * 1024 - 100) + '0]}}')" >"$WORK/many.json"
run "$BIN" splice "$M" --keeplist "$WORK/many.json" -o "$WORK/out/o"
expect_code 2
expect_err "gguf-reap: error: $WORK/many.json: json: holds more than 4194304 values, more than any model's keeplist needs"
no_output
rm -f "$WORK/many.json"

case_ "a number beyond double range in a score file is bad input, not an internal error"
printf '{"1": {"reap": [1E400]}}' >"$WORK/of.json"
run "$BIN" rank --criterion external --scores p="$WORK/of.json" --model "$M" --keep 12 -o "$WORK/out/r"
expect_code 2
expect_err "gguf-reap: error: $WORK/of.json: json: not valid JSON ([json.exception.out_of_range.406] number overflow parsing '1E400')"

# imatrix files made for another model: fewer experts, more blocks, another expert width.
"$GEN" model --skeleton -o "$WORK/e8.gguf" --experts 8 --used 2 >/dev/null && "$GEN" imatrix --model "$WORK/e8.gguf" -o "$WORK/e8.imatrix.gguf" >/dev/null
"$GEN" model --skeleton -o "$WORK/b5.gguf" --blocks 5 >/dev/null && "$GEN" imatrix --model "$WORK/b5.gguf" -o "$WORK/b5.imatrix.gguf" >/dev/null
"$GEN" model --skeleton -o "$WORK/w32.gguf" --expert-ff 32 >/dev/null && "$GEN" imatrix --model "$WORK/w32.gguf" -o "$WORK/w32.imatrix.gguf" >/dev/null

case_ "rank --model with an imatrix of another model"
run "$BIN" rank --imatrix "$WORK/e8.imatrix.gguf" --model "$M" --prune 1 -o "$WORK/out/r"
expect_code 2
expect_err "gguf-reap: error: $WORK/e8.imatrix.gguf: blk.1.ffn_down_exps.weight has 8 experts, but $M has 16: the imatrix was made for another model"
no_output
run "$BIN" rank --imatrix "$WORK/b5.imatrix.gguf" --model "$M" --prune 1 -o "$WORK/out/r"
expect_code 2
expect_err "gguf-reap: error: $WORK/b5.imatrix.gguf: has expert data for block 4 (blk.4.ffn_down_exps.weight), which is not an MoE block of $M: was the imatrix made for another model?"
run "$BIN" rank --imatrix "$WORK/w32.imatrix.gguf" --model "$M" --prune 1 -o "$WORK/out/r"
expect_code 2
expect_err "blk.1.ffn_down_exps.weight has expert width 64 but the imatrix entry in $WORK/w32.imatrix.gguf has 32: the imatrix was made for another model"
no_output

case_ "splice --imatrix-in with an imatrix of another model"
run "$BIN" splice "$M" --keeplist "$DROP" -o "$WORK/out/o" --imatrix-in "$WORK/e8.imatrix.gguf" --imatrix-out "$WORK/out/o.imatrix"
expect_code 2
expect_err "gguf-reap: error: $WORK/e8.imatrix.gguf: tensor 'blk.1.ffn_down_exps.weight.in_sum2' at offset 1504 (0x5e0): has 8 rows, but the model has 16 experts per block"
expect_err_lines 1
no_output
run "$BIN" splice "$M" --keeplist "$DROP" -o "$WORK/out/o" --imatrix-in "$WORK/b5.imatrix.gguf" --imatrix-out "$WORK/out/o.imatrix"
expect_code 2
expect_err "is an expert entry for 'blk.4.ffn_down_exps.weight', which the model does not have (was the imatrix made for another model?)"
no_output
run "$BIN" splice "$M" --keeplist "$DROP" -o "$WORK/out/o" --imatrix-in "$WORK/w32.imatrix.gguf" --imatrix-out "$WORK/out/o.imatrix"
expect_code 2
expect_err "has 32 values per expert, but 'blk.1.ffn_down_exps.weight' has ne[0] = 64 (was the imatrix made for another model?)"
no_output
run "$BIN" splice "$M" --keeplist "$DROP" -o "$WORK/out/o" --imatrix-in "$WORK/e8.gguf" --imatrix-out "$WORK/out/o.imatrix"
expect_code 2
expect_err "gguf-reap: error: $WORK/e8.gguf: general.type: this GGUF file is a model, not an imatrix"
no_output

case_ "the output prefix is the source itself (split source, every shard name taken)"
"$GEN" model --skeleton -o "$WORK/s" --shards 2 >/dev/null
cp "$WORK/s-00001-of-00002.gguf" "$WORK/s1.bak"
run "$BIN" splice "$WORK/s-00001-of-00002.gguf" --keeplist "$DROP" -o "$WORK/s" --split-count 2 --force
expect_code 2
expect_err "gguf-reap: error: $WORK/s-00001-of-00002.gguf: is the same file as the input $WORK/s-00001-of-00002.gguf (an output never overwrites an input)"
cmp -s "$WORK/s1.bak" "$WORK/s-00001-of-00002.gguf" && _pass || _fail "the source changed"

case_ "an output name that is a symlink to the second source shard"
ln -s "$WORK/s-00002-of-00002.gguf" "$WORK/out/x-00002-of-00002.gguf"
run "$BIN" splice "$WORK/s-00001-of-00002.gguf" --keeplist "$DROP" -o "$WORK/out/x" --split-count 2 --force
expect_code 2
expect_err "gguf-reap: error: $WORK/out/x-00002-of-00002.gguf: is the same file as the input $WORK/s-00002-of-00002.gguf (an output never overwrites an input)"
rm "$WORK/out/x-00002-of-00002.gguf"

# Unwritable outputs. Tests run as root, for whom permission bits stop nothing: the directory is a
# regular file (ENOTDIR) or /proc, where nobody can create files.
touch "$WORK/file"
case_ "splice into a 'directory' that is a regular file: exit 3"
run "$BIN" splice "$M" --keeplist "$DROP" -o "$WORK/file/o"
expect_code 3
expect_err "gguf-reap: error: $WORK/file: create directory: Not a directory"
expect_err_lines 1
case_ "rank -o under a regular file: exit 3"
run "$BIN" rank --imatrix "$WORK/m.imatrix.gguf" --prune 1 -o "$WORK/file/r"
expect_code 3
expect_err "gguf-reap: error: $WORK/file/r: create directory: Not a directory"
case_ "audit --manifest-out under a regular file: exit 3, named by the path given"
"$BIN" splice "$M" --keeplist "$DROP" -o "$WORK/p" -q >/dev/null
run "$BIN" audit "$WORK/p.gguf" --source "$M" --manifest-out "$WORK/file/m.json"
expect_code 3
expect_err "gguf-reap: error: $WORK/file/m.json: create: Not a directory"
expect_err_lines 1
case_ "splice --imatrix-out under a regular file: exit 3, nothing written"
run "$BIN" splice "$M" --keeplist "$DROP" -o "$WORK/out/o" --imatrix-in "$WORK/m.imatrix.gguf" --imatrix-out "$WORK/file/o.imatrix"
expect_code 3
expect_err "gguf-reap: error: $WORK/file: output directory: Not a directory"
no_output
proc_refuses() { [ -d /proc/self ] && ! touch /proc/gguf-reap-probe 2>/dev/null; }
if part proc "the /proc case: /proc is missing or writable here" proc_refuses; then
    case_ "splice and rank into /proc: exit 3"
    run "$BIN" splice "$M" --keeplist "$DROP" -o /proc/o
    expect_code 3
    expect_err "gguf-reap: error: /proc: output directory: "
    expect_err_lines 1
    run "$BIN" rank --imatrix "$WORK/m.imatrix.gguf" --prune 1 -o /proc/r
    expect_code 3
    expect_err "gguf-reap: error: /proc/r: create directory: No such file or directory"
fi
finish
