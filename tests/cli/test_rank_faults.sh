# Fault injection into rank's read pass (tests/fault/fault_inject.cpp preloaded): rank reads imatrix
# values with pread through a SequentialReader (src/ops/rank/imatrix_scan.cpp). Short reads must change
# nothing; EIO and a file truncated while it is read must give exit 3, one line naming the file, and no
# output under a final name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fault_lib.sh"
require_shim

# 64 experts × 2048 channels: each block entry is 512 KiB, read in several calls.
"$GEN" model --skeleton -o "$WORK/m.gguf" --blocks 6 --dense-blocks 1 --experts 64 --used 4 --embd 64 --expert-ff 2048 \
    --type-exps Q4_0 >/dev/null 2>&1
"$GEN" imatrix --model "$WORK/m.gguf" --domain chat --seed 3 --dead-per-block 1 --super 2:7 -o "$WORK/chat.gguf" \
    >/dev/null 2>&1
"$GEN" imatrix --model "$WORK/m.gguf" --domain code --seed 4 -o "$WORK/code.gguf" >/dev/null 2>&1
IM=$WORK/chat.gguf
SIZE=$(stat -c %s "$IM")

rank() {  # rank FAULT_...=... OUTDIR [rank options]
    local envs=()
    while [[ $# -gt 0 && "$1" == FAULT_* ]]; do
        envs+=("$1")
        shift
    done
    local out=$1
    shift
    rm -rf "$out"
    faulty "${envs[@]}" "$BIN" -q rank --imatrix "chat=$IM" --imatrix "code=$WORK/code.gguf" --model "$WORK/m.gguf" \
        --prune 16 -o "$out" "$@"
}

case_ "the reference ranking, without faults"
rank "$WORK/ref"
expect_code 0

for threads in 1 2; do
    case_ "short reads of an imatrix ($threads thread(s)): the same three files"
    rank FAULT_OP=read FAULT_PATH=chat.gguf FAULT_SHORT=5000 "$WORK/short" --threads "$threads"
    expect_code 0
    for f in keeplist.json ranking.npz REAP-KEEPLIST-RECEIPT.md; do
        cmp -s "$WORK/ref/$f" "$WORK/short/$f" && _pass || _fail "$f differs from the run without faults"
    done
done

case_ "short reads with --no-hash: the same keeplist and ranking"
rank "$WORK/ref-nohash" --no-hash
rank FAULT_OP=read FAULT_PATH=chat.gguf FAULT_SHORT=5000 "$WORK/short-nohash" --no-hash
expect_code 0
for f in keeplist.json ranking.npz; do
    cmp -s "$WORK/ref-nohash/$f" "$WORK/short-nohash/$f" && _pass || _fail "$f differs from the run without faults"
done

for hash in "" --no-hash; do
    case_ "EIO on a read of an imatrix's values ${hash:-(hashing)}"
    rank FAULT_OP=read FAULT_PATH=chat.gguf FAULT_AFTER_BYTES=$((SIZE / 2)) FAULT_ERRNO=EIO "$WORK/eio" $hash
    expect_code 3
    expect_err "gguf-reap: error: $IM: read: Input/output error"
    expect_err_lines 1
    [ ! -e "$WORK/eio/keeplist.json" ] && [ ! -e "$WORK/eio/ranking.npz" ] && _pass || _fail "an output was written"

    case_ "an imatrix truncated while its values are read ${hash:-(hashing)}"
    rank FAULT_OP=read FAULT_PATH=chat.gguf FAULT_AFTER_BYTES=$((SIZE / 3)) FAULT_TRUNCATE="$IM:$((SIZE / 2))" \
        "$WORK/trunc" $hash
    expect_code 3
    expect_err "gguf-reap: error: $IM: unexpected end of file (was it truncated?)"
    expect_err_lines 1
    [ ! -e "$WORK/trunc/keeplist.json" ] && _pass || _fail "an output was written"
    "$GEN" imatrix --model "$WORK/m.gguf" --domain chat --seed 3 --dead-per-block 1 --super 2:7 -o "$IM" >/dev/null 2>&1
done

finish
