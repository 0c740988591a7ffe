#!/usr/bin/env bash
# tools/record-llama.sh OUT_DIR: records, from the llama.cpp build in $GGUF_REAP_LLAMA_BIN, every file of
# tests/data/llama-perplexity (its README.md lists the commands; the fakes in tests/cli/fake-llama replay
# them), into OUT_DIR. Needs ../shared/fixtures/trained and a built gguf-reap (BUILD, default build).
# Compare with the committed files (the figures differ between builds: an AVX-512 build and an AVX2 one
# differ in the last digits), then copy them over and update the figures the tests pin.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
L=${GGUF_REAP_LLAMA_BIN:?set GGUF_REAP_LLAMA_BIN to llama.cpp\'s bin directory}
B=$ROOT/${BUILD:-build}/gguf-reap
T=$(cd ../shared/fixtures/trained && pwd)
M=$T/models/tiny-qwen3moe-trained-A-Q8_0.gguf
F16=$T/models/tiny-qwen3moe-trained-A-f16.gguf
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
# rec PATTERN LOG CMD...: runs CMD (stdout and stderr to LOG) until LOG has a line matching PATTERN, at most
# 5 times: llama.cpp's logger thread may lose a run's last lines at exit, and a recording must be whole.
rec() {
    local pat=$1 log=$2 i
    shift 2
    for i in 1 2 3 4 5; do
        "$@" >"$log" 2>&1 </dev/null || true
        grep -q -- "$pat" "$log" && return 0
    done
    echo "record-llama: $log never had a line matching '$pat' in 5 runs; kept the last run's" >&2
}
for k in 12 8; do
    IM=()
    for d in c changelog legal markdown python; do IM+=(--imatrix "$d=$T/imatrix/tiny-qwen3moe-trained-A.$d.imatrix.gguf"); done
    "$B" -q rank --model "$M" "${IM[@]}" --keep $k -o rank$k >/dev/null
    "$B" -q splice "$M" --keeplist rank$k/keeplist.json -o keep$k >/dev/null
done
"$L/llama-perplexity" --version >"$OUT/version.txt" 2>&1
for t in python c; do
    rec "Final estimate" "$OUT/base-$t.txt" "$L/llama-perplexity" -m "$M" -f "$T/corpora/$t.heldout.txt" -c 128 \
        -b 2048 --chunks 8 --no-escape --kl-divergence-base $t.kld
    for k in 12 8; do
        rec "^Same top p" "$OUT/kld-keep$k-$t.txt" "$L/llama-perplexity" -m keep$k.gguf -f "$T/corpora/$t.heldout.txt" \
            -c 128 -b 2048 --chunks 8 --no-escape --kl-divergence-base $t.kld --kl-divergence
    done
    # eval --reference: the f16 model's logits, then the source and both builds against them.
    rec "Final estimate" "$OUT/base-f16-$t.txt" "$L/llama-perplexity" -m "$F16" -f "$T/corpora/$t.heldout.txt" -c 128 \
        -b 2048 --chunks 8 --no-escape --kl-divergence-base f16-$t.kld
    for b in source keep12 keep8; do
        m=$M
        [ $b = source ] || m=$b.gguf
        rec "^Same top p" "$OUT/kld-$b-f16-$t.txt" "$L/llama-perplexity" -m "$m" -f "$T/corpora/$t.heldout.txt" \
            -c 128 -b 2048 --chunks 8 --no-escape --kl-divergence-base f16-$t.kld --kl-divergence
    done
    # llama-perplexity's -f drops one trailing newline; llama-tokenize reads the same bytes from stdin.
    python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.stdout.buffer.write(d[:-1] if d.endswith(b"\n") else d)' \
        "$T/corpora/$t.heldout.txt" |
        "$L/llama-tokenize" -m "$M" --stdin --no-escape --ids --show-count --log-disable | tail -n 1 >"$OUT/tokenize-$t.txt"
done
rec "Final estimate" "$OUT/base-python-1chunk.txt" "$L/llama-perplexity" -m "$M" -f "$T/corpora/python.heldout.txt" \
    -c 128 -b 2048 --chunks 1 --no-escape --kl-divergence-base python1.kld
# 63 scored tokens: no summary, so the whole run ends with its one chunk row.
rec "^   1 " "$OUT/kld-keep8-python-1chunk.txt" "$L/llama-perplexity" -m keep8.gguf -f "$T/corpora/python.heldout.txt" \
    -c 128 -b 2048 --chunks 1 --no-escape --kl-divergence-base python1.kld --kl-divergence
head -c 200 "$T/corpora/python.heldout.txt" >short.txt
cp short.txt "$OUT/short.txt"
rec "tokenizes to only" "$OUT/base-too-short.txt" "$L/llama-perplexity" -m "$M" -f short.txt -c 128 -b 2048 \
    --chunks 8 --no-escape --kl-divergence-base short.kld
"$L/llama-tokenize" -m "$M" --stdin --no-escape --ids --show-count --log-disable <short.txt | tail -n 1 >"$OUT/tokenize-short.txt"
# This build (34af94cd9, the AVX-512/OpenMP CPU build of ../shared) exits 0 before its logger writes the
# "failed to open missing.kld" line, every time here: the recording is what it prints, at most 5 tries.
rec "failed to open" "$OUT/kld-missing-base.txt" "$L/llama-perplexity" -m keep8.gguf -f "$T/corpora/python.heldout.txt" \
    -c 128 -b 2048 --chunks 8 --no-escape --kl-divergence-base missing.kld --kl-divergence
# The summary cut after its "Mean    KLD" line, as llama.cpp's logger thread loses the last lines at exit.
sed '/^Mean    KLD:/q' "$OUT/kld-keep8-python.txt" >"$OUT/kld-keep8-python-cut.txt"
for b in source keep12 keep8; do
    m=$M
    [ $b = source ] || m=$b.gguf
    if [ $b != keep12 ]; then
        "$L/llama-completion" -m "$m" -p "def main(" -n 16 --temp 0 --top-k 1 -no-cnv --no-warmup -s 1 \
            >"$OUT/completion-$b.out" 2>/dev/null </dev/null
    fi
    args=(-m "$m" -p 'def main(' -n 16 -c 256 --temp 0 --top-k 1 -s 1 -no-cnv --no-warmup --no-escape --verbose-prompt)
    rm -f $b.session $b.s2
    smoke() { rm -f $b.session; "$L/llama-completion" "${args[@]}" --prompt-cache $b.session --prompt-cache-all; }
    rec "saved final session" "$OUT/smoke-$b.txt" smoke
    "$L/llama-completion" "${args[@]}" --prompt-cache $b.s2 --prompt-cache-all >"$OUT/smoke-$b.stdout" 2>/dev/null </dev/null
    # Magic, version, count and the ids (4 + 4 + 4 + 4 × count bytes); the context state after them is cut.
    n=$(python3 -c 'import struct, sys; print(struct.unpack_from("<I", open(sys.argv[1], "rb").read(), 8)[0])' $b.session)
    head -c $((12 + 4 * n)) $b.session >"$OUT/smoke-$b.session"
done
echo "recorded into $OUT from $L" >&2
