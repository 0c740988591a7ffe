# audit of splice's output end to end (generated model, no fixtures needed): pass, then the shard set
# broken every way a copy or an upload can break it.
source "$(dirname "$0")/lib.sh"

"$GEN" model --skeleton --preset tiny --probs-bias --shards 2 -o "$WORK/model" >/dev/null || { echo "gen failed"; exit 1; }
SRC=$WORK/model-00001-of-00002.gguf
printf '{"drop": {"1": [0, 1], "2": [2, 3], "3": [14, 15]}}' >"$WORK/drop.json"
printf '{"drop": {"1": [0, 2], "2": [2, 3], "3": [14, 15]}}' >"$WORK/other.json"
"$BIN" splice "$SRC" --keeplist "$WORK/drop.json" -o "$WORK/out" --split-count 3 -q >/dev/null || { echo "splice failed"; exit 1; }
O1=$WORK/out-00001-of-00003.gguf
O2=$WORK/out-00002-of-00003.gguf
O3=$WORK/out-00003-of-00003.gguf
cp "$O1" "$WORK/o1.bak"; cp "$O2" "$WORK/o2.bak"; cp "$O3" "$WORK/o3.bak"
restore() { cp "$WORK/o1.bak" "$O1"; cp "$WORK/o2.bak" "$O2"; cp "$WORK/o3.bak" "$O3"; rm -f "$WORK"/out-0000*-of-0000[!3].gguf "$WORK"/out-00004-of-00003.gguf; }

case_ "splice's output passes, from provenance and from the keeplist"
run "$BIN" audit "$O2" --source "$SRC"
expect_code 0
expect_out "experts   14 of 16 per block kept (from the output's gguf_reap.kept.* keys)"
expect_out "PASS: 3 shard(s)"
run "$BIN" audit "$O3" --source "$SRC" --keeplist "$WORK/drop.json"
expect_code 0
expect_out "PASS: 3 shard(s)"

case_ "a keeplist that does not match the output"
run "$BIN" audit "$O1" --source "$SRC" --keeplist "$WORK/other.json"
expect_code 1
expect_out "[keeplist] $O1: kv 'gguf_reap.kept.1'"
expect_out "the output records block 1 as keeping [2, 3, 4,"

case_ "truncated shard"
truncate -s -1000 "$O3"
run "$BIN" audit "$O1" --source "$SRC"
expect_code 1
expect_out "[bounds] $O3: file size at offset"
expect_out "1000 bytes missing, truncated"
restore

case_ "missing shard"
rm "$O2"
run "$BIN" audit "$O1"
expect_code 1
expect_out "[shard_set] $O2: shard: missing: shard 2 of 3 does not exist"
restore

case_ "extra shard"
cp "$O3" "$WORK/out-00004-of-00003.gguf"
run "$BIN" audit "$O1"
expect_code 1
expect_out "[shard_set] $WORK/out-00004-of-00003.gguf: shard: extra file beside a set of 3"
restore

case_ "two shards swapped"
mv "$O2" "$WORK/t"; mv "$O3" "$O2"; mv "$WORK/t" "$O3"
run "$BIN" audit "$O1" --source "$SRC"
expect_code 1
expect_out "is 2 but the file is shard 2 of 3 (expected 1): shards 2 and 3 look swapped"
expect_out "is 1 but the file is shard 3 of 3 (expected 2): shards 3 and 2 look swapped"
restore

case_ "wrong split.tensors.count"
OFF=$(/usr/bin/python3 - "$O3" <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
k = b'split.tensors.count'
i = d.index(k)
print(i + len(k) + 4)
PY
)
printf '\x63\x00\x00\x00' | dd of="$O3" bs=1 seek="$OFF" conv=notrunc status=none
run "$BIN" audit "$O1" --json
expect_code 1
expect_json "any(f['kind'] == 'shard_set' and f['subject'] == \"kv 'split.tensors.count'\" and f['offset'] == $OFF and 'is 99 but the 3 shards hold' in f['message'] for f in d['findings'])"
restore

case_ "a manifest of the source stands for it: pass without reading it, then a flipped byte named"
run "$BIN" audit "$SRC" --manifest-out "$WORK/src.json"
expect_code 0
run "$BIN" audit "$O1" --source-manifest "$WORK/src.json" --keeplist "$WORK/drop.json" --json
expect_code 0
expect_json "d['result'] == 'pass' and d['source_manifest'] == '$WORK/src.json' and d['summary']['source_bytes_read'] == 0 and d['expert_count'] == {'source': 16, 'output': 14}"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["summary"]; print(s["tensors_identical"], s["expert_tensors"], s["slabs"], s["kvs_checked"], s["bytes_compared"])' "$OUT" >"$WORK/by-manifest"
run "$BIN" audit "$O1" --source "$SRC" --keeplist "$WORK/drop.json" --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["summary"]; print(s["tensors_identical"], s["expert_tensors"], s["slabs"], s["kvs_checked"], s["bytes_compared"])' "$OUT" | cmp -s - "$WORK/by-manifest" && _pass || _fail "the source manifest verified other counts than the source"
run "$BIN" inspect --json --tensors "$O1"
read -r SHARD AT SLAB < <(python3 -c '
import json, sys, os
for t in json.load(open(sys.argv[1]))["tensors"]:
    if t["name"] == "blk.2.ffn_down_exps.weight":
        print(t["shard"] + 1, t["offset"], t["nbytes"] // 14)' "$OUT")
F=$WORK/out-0000${SHARD}-of-00003.gguf
printf '\x5a' | dd of="$F" bs=1 seek=$((AT + 3 * SLAB + 7)) conv=notrunc status=none
run "$BIN" audit "$O1" --source-manifest "$WORK/src.json"
expect_code 1
expect_out "[data] $F: tensor 'blk.2.ffn_down_exps.weight' expert 3 (source expert 5) kept slab at offset $((AT + 3 * SLAB)) "
expect_out "differs from the source manifest's"
expect_out "FAIL: 1 finding(s)"
restore
run "$BIN" audit "$O1" --source-manifest "$WORK/src.json" --source "$SRC"
expect_code 2
expect_err "gguf-reap: error: --source and --source-manifest: give one (the manifest stands for the source)"

case_ "after every restore the set passes again"
run "$BIN" audit "$O1" --source "$SRC"
expect_code 0
finish
