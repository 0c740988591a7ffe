# gguf-reap splice refusals: every keeplist mismatch, bad options, outputs that would alias inputs or
# overwrite files, I/O failures. Each is one line on stderr with its exit code, and writes nothing.
# ctest-parts: fixtures
source "$(dirname "$0")/lib.sh"

no_output() {  # no file under $WORK/out at all (final names or temporaries)
    [ -z "$(ls -A "$WORK/out" 2>/dev/null)" ] && _pass || _fail "left files: $(ls -A "$WORK/out")"
}
mkdir -p "$WORK/out"

case_ "neither --keeplist nor --neuron-plan is a usage error"
run "$BIN" splice "$WORK/m.gguf" -o "$WORK/out/o"
expect_code 2
expect_err "splice needs --keeplist, --neuron-plan or both: nothing to prune"

if fixtures "the cases on the llama.cpp-made fixtures"; then
    M=$FIX/models/tiny-deepseek2-Q8_0.gguf
    DEAD=$FIX/prune_specs/tiny-deepseek2.drop-dead.json
    K=$WORK/k.json

    refused() {  # refused "case" 'keeplist json' "expected stderr"
        case_ "$1"
        printf '%s' "$2" >"$K"
        run "$BIN" splice "$M" --keeplist "$K" -o "$WORK/out/o"
        expect_code 2
        expect_err "gguf-reap: error: $K: $3"
        expect_err_lines 1
        no_output
    }
    SRC='"source": {"architecture": "deepseek2", "expert_count": 16}'
    refused "architecture mismatch" '{"format": "gguf-reap.keeplist", "version": 1, "source": {"architecture": "qwen3moe", "expert_count": 16}, "blocks": []}' \
        "source.architecture: ranked on a model with architecture 'qwen3moe', but $M has architecture 'deepseek2'"
    refused "expert_count mismatch" '{"format": "gguf-reap.keeplist", "version": 1, "source": {"architecture": "deepseek2", "expert_count": 13}, "blocks": []}' \
        "source.expert_count: ranked on a model with 13 experts per block, but $M has 16"
    refused "a MoE block missing" '{"drop": {"1": [3, 7, 12], "2": [0, 9, 14]}}' \
        "block 3 of the model has experts but is missing from the keeplist"
    refused "a block that is not a MoE block" '{"drop": {"0": [1], "1": [3, 7, 12], "2": [0, 9, 14], "3": [5, 10, 15]}}' \
        "block 0 is in the keeplist but is not an MoE block of the model"
    refused "an id out of range" '{"drop": {"1": [3, 7, 16], "2": [0, 9, 14], "3": [5, 10, 15]}}' \
        "block 1: dropped id 16 is out of range (the model has experts 0..15)"
    refused "an id twice" "{\"format\": \"gguf-reap.keeplist\", \"version\": 1, $SRC, \"blocks\": [{\"block\": 1, \"keep\": [0, 1, 1, 2]}, {\"block\": 2, \"keep\": [0, 1, 2, 3]}, {\"block\": 3, \"keep\": [0, 1, 2, 3]}]}" \
        "block 1: kept id 1 is listed twice"
    refused "different counts per block" '{"drop": {"1": [3, 7], "2": [0, 9, 14], "3": [5, 10, 15]}}' \
        "block 2 keeps 13 experts but block 1 keeps 14: llama.cpp's expert_count is one number for every block"
    refused "fewer than expert_used_count" '{"drop": {"1": [0,1,2,3,4,5,6,7,8,9,10,11,12], "2": [0,1,2,3,4,5,6,7,8,9,10,11,12], "3": [0,1,2,3,4,5,6,7,8,9,10,11,12]}}' \
        "keeps 3 experts per block, fewer than expert_used_count = 4 (llama.cpp requires expert_used_count <= expert_count)"
    refused "kept ids out of order" "{\"format\": \"gguf-reap.keeplist\", \"version\": 1, $SRC, \"blocks\": [{\"block\": 1, \"keep\": [1, 0, 2, 3]}, {\"block\": 2, \"keep\": [0, 1, 2, 3]}, {\"block\": 3, \"keep\": [0, 1, 2, 3]}]}" \
        "block 1: kept ids must be in ascending order (source order is preserved)"

    case_ "keeplist that is not JSON names the byte offset"
    printf '{"drop": {"1": [3, 7,' >"$K"
    run "$BIN" splice "$M" --keeplist "$K" -o "$WORK/out/o"
    expect_code 2
    expect_err "gguf-reap: error: $K: json at offset"
    no_output

    case_ "split options exclude each other"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/out/o" --split-count 2 --split-max-tensors 3
    expect_code 2
    expect_err "gguf-reap: error: --split-max-size, --split-count and --split-max-tensors exclude each other: give one"
    no_output

    case_ "a size that is not a size"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/out/o" --split-max-size 40Q
    expect_code 2
    expect_err "gguf-reap: error: --split-max-size '40Q' is not a size (write e.g. 141GiB, 80GB, 512MB; units: B, KB, MB, GB, TB (or K, M, G, T) and KiB, MiB, GiB, TiB)"

    case_ "-o DIR/ (a directory, no name for the shards) is refused; nothing is written, no hidden DIR/.gguf"
    mkdir -p "$WORK/out/dir"
    for o in "$WORK/out/dir/" "$WORK/out/dir/.gguf" "$WORK/out/dir/." "$WORK/out/dir/.."; do
        run "$BIN" splice "$M" --keeplist "$DEAD" -o "$o"
        expect_code 2
        expect_err_lines 1
        expect_err "gguf-reap: error: -o $o: a directory, not a name for the shards; give one after it, e.g. "
        expect_err "NAME (NAME-00001-of-0000N.gguf, or NAME.gguf for one shard)"
        [ -z "$(ls -A "$WORK/out/dir")" ] && _pass || _fail "-o $o wrote $(ls -A "$WORK/out/dir")"
    done
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/out/dir/" --dry-run
    expect_code 2
    expect_err "gguf-reap: error: -o $WORK/out/dir/: a directory, not a name for the shards; give one after it, e.g. $WORK/out/dir/NAME ("
    rmdir "$WORK/out/dir"

    case_ "more shards than tensors"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/out/o" --split-count 100
    expect_code 2
    expect_err "gguf-reap: error: cannot write 70 tensors into 100 shards: every shard needs a tensor"
    no_output

    case_ "--imatrix-in without --imatrix-out"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/out/o" --imatrix-in "$FIX/imatrix/tiny-deepseek2.all.imatrix.gguf"
    expect_code 2
    expect_err "gguf-reap: error: --imatrix-in and --imatrix-out go together: give both or neither"

    case_ "an unknown copy method"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/out/o" --copy-method dd
    expect_code 2
    expect_err "gguf-reap: error: --copy-method 'dd': expected auto, copy_file_range or pread"

    case_ "an imatrix given as the model"
    run "$BIN" splice "$FIX/imatrix/tiny-deepseek2.all.imatrix.gguf" --keeplist "$DEAD" -o "$WORK/out/o"
    expect_code 2
    expect_err "the model has no MoE blocks: there are no experts to remove"

    case_ "the output is the input (through a symlink)"
    cp "$M" "$WORK/m.gguf"
    ln -s "$WORK/m.gguf" "$WORK/out/o.gguf"
    run "$BIN" splice "$WORK/m.gguf" --keeplist "$DEAD" -o "$WORK/out/o" --force
    expect_code 2
    expect_err "gguf-reap: error: $WORK/out/o.gguf: is the same file as the input $WORK/m.gguf (an output never overwrites an input)"
    cmp -s "$M" "$WORK/m.gguf" && _pass || _fail "the input changed"
    rm "$WORK/out/o.gguf"

    case_ "the pruned imatrix would overwrite the source imatrix"
    cp "$FIX/imatrix/tiny-deepseek2.all.imatrix.gguf" "$WORK/i.gguf"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/out/o" --imatrix-in "$WORK/i.gguf" --imatrix-out "$WORK/i.gguf" --force
    expect_code 2
    expect_err "gguf-reap: error: $WORK/i.gguf: is the same file as the input $WORK/i.gguf (an output never overwrites an input)"
    no_output

    case_ "an existing output needs --force"
    echo old >"$WORK/out/o.gguf"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/out/o"
    expect_code 2
    expect_err "gguf-reap: error: $WORK/out/o.gguf: already exists (use --force to replace it)"
    [ "$(cat "$WORK/out/o.gguf")" = old ] && _pass || _fail "existing output touched"
    rm "$WORK/out/o.gguf"

    case_ "an output name taken by a directory"
    mkdir "$WORK/out/d.gguf"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/out/d" --force
    expect_code 2
    expect_err "gguf-reap: error: $WORK/out/d.gguf: is a directory; an output file cannot replace it"
    rmdir "$WORK/out/d.gguf"

    case_ "a missing output directory is created, as rank -o creates its own"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/nope/o"
    expect_code 0
    [ -f "$WORK/nope/o.gguf" ] && _pass || _fail "no $WORK/nope/o.gguf"

    case_ "a write failure (file size limit, as a full disk) exits 3 and leaves nothing"
    run bash -c "ulimit -f 4000; trap '' XFSZ; exec \"$BIN\" splice \"$M\" --keeplist \"$DEAD\" -o \"$WORK/out/o\""
    expect_code 3
    expect_err "File too large"
    expect_err_lines 1
    no_output
fi
finish
