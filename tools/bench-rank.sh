#!/usr/bin/env bash
# Benchmark of `gguf-reap rank` on five Kimi-K3-shaped imatrices (93 blocks, 896 experts) made by the
# fixture generator, against `cat` of exactly the bytes rank must read (the ffn_down_exps in_sum2 and
# counts tensors, copied into one file), with a warm page cache for both.
#
#   tools/bench-rank.sh [BUILD_DIR] [WORK_DIR]      (defaults: build, a temp dir)
#
# Prints times, ratios and peak RSS; docs/perf/rank.md holds the last results.
set -euo pipefail
BUILD=${1:-build}
WORK=${2:-$(mktemp -d "${TMPDIR:-/tmp}/bench-rank.XXXXXX")}
BIN=$BUILD/gguf-reap
GEN=$BUILD/gguf-reap-gen
PY=/usr/bin/python3
mkdir -p "$WORK"
echo "work dir: $WORK"

# Kimi-K3's skeleton (93 blocks, 896 experts, 16 used) with a narrow embedding and a 1024-wide expert
# FFN, so that the ffn_down_exps entries rank reads (896 × 1024 floats per block) dominate the files.
if [ ! -f "$WORK/k3.gguf" ]; then
    "$GEN" model --skeleton --preset kimi-k3 --embd 32 --expert-ff 1024 --type-exps Q4_0 --type-down Q4_0 \
        -o "$WORK/k3.gguf" >/dev/null
fi
args=()
seed=1
for d in chat code prose reasoning wiki; do
    f=$WORK/$d.imatrix.gguf
    [ -f "$f" ] || "$GEN" imatrix --model "$WORK/k3.gguf" --domain "$d" --seed $seed --dead-per-block 3 --super 5:17 \
        --tokens 65536 -o "$f" >/dev/null
    args+=(--imatrix "$d=$f")
    seed=$((seed + 1))
done

# The bytes rank reads: every blk.N.ffn_down_exps.weight.{in_sum2,counts} tensor, copied into one file.
# Their ranges are also written to needed.ranges (file, offset, length), for the cold baseline that
# reads the same bytes where they are.
"$PY" - "$WORK/needed.bin" "$WORK"/{chat,code,prose,reasoning,wiki}.imatrix.gguf <<'PY'
import struct, sys
out = open(sys.argv[1], "wb")
ranges = open(sys.argv[1].replace(".bin", ".ranges"), "w")
total = 0
for path in sys.argv[2:]:
    f = open(path, "rb")
    data = f.read(1 << 20)
    magic, version, n_t, n_kv = struct.unpack_from("<4sIqq", data, 0)
    pos = 24
    def s(pos):
        n, = struct.unpack_from("<Q", data, pos); return data[pos + 8:pos + 8 + n].decode(), pos + 8 + n
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    align = 32
    for _ in range(n_kv):
        key, pos = s(pos)
        t, = struct.unpack_from("<i", data, pos); pos += 4
        if t == 8: _, pos = s(pos)
        elif t == 9:
            et, cnt = struct.unpack_from("<iQ", data, pos); pos += 12
            for _ in range(cnt):
                if et == 8: _, pos = s(pos)
                else: pos += sizes[et]
        else:
            if key == "general.alignment": align, = struct.unpack_from("<I", data, pos)
            pos += sizes[t]
    tensors = []
    for _ in range(n_t):
        name, pos = s(pos)
        nd, = struct.unpack_from("<I", data, pos); pos += 4
        ne = struct.unpack_from("<%dq" % nd, data, pos); pos += 8 * nd
        typ, off = struct.unpack_from("<iQ", data, pos); pos += 12
        n = 1
        for x in ne: n *= x
        tensors.append((name, off, 4 * n))
    start = (pos + align - 1) // align * align
    for name, off, nb in tensors:
        if ".ffn_down_exps.weight." in name:
            f.seek(start + off); out.write(f.read(nb)); total += nb
            ranges.write(f"{path} {start + off} {nb}\n")
print(f"entry bytes rank reads: {total:,}")
PY

