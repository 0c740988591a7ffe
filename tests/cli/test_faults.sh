# Fault injection into splice and audit (tests/fault/fault_inject.cpp preloaded): a full disk, EIO on
# writes, reads and flushes, short reads and writes, a source truncated or rewritten while it is read.
# After each fault: the documented exit code, one line naming the file, no temporary or lock left, and
# no file under a final name that is not a complete earlier output (docs/reliability.md, "Faults").
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fault_lib.sh"
require_shim

# Three source shards, 16 experts of 272 KiB: kept runs over 1 MiB go through copy_file_range, the
# rest through pread + pwritev, so both copy paths meet every fault.
"$GEN" model --skeleton -o "$WORK/m" --shards 3 --blocks 4 --dense-blocks 1 --experts 16 --used 4 --embd 512 \
    --expert-ff 512 --type-exps Q8_0 >/dev/null 2>&1
M=$WORK/m-00001-of-00003.gguf
M2=$WORK/m-00002-of-00003.gguf
printf '{"drop": {"1": [0, 2], "2": [5, 9], "3": [14, 15]}}' >"$WORK/k.json"
OUTS="o-00001-of-00003.gguf o-00002-of-00003.gguf o-00003-of-00003.gguf"

# The reference output, made without faults.
mkdir -p "$WORK/ref"
run "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$WORK/ref/o" -q
[ "$CODE" -eq 0 ] || { _fail "reference splice failed"; finish; exit 1; }
(cd "$WORK/ref" && sha256sum $OUTS >"$WORK/ref.sha256")

