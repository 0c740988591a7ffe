#!/usr/bin/env bash
# calibrate's overhead against the same llama-imatrix runs by hand (docs/perf/calibrate.md).
#   tools/bench-calibrate.sh GGUF_REAP LLAMA_BIN [ROUNDS]
# On the trained fixture's five calibration texts at --ctx 128 --threads 1: by hand, the five commands
# calibrate records (llama-imatrix -m M -f TEXT -c 128 -b 128 --no-escape --output-format gguf -o OUT
# -t 1); then calibrate itself (which adds llama-imatrix --version, one llama-tokenize per text, the
# hashes, calibrate.json and rank's sanity check). Rounds alternate hand, calibrate, calibrate, hand, so
# that a machine growing busier or quieter favours neither. Wall time and CPU time (user + system, of
# the process and its children: what load on a shared machine disturbs least) are summed per side.
set -euo pipefail
BIN=$(realpath "$1")
L=$(realpath "$2")
ROUNDS=${3:-2}
T=/work/shared/fixtures/trained
[ -d "$T" ] || T=$(cd "$(dirname "$0")/../../shared/fixtures/trained" && pwd)
M=$T/models/tiny-qwen3moe-trained-A-Q8_0.gguf
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
D=(c changelog legal markdown python)

hand() {
    rm -rf "$W/hand" && mkdir -p "$W/hand"
    for d in "${D[@]}"; do
        "$L/llama-imatrix" -m "$M" -f "$T/corpora/$d.calib.txt" -c 128 -b 128 --no-escape --output-format gguf \
            -o "$W/hand/$d.imatrix.gguf" -t 1 >"$W/hand/$d.log" 2>&1
    done
}
cal() {
    rm -rf "$W/cal"
    args=()
    for d in "${D[@]}"; do args+=(--text "$d=$T/corpora/$d.calib.txt"); done
    "$BIN" -q calibrate --model "$M" "${args[@]}" --ctx 128 --threads 1 --llama-bin "$L" -o "$W/cal" >/dev/null
}
TIMEFORMAT='%R %U %S'
th=0 tc=0 ch=0 cc=0
for r in $(seq "$ROUNDS"); do
    for side in hand cal cal hand; do
        read -r wall user sys < <({ time $side; } 2>&1)
        cpu=$(echo "$user + $sys" | bc)
        printf 'round %s %-4s wall %6.2f s  cpu %6.2f s\n' "$r" "$side" "$wall" "$cpu"
        if [ "$side" = hand ]; then
            th=$(echo "$th + $wall" | bc) ch=$(echo "$ch + $cpu" | bc)
        else
            tc=$(echo "$tc + $wall" | bc) cc=$(echo "$cc + $cpu" | bc)
        fi
    done
done
printf 'wall: by hand %.2f s, calibrate %.2f s: overhead %+.1f %%\n' "$th" "$tc" "$(echo "($tc - $th) * 100 / $th" | bc -l)"
printf 'cpu:  by hand %.2f s, calibrate %.2f s: overhead %+.1f %%\n' "$ch" "$cc" "$(echo "($cc - $ch) * 100 / $ch" | bc -l)"
