# gguf-reap splice: dry run, real runs (text and JSON), split sets, imatrix, stdout/stderr discipline.
# ctest-parts: fixtures
source "$(dirname "$0")/lib.sh"

case_ "splice --help goes to stdout"
run "$BIN" splice --help
expect_code 0
expect_out "--keeplist"
expect_out "--split-max-size"
expect_out "--imatrix-out"

if fixtures "the cases on the llama.cpp-made fixtures"; then
    M=$FIX/models/tiny-deepseek2-Q8_0.gguf
    DEAD=$FIX/prune_specs/tiny-deepseek2.drop-dead.json

    case_ "dry run prints the plan with exact sizes and writes nothing"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/p" --dry-run
    expect_code 0
    expect_out "plan (dry run, nothing written)"
    expect_out "3 MoE blocks, 16 → 13 experts per block"
    expect_out "13,454,496"
    expect_out "tensors  70 (15 sliced, 195 expert slabs in 47 extents)"
    [ ! -e "$WORK/p.gguf" ] && _pass || _fail "dry run wrote a file"

    case_ "dry run --json is one document"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/p" --dry-run --json
    expect_code 0
    expect_json "d['dry_run'] and d['outputs'][0]['file_size'] == 13454496 and d['expert_count'] == 13 and 'seconds' not in d"

    case_ "real run: summary on stdout, nothing on stderr when it is not a terminal"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/p"
    expect_code 0
    expect_out "spliced $M: 3 MoE blocks, 16 → 13 experts per block"
    expect_out "written  12.8 MiB (13,454,496 bytes)"
    expect_out "GB/s"
    [ ! -s "$ERR" ] && _pass || _fail "stderr not empty"
    [ "$(stat -c %s "$WORK/p.gguf")" -eq 13454496 ] && _pass || _fail "size differs from the dry run"

    case_ "the output reads back: 13 experts, provenance keys"
    run "$BIN" inspect --json "$WORK/p.gguf"
    expect_code 0
    expect_json "d['expert_count'] == 13 and d['tensor_count'] == 70 and d['kv']['gguf_reap.source_expert_count'] == 16 and d['kv']['gguf_reap.version'].startswith('gguf-reap ') and len(d['kv']['gguf_reap.keeplist_sha256']) == 64"
    expect_json "d['kv']['gguf_reap.keeplist_sha256'] == '244a8c2a4dff4075cf1581ba2434a59ca4da241f71c61a6449dd6496e9dcc38f'"

    case_ "--json run: exactly one document with the figures"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/j" --json --no-provenance
    expect_code 0
    expect_json "d['shards'] == 1 and d['tensors'] == 70 and d['sliced_tensors'] == 15 and d['slabs'] == 195 and d['bytes_written'] == d['outputs'][0]['file_size'] and d['seconds'] > 0 and d['gb_per_s'] > 0"

    case_ "a split source gives as many shards by default, from any shard"
    run "$BIN" splice "$FIX/shards/tiny-deepseek2-IQ2_XXS-00003-of-00003.gguf" --keeplist "$DEAD" -o "$WORK/s" --json
    expect_code 0
    expect_json "d['shards'] == 3 and [o['path'].rsplit('/', 1)[1] for o in d['outputs']] == ['s-00001-of-00003.gguf', 's-00002-of-00003.gguf', 's-00003-of-00003.gguf']"
    run "$BIN" inspect --json "$WORK/s-00002-of-00003.gguf"
    expect_code 0
    expect_json "len(d['shards']) == 3 and d['expert_count'] == 13"

    case_ "--split-max-size, --split-max-tensors, --split-count"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/z" --split-max-size 4M --json
    expect_code 0
    expect_json "d['shards'] == 4 and all(o['file_size'] <= 4000000 or o['tensors'] == 1 for o in d['outputs'])"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/t" --split-max-tensors 30 --json --copy-method pread
    expect_code 0
    expect_json "d['shards'] == 3 and [o['tensors'] for o in d['outputs']] == [30, 30, 10] and d['copy']['copy_file_range_bytes'] == 0"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/c" --split-count 2 --json --copy-method copy_file_range
    expect_code 0
    expect_json "d['shards'] == 2 and d['copy']['pread_pwrite_bytes'] == 0"

    case_ "--imatrix-in/--imatrix-out writes the pruned imatrix"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/i" --imatrix-in "$FIX/imatrix/tiny-deepseek2.all.imatrix.gguf" --imatrix-out "$WORK/i.imatrix.gguf" --json
    expect_code 0
    expect_json "d['imatrix']['sliced_tensors'] == 18"
    run "$BIN" inspect --json "$WORK/i.imatrix.gguf"
    expect_code 0
    expect_out "imatrix"

    case_ "--force replaces an existing output; -q keeps stderr empty"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/p" --force -q
    expect_code 0
    [ ! -s "$ERR" ] && _pass || _fail "stderr not empty with -q"
    case_ "--force without -q says what it replaces"
    run "$BIN" splice "$M" --keeplist "$DEAD" -o "$WORK/p" --force
    expect_code 0
    expect_err "gguf-reap: info: replacing $WORK/p.gguf"

    case_ "no temporaries left anywhere"
    [ -z "$(find "$WORK" -name '.*gguf-reap-tmp*')" ] && _pass || _fail "temporaries left: $(find "$WORK" -name '.*gguf-reap-tmp*')"
fi
finish