fresh() {  # an empty output directory
    rm -rf "$WORK/out"
    mkdir -p "$WORK/out"
}
# splice FAULT_...=... [splice options]
splice() {
    local envs=()
    while [[ $# -gt 0 && "$1" == FAULT_* ]]; do
        envs+=("$1")
        shift
    done
    faulty "${envs[@]}" "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$WORK/out/o" -q "$@"
}

# fails CODE "stderr" FAULT_...: the splice into an empty directory fails so, and leaves nothing.
fails() {
    local code=$1 msg=$2
    shift 2
    fresh
    splice "$@" --threads 1
    expect_code "$code"
    expect_err "gguf-reap: error: $msg"
    expect_err_lines 1
    expect_only "$WORK/out"
}

case_ "ENOSPC mid-shard after fallocate succeeded (a copy-on-write or thin filesystem)"
fails 3 "$WORK/out/o-00001-of-00003.gguf: copy_file_range from $M: No space left on device" \
    FAULT_OP=write FAULT_PATH=out/.o-00001 FAULT_AFTER_BYTES=5000000 FAULT_ERRNO=ENOSPC

case_ "ENOSPC mid-shard where fallocate is unsupported, on the pread/pwritev path"
fails 3 "$WORK/out/o-00002-of-00003.gguf: write: No space left on device" \
    FAULT_NO_FALLOCATE=1 FAULT_OP=write FAULT_PATH=o-00002 FAULT_AFTER_BYTES=3000000 FAULT_ERRNO=ENOSPC \
    --copy-method pread

case_ "ENOSPC from fallocate: refused before any data is copied"
fails 3 "$WORK/out/o-00003-of-00003.gguf: reserve" \
    FAULT_OP=fallocate FAULT_PATH=o-00003 FAULT_ERRNO=ENOSPC

case_ "EIO on a write"
fails 3 "$WORK/out/o-00001-of-00003.gguf: write: Input/output error" \
    FAULT_OP=write FAULT_PATH=/out/ FAULT_AFTER_BYTES=100 FAULT_ERRNO=EIO

case_ "EIO on a read of a source shard (pread path)"
fresh
splice FAULT_OP=read FAULT_PATH=m-00002 FAULT_AFTER_BYTES=2000000 FAULT_ERRNO=EIO --copy-method pread
expect_code 3
expect_err "gguf-reap: error: $M2: read: Input/output error"
expect_err_lines 1
expect_only "$WORK/out"

case_ "EIO on a read of a source shard (copy_file_range path)"
fails 3 "$WORK/out/o-00002-of-00003.gguf: copy_file_range from $M2: Input/output error" \
    FAULT_OP=read FAULT_PATH=m-00002 FAULT_AFTER_BYTES=2000000 FAULT_ERRNO=EIO

case_ "EIO from fsync: nothing is renamed"
fails 3 "$WORK/out/o-00002-of-00003.gguf: fsync: Input/output error" \
    FAULT_OP=fsync FAULT_PATH=o-00002 FAULT_ERRNO=EIO

case_ "--no-fsync flushes nothing (the fsync fault is never met) and writes the same bytes"
fresh
splice FAULT_OP=fsync FAULT_PATH=/ FAULT_ERRNO=EIO --no-fsync --threads 1
expect_code 0
(cd "$WORK/out" && sha256sum --quiet -c "$WORK/ref.sha256" >/dev/null 2>&1) && _pass ||
    _fail "bytes differ from the reference"
expect_only "$WORK/out" $OUTS

case_ "a failed run with --force leaves the earlier complete set as it was"
cp "$WORK"/ref/o-* "$WORK/out/"
splice FAULT_OP=write FAULT_PATH=/out/ FAULT_AFTER_BYTES=20000000 FAULT_ERRNO=ENOSPC --force
expect_code 3
expect_err_lines 1
expect_only "$WORK/out" $OUTS
(cd "$WORK/out" && sha256sum --quiet -c "$WORK/ref.sha256" >/dev/null 2>&1) && _pass || _fail "old set changed"

for method in auto pread copy_file_range; do
    for op in write read; do
        case_ "short ${op}s ($method): the copy loops and writes identical bytes"
        fresh
        splice FAULT_OP=$op FAULT_PATH=/ FAULT_SHORT=65536 --copy-method $method --json
        expect_code 0
        expect_json "d['copy']['calls'] > 200"  # without short transfers: about 40 calls
        (cd "$WORK/out" && sha256sum --quiet -c "$WORK/ref.sha256" >/dev/null 2>&1) && _pass ||
            _fail "bytes differ from the reference"
        expect_only "$WORK/out" $OUTS
    done
done

# The source changes while splice reads it. Reads are counted on shard 2 only; the change hits shard 2.
cp "$M2" "$WORK/m2.orig"
restore() {
    cp "$WORK/m2.orig" "$M2"
    touch -d '2020-01-01 00:00' "$M2"  # an old mtime: any change afterwards shows, whatever the clock tick
}
restore

case_ "source shard truncated mid-copy (pread path): the read past the new end is an error"
fresh
splice FAULT_OP=read FAULT_PATH=m-00002 FAULT_AFTER_BYTES=1000000 FAULT_TRUNCATE="$M2:4000000" --copy-method pread
expect_code 3
expect_err "gguf-reap: error: $M2: unexpected end of file (was it truncated while copying?)"
expect_err_lines 1
expect_only "$WORK/out"
restore

case_ "source shard truncated mid-copy (copy_file_range path)"
fresh
splice FAULT_OP=read FAULT_PATH=m-00002 FAULT_AFTER_BYTES=1000000 FAULT_TRUNCATE="$M2:4000000" \
    --copy-method copy_file_range
expect_code 3
expect_err "gguf-reap: error: $M2: unexpected end of file (was it truncated while copying?)"
expect_err_lines 1
expect_only "$WORK/out"
restore

# Grown rather than cut: every read succeeds, only the final check can tell.
case_ "source shard resized mid-copy, every read still inside it: caught before anything is renamed"
fresh
SIZE2=$(stat -c %s "$M2")
splice FAULT_OP=read FAULT_PATH=m-00002 FAULT_AFTER_BYTES=1000000 FAULT_TRUNCATE="$M2:$((SIZE2 + 4096))"
expect_code 3
expect_err "gguf-reap: error: $M2: changed while gguf-reap was reading it (its size went from $SIZE2 to $((SIZE2 + 4096)) bytes)"
expect_err_lines 1
expect_only "$WORK/out"
restore

for at in 200 12000000; do
    case_ "source shard rewritten in place mid-copy (byte $at, size unchanged)"
    fresh
    splice FAULT_OP=read FAULT_PATH=m-00002 FAULT_AFTER_BYTES=1000000 FAULT_MODIFY="$M2:$at"
    expect_code 3
    expect_err "gguf-reap: error: $M2: changed while gguf-reap was reading it (it was modified); nothing made from it is kept"
    expect_err_lines 1
    expect_only "$WORK/out"
    restore
done

# ---- audit ----------------------------------------------------------------------------------------
R=$WORK/ref/o-00001-of-00003.gguf
audit() { faulty "$@" "$BIN" audit "$R" --source "$M" --keeplist "$WORK/k.json" --json; }  # FAULT_* only
run "$BIN" audit "$R" --source "$M" --keeplist "$WORK/k.json" --json
expect_code 0
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("seconds",None); d.pop("date",None); print(json.dumps(d, sort_keys=True))' \
    "$OUT" >"$WORK/audit.ref"
same_audit() {
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("seconds",None); d.pop("date",None); print(json.dumps(d, sort_keys=True))' \
        "$OUT" | cmp -s - "$WORK/audit.ref" && _pass || _fail "audit report differs from the fault-free one"
}

case_ "audit: short reads of output and source give the same PASS"
audit FAULT_OP=read FAULT_PATH=/ FAULT_SHORT=65536
expect_code 0
expect_json "d['result'] == 'pass'"
same_audit

case_ "audit: EIO reading an output shard"
audit FAULT_OP=read FAULT_PATH=ref/o-00002 FAULT_AFTER_BYTES=3000000 FAULT_ERRNO=EIO
expect_code 3
expect_err "gguf-reap: error: $WORK/ref/o-00002-of-00003.gguf: read: Input/output error"
expect_err_lines 1
expect_no_out

case_ "audit: EIO reading a source shard"
audit FAULT_OP=read FAULT_PATH=m-00002 FAULT_AFTER_BYTES=3000000 FAULT_ERRNO=EIO
expect_code 3
expect_err "gguf-reap: error: $M2: read: Input/output error"
expect_err_lines 1
expect_no_out

case_ "audit: a source shard rewritten during the pass is no PASS"
audit FAULT_OP=read FAULT_PATH=m-00002 FAULT_AFTER_BYTES=1000000 FAULT_MODIFY="$M2:200"
expect_code 3
expect_err "gguf-reap: error: $M2: changed while gguf-reap was reading it (it was modified)"
expect_err_lines 1
expect_no_out
restore

case_ "audit: a source shard truncated during the pass is no PASS"
audit FAULT_OP=read FAULT_PATH=m-00002 FAULT_AFTER_BYTES=1000000 FAULT_TRUNCATE="$M2:4000000"
expect_code 3
expect_err "gguf-reap: error: $M2: "
expect_err_lines 1
expect_no_out
restore

RANDOM=${FAULT_SEED:-1}  # where the signals below arrive: the same bytes every run unless FAULT_SEED says otherwise
for sig in INT TERM; do
    at=$((RANDOM * 300 + 1))
    case_ "audit: SIG$sig mid-pass (source byte $at) exits 130 and writes no manifest"
    rm -rf "$WORK/man" && mkdir -p "$WORK/man"
    faulty FAULT_OP=read FAULT_PATH=m-0000 FAULT_AFTER_BYTES=$at FAULT_SIGNAL=$sig \
        "$BIN" audit "$R" --source "$M" --keeplist "$WORK/k.json" --manifest-out "$WORK/man/MANIFEST.json"
    expect_code 130
    expect_err "gguf-reap: error: interrupted"
    expect_err_lines 1
    expect_no_out
    expect_only "$WORK/man"
done
finish
