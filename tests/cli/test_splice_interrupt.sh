# gguf-reap splice interrupted: SIGINT and SIGTERM mid-copy exit 130 and leave neither a final-named
# file nor a temporary; after a SIGKILL (a crash) the next run removes the dead run's temporary. The
# signal lands mid-copy by construction: the fault shim holds the splice at its first write to its
# temporary (FAULT_HOLD) until the signal is sent. Then, with the shim: SIGINT/SIGTERM/SIGKILL at
# pseudo-random bytes of the writes and reads, during fsync and between renames, each followed by a
# clean re-run. The bytes come from FAULT_SEED (default 1, so every run of the test is the same run;
# FAULT_SEED=N explores others, and a failure names its seed).
# ctest-parts: signals
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fault_lib.sh"

if part signals "signals: GGUF_REAP_FAULT_SHIM is not set (run through ctest)" have_shim; then
    "$GEN" model --skeleton -o "$WORK/m.gguf" --blocks 4 --dense-blocks 1 --experts 16 --used 4 --embd 512 \
        --expert-ff 512 --type-exps Q8_0 >/dev/null 2>&1
    printf '{"drop": {"1": [0, 2], "2": [5, 9], "3": [12, 15]}}' >"$WORK/k.json"
    mkdir -p "$WORK/out"
    PID=
    trap 'touch "$WORK/go"; [ -n "$PID" ] && wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT

    # start_splice: runs splice in the background, held at its first write to its temporary; true once
    # it is held there (the shim's log line: an event, not a time).
    start_splice() {
        rm -f "$WORK/go" "$WORK/hold.log"
        env LD_PRELOAD="$SHIM" FAULT_OP=write FAULT_PATH=gguf-reap-tmp FAULT_HOLD="$WORK/go" \
            FAULT_LOG="$WORK/hold.log" "$BIN" splice "$WORK/m.gguf" --keeplist "$WORK/k.json" -o "$WORK/out/o" \
            --threads 1 --copy-method pread >"$OUT" 2>"$ERR" </dev/null &
        PID=$!
        for _ in $(seq 2400); do  # 120 s at most: a safety net, not a time the test relies on
            grep -q '^fault' "$WORK/hold.log" 2>/dev/null && return 0
            kill -0 $PID 2>/dev/null || return 1
            sleep 0.05
        done
        return 1
    }

    for sig in INT TERM; do
        case_ "SIG$sig mid-copy"
        start_splice && _pass || _fail "the splice was not held at its first write"
        kill -$sig $PID
        touch "$WORK/go"
        CODE=0
        wait $PID || CODE=$?
        PID=
        expect_code 130
        expect_err "gguf-reap: error: interrupted"
        [ -z "$(ls -A "$WORK/out")" ] && _pass || _fail "left: $(ls -A "$WORK/out")"
    done

    case_ "after SIGKILL the temporary stays; the next run removes it and succeeds"
    start_splice && _pass || _fail "the splice was not held at its first write"
    kill -KILL $PID
    wait $PID 2>/dev/null
    PID=
    TMP=$(ls -A "$WORK/out" | grep -v '^\.o\.gguf-reap\.lock$')  # the lock dies with its holder; its file may stay
    case "$TMP" in .o.gguf.gguf-reap-tmp.*) _pass ;; *) _fail "expected a temporary, found '$TMP'" ;; esac
    [ ! -e "$WORK/out/o.gguf" ] && _pass || _fail "a final name after a crash"
    run "$BIN" splice "$WORK/m.gguf" --keeplist "$WORK/k.json" -o "$WORK/out/o"
    expect_code 0
    expect_err "gguf-reap: info: removed $WORK/out/$TMP (left by an interrupted run)"
    [ "$(ls -A "$WORK/out")" = "o.gguf" ] && _pass || _fail "left: $(ls -A "$WORK/out")"
    rm -rf "$WORK/m.gguf" "$WORK/out"

    # ---- signals at random points (the fault shim raises them at a chosen byte or call) -------------
    "$GEN" model --skeleton -o "$WORK/s" --shards 3 --blocks 4 --dense-blocks 1 --experts 16 --used 4 --embd 512 \
        --expert-ff 512 --type-exps Q8_0 >/dev/null 2>&1
    S=$WORK/s-00001-of-00003.gguf
    printf '{"drop": {"1": [1], "2": [3], "3": [15]}}' >"$WORK/k3.json"
    OUTS="o-00001-of-00003.gguf o-00002-of-00003.gguf o-00003-of-00003.gguf"
    mkdir -p "$WORK/ref"
    "$BIN" splice "$S" --keeplist "$WORK/k3.json" -o "$WORK/ref/o" -q >/dev/null
    (cd "$WORK/ref" && sha256sum $OUTS >"$WORK/ref.sha256")
    TOTAL=$(cat "$WORK"/ref/o-* | wc -c)
    SEED=${FAULT_SEED:-1}
    RANDOM=$SEED
    echo "kill points from FAULT_SEED=$SEED"

    splice3() { faulty "$@" "$BIN" splice "$S" --keeplist "$WORK/k3.json" -o "$WORK/out/o" -q --threads 2; }
    clean_rerun() {  # clean_rerun [--force]: the next run succeeds, with the reference bytes, nothing else left
        run "$BIN" splice "$S" --keeplist "$WORK/k3.json" -o "$WORK/out/o" "$@"
        expect_code 0
        expect_only "$WORK/out" $OUTS
        expect_same_bytes "$WORK/ref.sha256"
    }
    no_final_names() {
        for f in $OUTS; do [ ! -e "$WORK/out/$f" ] || { _fail "$f exists after a crash"; return; }; done
        _pass
    }
    cp "$WORK/ref.sha256" "$WORK/out.sha256"
    sed -i "s|  |  $WORK/out/|" "$WORK/out.sha256"
    expect_same_bytes() { sha256sum --quiet -c "$WORK/out.sha256" >/dev/null 2>&1 && _pass || _fail "bytes differ"; }

    for round in 1 2; do
        for sig in INT TERM KILL; do
            for op in write read; do
                at=$(((RANDOM * 32768 + RANDOM) % (TOTAL - 1) + 1))
                case_ "SIG$sig at $op byte $at (seed $SEED), then a clean re-run"
                rm -rf "$WORK/out"
                mkdir -p "$WORK/out"
                if [ $op = write ]; then where=out/; else where=s-0000; fi
                splice3 FAULT_OP=$op FAULT_PATH=$where FAULT_AFTER_BYTES=$at FAULT_SIGNAL=$sig
                if [ $sig = KILL ]; then
                    expect_code 137
                    no_final_names
                else
                    expect_code 130
                    expect_err "gguf-reap: error: interrupted"
                    expect_err_lines 1
                    expect_only "$WORK/out"
                fi
                if [ $round = 1 ]; then clean_rerun; else clean_rerun --force; fi
            done
        done
    done

    for sig in INT KILL; do
        case_ "SIG$sig while the outputs are flushed (fsync), then a clean re-run"
        rm -rf "$WORK/out"
        mkdir -p "$WORK/out"
        splice3 FAULT_OP=fsync FAULT_PATH=out/ FAULT_AFTER_CALLS=1 FAULT_SIGNAL=$sig
        if [ $sig = KILL ]; then
            expect_code 137
            no_final_names
        else
            expect_code 130
            expect_only "$WORK/out"
        fi
        clean_rerun
    done

    # Files are renamed last to first, so shard 1 (what llama.cpp is given) is never there without the
    # rest. A crash in the microseconds between two renames leaves the later shards complete under
    # their names: the re-run refuses to replace them without --force and succeeds with it.
    case_ "SIGKILL between two renames: shard 1 absent; re-run needs --force, then succeeds"
    rm -rf "$WORK/out"
    mkdir -p "$WORK/out"
    splice3 FAULT_OP=rename FAULT_PATH=out/o- FAULT_AFTER_CALLS=1 FAULT_SIGNAL=KILL
    expect_code 137
    [ ! -e "$WORK/out/o-00001-of-00003.gguf" ] && [ -e "$WORK/out/o-00003-of-00003.gguf" ] && _pass ||
        _fail "expected shard 3 renamed and shard 1 not: $(ls -A "$WORK/out")"
    cmp -s "$WORK/out/o-00003-of-00003.gguf" "$WORK/ref/o-00003-of-00003.gguf" && _pass ||
        _fail "the renamed shard is not complete"
    run "$BIN" splice "$S" --keeplist "$WORK/k3.json" -o "$WORK/out/o"
    expect_code 2
    expect_err "gguf-reap: error: $WORK/out/o-00003-of-00003.gguf: already exists (use --force to replace it)"
    clean_rerun --force

    # The same with --force over an earlier set of the same shape (another keeplist): the old files go
    # before the first rename, so no old shard is left to mix with the new ones.
    case_ "SIGKILL between two renames while --force replaces a set: no old shard mixed with new ones"
    printf '{"drop": {"1": [2], "2": [4], "3": [14]}}' >"$WORK/k4.json"
    rm -rf "$WORK/out"
    mkdir -p "$WORK/out"
    run "$BIN" splice "$S" --keeplist "$WORK/k4.json" -o "$WORK/out/o" -q
    expect_code 0
    faulty FAULT_OP=rename FAULT_PATH=out/o- FAULT_AFTER_CALLS=1 FAULT_SIGNAL=KILL \
        "$BIN" splice "$S" --keeplist "$WORK/k3.json" -o "$WORK/out/o" -q --threads 2 --force
    expect_code 137
    [ ! -e "$WORK/out/o-00001-of-00003.gguf" ] && [ ! -e "$WORK/out/o-00002-of-00003.gguf" ] && _pass ||
        _fail "an old shard survived next to a new one: $(ls -A "$WORK/out")"
    cmp -s "$WORK/out/o-00003-of-00003.gguf" "$WORK/ref/o-00003-of-00003.gguf" && _pass ||
        _fail "shard 3 is not the new, complete file"
    clean_rerun --force
fi
finish
