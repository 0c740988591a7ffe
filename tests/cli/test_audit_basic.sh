# audit: usage errors, exit codes, structural checks and manifests on the llama.cpp fixture shards.
# ctest-parts: fixtures
source "$(dirname "$0")/lib.sh"

case_ "audit --help goes to stdout"
run "$BIN" audit --help
expect_code 0
expect_out "--manifest-out"

case_ "OUTPUT is required"
run "$BIN" audit
expect_code 2
expect_err "gguf-reap: error: OUTPUT is required"

case_ "--keeplist needs --source"
printf '{}' >"$WORK/k.json"
run "$BIN" audit "$WORK/k.json" --keeplist "$WORK/k.json"
expect_code 2
expect_err "gguf-reap: error: --keeplist needs --source"
expect_err_lines 1

case_ "missing OUTPUT is bad input"
run "$BIN" audit "$WORK/nope.gguf"
expect_code 2
expect_err "nope.gguf: does not exist"

case_ "an OUTPUT that is not GGUF is bad input, one line"
printf 'hello world, not gguf' >"$WORK/x.gguf"
run "$BIN" audit "$WORK/x.gguf"
expect_code 2
expect_err "x.gguf: magic at offset 0 (0x0): not a GGUF file"
expect_err_lines 1
expect_no_out

if fixtures "the cases on the llama.cpp-made fixtures"; then
    cp "$FIX"/shards/*.gguf "$WORK/"
    S1=$WORK/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf
    S2=$WORK/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf
    S3=$WORK/tiny-deepseek2-IQ2_XXS-00003-of-00003.gguf
    MODEL=$FIX/models/tiny-deepseek2-IQ2_XXS.gguf

    case_ "structural check of llama.cpp's shards"
    run "$BIN" audit "$S2"
    expect_code 0
    expect_out "PASS: 3 shard(s), 70 tensors total"

    case_ "the shards against the file they were split from"
    run "$BIN" audit "$S1" --source "$MODEL"
    expect_code 0
    expect_out "experts   16 of 16 per block kept (from no pruning recorded: every expert kept)"
    expect_out "verified  55 tensors byte-identical to the source, 15 expert tensors with 240 kept slabs/rows"
    expect_out "PASS: 3 shard(s), 70 tensors total"

    case_ "--json is one document"
    run "$BIN" audit "$S3" --source "$MODEL" --json
    expect_code 0
    expect_json "d['result'] == 'pass' and d['summary']['tensors'] == 70 and len(d['shards']) == 3 and d['findings'] == []"

    case_ "--manifest-out writes JSON and a sha256sum -c file"
    run "$BIN" audit "$S1" --manifest-out "$WORK/m.json"
    expect_code 0
    expect_out "manifest  written: $WORK/m.json and $WORK/m.sha256"
    CODE=0
    (cd "$WORK" && sha256sum -c m.sha256 >"$OUT" 2>"$ERR") || CODE=$?
    expect_code 0
    expect_out "tiny-deepseek2-IQ2_XXS-00003-of-00003.gguf: OK"
    run /usr/bin/python3 -c "import json; m = json.load(open('$WORK/m.json')); print(sum(len(s['tensors']) for s in m['shards']), m['format'])"
    expect_out "70 gguf-reap.manifest"

    case_ "--manifest verifies a copy without the source"
    run "$BIN" audit "$S2" --manifest "$WORK/m.json"
    expect_code 0
    expect_out "PASS: 3 shard(s), 70 tensors total"

    case_ "a flipped tensor byte is named against the manifest and the source"
    # blk.2.attn_q_a.weight's data starts somewhere in shard 2; flip the byte 10 bytes into it.
    OFF=$("$BIN" inspect --json --tensors "$S2" | /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print([t['offset'] for t in d['tensors'] if t['name']=='blk.2.attn_q_a.weight'][0])")
    /usr/bin/python3 - "$S2" $((OFF + 10)) <<'PY'
import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, 'r+b') as f:
    f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0x40]))
PY
    run "$BIN" audit "$S1" --manifest "$WORK/m.json"
    expect_code 1
    expect_out "[manifest] $S2: tensor 'blk.2.attn_q_a.weight' data at offset $OFF"
    expect_out "FAIL: 2 finding(s); 3 shard(s), 70 tensors total"
    run "$BIN" audit "$S1" --source "$MODEL"
    expect_code 1
    expect_out "[data] $S2: tensor 'blk.2.attn_q_a.weight' data at offset $((OFF + 10))"
    expect_out "the first at byte 10 of the tensor"

    case_ "no manifest is written for a failing output"
    run "$BIN" audit "$S1" --source "$MODEL" --manifest-out "$WORK/bad.json"
    expect_code 1
    expect_err "manifest not written: the audit found 1 finding(s)"
    [ ! -e "$WORK/bad.json" ] && [ ! -e "$WORK/bad.sha256" ] && _pass || _fail "a manifest was written"

    case_ "an existing manifest needs --force; an input is never overwritten"
    run "$BIN" audit "$S3" --manifest-out "$WORK/m.json"
    expect_code 2
    expect_err "m.json: exists; pass --force to replace it"
    run "$BIN" audit "$S3" --manifest-out "$S2" --force
    expect_code 2
    expect_err "the manifest would overwrite an input"

    case_ "a missing shard is a finding"
    rm "$S2"
    run "$BIN" audit "$S3"
    expect_code 1
    expect_out "[shard_set] $S2: shard: missing: shard 2 of 3 does not exist"
fi
finish
