#!/usr/bin/env bash
# Measures whether ONE llama-imatrix run over every text, saved every K chunks (--save-frequency K) and
# differenced save by save, gives each text's statistics as calibrate's one run per text does
# (docs/calibrate.md, "One run for all texts?"; the result is in docs/perf/calibrate.md).
#   tools/calibrate-one-run.sh GGUF_REAP LLAMA_BIN [TOKENS]
# On the trained fixture's five calibration texts, each cut to TOKENS (default 2048) tokens by calibrate
# --ctx 128 --threads 1; the one run reads the five cuts concatenated (each a whole number of chunks).
set -euo pipefail
BIN=$(realpath "$1")
L=$(realpath "$2")
N=${3:-2048}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(cd "$HERE/../../shared/fixtures/trained" 2>/dev/null && pwd || echo /work/shared/fixtures/trained)
M=$T/models/tiny-qwen3moe-trained-A-Q8_0.gguf
W=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT; echo "work: $W"
D=(c changelog legal markdown python)
args=()
for d in "${D[@]}"; do args+=(--text "$d=$T/corpora/$d.calib.txt"); done
"$BIN" -q calibrate --model "$M" "${args[@]}" --ctx 128 --tokens "$N" --threads 1 --llama-bin "$L" -o "$W/sep" >/dev/null
# Each cut without the newline calibrate adds for -f, one after the other; a final newline for -f to drop.
: >"$W/all.txt"
for d in "${D[@]}"; do head -c -1 "$W/sep/$d.txt" >>"$W/all.txt"; done
echo >>"$W/all.txt"
total=$(head -c -1 "$W/all.txt" | "$L/llama-tokenize" -m "$M" --stdin --no-escape --ids --show-count --log-disable |
    sed -n 's/^Total number of tokens: //p')
echo "tokens: ${#D[@]} texts x $N = $((${#D[@]} * N)); the concatenation tokenizes to $total"
K=$((N / 128))
"$L/llama-imatrix" -m "$M" -f "$W/all.txt" -c 128 -b 128 --no-escape -t 1 --save-frequency "$K" \
    -o "$W/one.gguf" >"$W/one.log" 2>&1
ls "$W" | grep '^one' | tr '\n' ' '
echo
prev=""
for i in "${!D[@]}"; do
    at=$(((i + 1) * K))
    f=$W/one.gguf.at_$at
    [ -f "$f" ] || f=$W/one.gguf
    printf '%-10s ' "${D[$i]}:"
    if [ -z "$prev" ]; then
        python3 "$HERE/imatrix_diff.py" "$f" "$W/sep/${D[$i]}.imatrix.gguf" || true
    else
        python3 "$HERE/imatrix_diff.py" "$f" "$W/sep/${D[$i]}.imatrix.gguf" --minus "$prev" || true
    fi
    prev=$f
done
