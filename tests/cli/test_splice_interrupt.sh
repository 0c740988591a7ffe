# gguf-reap splice interrupted: SIGINT and SIGTERM mid-copy exit 130 and leave neither a final-named
# file nor a temporary; after a SIGKILL (a crash) the next run removes the dead run's temporary.
source "$(dirname "$0")/lib.sh"

# A 600 MB model: big enough that the copy is still running when the signal arrives.
"$GEN" model -o "$WORK/m.gguf" --blocks 4 --dense-blocks 1 --experts 64 --used 4 --embd 1024 --expert-ff 1024 \
    --type-exps Q8_0 >/dev/null 2>&1
printf '{"drop": {"1": [0, 2], "2": [5, 9], "3": [60, 63]}}' >"$WORK/k.json"
mkdir -p "$WORK/out"

# start_splice: runs splice in the background and waits until its temporary exists.
start_splice() {
    "$BIN" splice "$WORK/m.gguf" --keeplist "$WORK/k.json" -o "$WORK/out/o" --threads 1 --copy-method pread \
        >"$OUT" 2>"$ERR" </dev/null &
    PID=$!
    for _ in $(seq 1 500); do
        [ -n "$(ls -A "$WORK/out")" ] && return 0
        sleep 0.01
    done
    return 1
}

for sig in INT TERM; do
    case_ "SIG$sig mid-copy"
    start_splice && _pass || _fail "no temporary appeared"
    kill -$sig $PID
    CODE=0
    wait $PID || CODE=$?
    expect_code 130
    expect_err "gguf-reap: error: interrupted"
    [ -z "$(ls -A "$WORK/out")" ] && _pass || _fail "left: $(ls -A "$WORK/out")"
done

case_ "after SIGKILL the temporary stays; the next run removes it and succeeds"
start_splice && _pass || _fail "no temporary appeared"
kill -KILL $PID
wait $PID 2>/dev/null
TMP=$(ls -A "$WORK/out")
case "$TMP" in .o.gguf.gguf-reap-tmp.*) _pass ;; *) _fail "expected a temporary, found '$TMP'" ;; esac
[ ! -e "$WORK/out/o.gguf" ] && _pass || _fail "a final name after a crash"
run "$BIN" splice "$WORK/m.gguf" --keeplist "$WORK/k.json" -o "$WORK/out/o"
expect_code 0
expect_err "gguf-reap: info: removed $WORK/out/$TMP (left by an interrupted run)"
[ "$(ls -A "$WORK/out")" = "o.gguf" ] && _pass || _fail "left: $(ls -A "$WORK/out")"
rm -f "$WORK/m.gguf"
finish
