# Two splices into one output prefix: the second is refused while the first holds the prefix's lock, and
# the first finishes unharmed. --threads 1..64 give identical bytes (splice) and identical reports
# (audit) on 64 output shards, a work item for every thread. (docs/reliability.md, "Concurrency")
# ctest-parts: locks
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fault_lib.sh"

"$GEN" model --skeleton -o "$WORK/m" --shards 3 --blocks 4 --dense-blocks 1 --experts 16 --used 4 --embd 512 \
    --expert-ff 512 --type-exps Q8_0 >/dev/null 2>&1
M=$WORK/m-00001-of-00003.gguf
printf '{"drop": {"1": [0], "2": [7], "3": [9]}}' >"$WORK/k.json"
OUTS="o-00001-of-00003.gguf o-00002-of-00003.gguf o-00003-of-00003.gguf"
mkdir -p "$WORK/ref" "$WORK/out"
run "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$WORK/ref/o" -q --threads 1
expect_code 0
(cd "$WORK/ref" && sha256sum $OUTS >"$WORK/ref.sha256")
same_as_ref() {  # same_as_ref DIR
    (cd "$1" && sha256sum --quiet -c "$WORK/ref.sha256" >/dev/null 2>&1) && _pass || _fail "$1: bytes differ"
}

# 64 output files, so that every one of up to 64 threads has a file of its own to write (and audit a
# shard of its own to verify): a thread count above the work items would run fewer threads than asked.
"$GEN" model --skeleton -o "$WORK/m64.gguf" --blocks 9 --dense-blocks 1 --experts 16 --used 4 --embd 256 --expert-ff 256 \
    --type-exps Q8_0 >/dev/null 2>&1
M64=$WORK/m64.gguf
printf '{"drop": {"1": [0], "2": [7], "3": [9], "4": [1], "5": [2], "6": [3], "7": [4], "8": [5]}}' >"$WORK/k64.json"
mkdir -p "$WORK/ref64"
run "$BIN" splice "$M64" --keeplist "$WORK/k64.json" -o "$WORK/ref64/o" -q --split-count 64 --threads 1
expect_code 0
[ "$(ls "$WORK/ref64" | wc -l)" -eq 64 ] && _pass || _fail "expected 64 output shards"
(cd "$WORK/ref64" && sha256sum o-* >"$WORK/ref64.sha256")

case_ "--threads 1, 2, 3, 7 and 64 over 64 output files write identical bytes"
for t in 2 3 7 64; do
    rm -rf "$WORK/out64" && mkdir -p "$WORK/out64"
    run "$BIN" splice "$M64" --keeplist "$WORK/k64.json" -o "$WORK/out64/o" -q --split-count 64 --threads $t
    expect_code 0
    (cd "$WORK/out64" && sha256sum --quiet -c "$WORK/ref64.sha256" >/dev/null 2>&1) && _pass ||
        _fail "--threads $t: bytes differ"
    [ "$(ls -A "$WORK/out64" | wc -l)" -eq 64 ] && _pass || _fail "--threads $t: not exactly the 64 shards"
done

case_ "--threads outside 1..64 is a usage error"
for t in 0 65; do
    run "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$WORK/out/x" --threads $t
    expect_code 2
    expect_err "--threads"
done

case_ "audit --threads 1, 2, 7 and 64 over 64 shards give the same report"
audit_report() {
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("seconds",None); d.pop("date",None); print(json.dumps(d, sort_keys=True))' "$OUT"
}
run "$BIN" audit "$WORK/ref64/o-00001-of-00064.gguf" --source "$M64" --keeplist "$WORK/k64.json" --json --threads 1
expect_code 0
expect_json "d['result'] == 'pass' and d['summary']['shards'] == 64"
audit_report >"$WORK/audit1.json"
for t in 2 7 64; do
    run "$BIN" audit "$WORK/ref64/o-00001-of-00064.gguf" --source "$M64" --keeplist "$WORK/k64.json" --json --threads $t
    expect_code 0
    audit_report | cmp -s - "$WORK/audit1.json" && _pass || _fail "audit --threads $t reports differently"
done

if part locks "the lock tests: GGUF_REAP_FAULT_SHIM is not set (run through ctest)" have_shim; then
    # The first splice is held at its first write to an output (the fault shim's FAULT_HOLD) until this
    # test has made its checks: whatever the machine's speed, it still holds the lock then.
    case_ "a second splice into the same prefix is refused while the first runs; the first completes"
    rm -rf "$WORK/out" && mkdir -p "$WORK/out"
    rm -f "$WORK/first.log" "$WORK/first.go"
    env LD_PRELOAD="$SHIM" FAULT_OP=write FAULT_PATH=gguf-reap-tmp FAULT_HOLD="$WORK/first.go" \
        FAULT_LOG="$WORK/first.log" \
        "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$WORK/out/o" -q --threads 1 \
        >"$WORK/first.out" 2>"$WORK/first.err" </dev/null &
    FIRST=$!
    # Released however this script ends, so that the first splice never outlives it.
    trap 'touch "$WORK/first.go"; wait $FIRST 2>/dev/null; rm -rf "$WORK"' EXIT
    held() { grep -q '^fault' "$WORK/first.log" 2>/dev/null || ! kill -0 $FIRST 2>/dev/null; }
    for _ in $(seq 2400); do held && break; sleep 0.05; done  # an event: the shim's line (120 s at most)
    grep -q '^fault' "$WORK/first.log" 2>/dev/null && _pass ||
        _fail "the first splice did not reach its first write: $(cat "$WORK/first.err")"
    for spelling in "$WORK/out/o" "$WORK/out/o.gguf"; do
        run "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$spelling" --force
        expect_code 3
        expect_err "gguf-reap: error: $spelling: another gguf-reap process (pid $FIRST) is writing to this output prefix (lock $WORK/out/.o.gguf-reap.lock); wait for it to finish or choose another prefix"
        expect_err_lines 1
    done
    case_ "another prefix in the same directory is not blocked; --dry-run takes no lock"
    run "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$WORK/out/p" -q
    expect_code 0
    run "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$WORK/out/o" --dry-run
    expect_code 0
    kill -0 $FIRST 2>/dev/null && ! grep -q '^released' "$WORK/first.log" && _pass ||
        _fail "the first splice was not held at its first write"
    touch "$WORK/first.go"

    case_ "the first splice completes with the right bytes and removes its lock"
    CODE=0
    wait $FIRST || CODE=$?
    expect_code 0
    rm -f "$WORK"/out/p-*
    expect_only "$WORK/out" $OUTS
    same_as_ref "$WORK/out"

    case_ "after a SIGKILL the lock is free: the next run takes it"
    rm -rf "$WORK/out" && mkdir -p "$WORK/out"
    run env LD_PRELOAD="$SHIM" FAULT_OP=write FAULT_PATH=out/ FAULT_AFTER_BYTES=100000 FAULT_SIGNAL=KILL \
        "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$WORK/out/o" -q
    expect_code 137
    [ -e "$WORK/out/.o.gguf-reap.lock" ] && _pass || _fail "expected the dead run's lock file"
    run "$BIN" splice "$M" --keeplist "$WORK/k.json" -o "$WORK/out/o" -q
    expect_code 0
    expect_only "$WORK/out" $OUTS
    same_as_ref "$WORK/out"
fi
finish