RANK_ARGS=("${args[@]}" --model "$WORK/k3.gguf" --prune 96 -o "$WORK/out" --force)
# The entry bytes read where they are, in file order, 4 MiB per pread (what a reader that did nothing
# else would take): the like-for-like cold baseline, since on a VM whose disk is a file in the host's
# cache the same bytes copied into needed.bin read at another speed than in the imatrices themselves.
PREAD_RANGES=("$PY" -c 'import os, sys
fds = {}
for line in open(sys.argv[1]):
    path, off, n = line.split(); off = int(off); n = int(n)
    fd = fds.setdefault(path, os.open(path, os.O_RDONLY))
    while n > 0:
        k = min(n, 4 << 20); os.pread(fd, k, off); off += k; n -= k' "$WORK/needed.ranges")
# Evicts only these files' pages from the page cache (nothing else on the machine is disturbed).
evict() { "$PY" -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"; }
# wall seconds and CPU seconds (user + sys) of one run
# (bash's `time`, to the millisecond: /usr/bin/time rounds to 10 ms, 7 % of a warm run)
run1() {
    local TIMEFORMAT='%3R %3U %3S'
    { time "$@" >/dev/null 2>&1; } 2>&1 | awk '{printf "%.3f %.3f\n", $1, $2 + $3}'
}
best() {  # best wall time of 5 warm runs, with its CPU time
    local b="" x
    for _ in 1 2 3 4 5; do
        x=$(run1 "$@")
        if [ -z "$b" ] || [ "$(echo "${x% *} < ${b% *}" | bc)" = 1 ]; then b=$x; fi
    done
    echo "$b"
}
ratio() { echo "scale=2; $1 / $2" | bc; }

# Warm: every input, and needed.bin, evicted and then read once from the disk, so that rank and `cat`
# find their bytes in the same page-cache state (the kernel caches what it reads ahead in large folios,
# while files just written in small pieces, as the generator writes the imatrices, sit in 4 KiB pages:
# comparing rank on those with `cat` of needed.bin, written in 1 MiB pieces, was not like for like).
evict "$WORK"/*.imatrix.gguf "$WORK/needed.bin"
cat "$WORK"/*.imatrix.gguf "$WORK/needed.bin" >/dev/null
read -r CAT_W CAT_C <<<"$(best cat "$WORK/needed.bin")"
read -r R_W R_C <<<"$(best "$BIN" -q rank "${RANK_ARGS[@]}" --no-hash)"
read -r R1_W R1_C <<<"$(best "$BIN" -q rank "${RANK_ARGS[@]}" --no-hash --threads 1)"
read -r H_W H_C <<<"$(best "$BIN" -q rank "${RANK_ARGS[@]}")"
read -r CA_W CA_C <<<"$(best cat "$WORK"/*.imatrix.gguf)"
evict "$WORK/needed.bin"
read -r CATC_W CATC_C <<<"$(run1 cat "$WORK/needed.bin")"
evict "$WORK"/*.imatrix.gguf
read -r RC_W RC_C <<<"$(run1 "$BIN" -q rank "${RANK_ARGS[@]}" --no-hash)"
evict "$WORK"/*.imatrix.gguf
read -r PRC_W PRC_C <<<"$(run1 "${PREAD_RANGES[@]}")"
RSS=$( { /usr/bin/time -v "$BIN" -q rank "${RANK_ARGS[@]}" >/dev/null; } 2>&1 | awk '/Maximum resident/ {print $6}')
FILES=$(du -cb "$WORK"/*.imatrix.gguf | tail -1 | cut -f1)
echo "imatrix files: $FILES bytes in all; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "                                   wall s   cpu s   wall ratio to cat"
printf "cat of the entry bytes (warm)      %6.3f  %6.3f\n" "$CAT_W" "$CAT_C"
printf "rank --no-hash (warm)              %6.3f  %6.3f   %s\n" "$R_W" "$R_C" "$(ratio "$R_W" "$CAT_W")"
printf "rank --no-hash --threads 1 (warm)  %6.3f  %6.3f   %s\n" "$R1_W" "$R1_C" "$(ratio "$R1_W" "$CAT_W")"
printf "cat of the entry bytes (cold)      %6.3f  %6.3f\n" "$CATC_W" "$CATC_C"
printf "pread of the entries in place (cold) %5.3f  %6.3f\n" "$PRC_W" "$PRC_C"
printf "rank --no-hash (cold)              %6.3f  %6.3f   %s (to the entries in place: %s)\n" "$RC_W" "$RC_C" \
    "$(ratio "$RC_W" "$CATC_W")" "$(ratio "$RC_W" "$PRC_W")"
printf "rank with sha256 (warm)            %6.3f  %6.3f   (cat of the whole files: %.3f)\n" "$H_W" "$H_C" "$CA_W"
echo "rank peak RSS (with sha256): ${RSS} KiB"
