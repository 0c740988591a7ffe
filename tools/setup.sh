#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (run as root, or with sudo available):
#   tools/setup.sh demo   install what is missing, build, run the whole release on a generated model:
#                         inspect → rank → splice → audit → estimate → card
#   tools/setup.sh test   install what is missing, build (normal + ASan/UBSan), run every test and fuzz smoke
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}

PACKAGES=(cmake ninja-build g++ pkg-config libcli11-dev nlohmann-json3-dev libspdlog-dev
          libgtest-dev libzip-dev libssl-dev python3 python3-numpy clang libclang-rt-14-dev clang-format
          libcurl4-openssl-dev)

install_missing() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "setup: installing ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {  # build DIR [cmake args...] [-- targets...]
    local dir=$1; shift
    local args=() targets=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    [ "${1:-}" = -- ] && { shift; targets=("$@"); }
    cmake -S "$ROOT" -B "$dir" -G Ninja -DGGUF_REAP_WERROR=ON "${args[@]}" >/dev/null
    cmake --build "$dir" -j "$JOBS" ${targets[@]:+--target "${targets[@]}"}
}

demo() {
    # Only the two programs the demo runs (the tests are most of the build: tools/setup.sh test).
    build build -- gguf-reap gguf-reap-gen
    local out=${DEMO_DIR:-$ROOT/out/demo}
    rm -rf "$out" && mkdir -p "$out"
    local r=build/gguf-reap
    # A small synthetic Kimi-K2-shaped MoE model (2 shards) and two calibration domains, made on the fly.
    build/gguf-reap-gen model --preset demo --shards 2 -o "$out/model"
    build/gguf-reap-gen imatrix --model "$out/model-00001-of-00002.gguf" --domain chat --seed 7 --dead-per-block 2 -o "$out/chat.imatrix.gguf"
    build/gguf-reap-gen imatrix --model "$out/model-00001-of-00002.gguf" --domain code --seed 7 --dead-per-block 2 -o "$out/code.imatrix.gguf"
    echo "== inspect"; $r inspect "$out/model-00001-of-00002.gguf"
    echo "== rank";    $r rank --model "$out/model-00001-of-00002.gguf" --imatrix chat="$out/chat.imatrix.gguf" \
                          --imatrix code="$out/code.imatrix.gguf" --ratio 25% -o "$out/rank"
    echo "== splice";  $r splice "$out/model-00001-of-00002.gguf" --keeplist "$out/rank/keeplist.json" -o "$out/pruned"
    echo "== audit";   $r audit "$out/pruned-00001-of-00002.gguf" --source "$out/model-00001-of-00002.gguf" \
                          --manifest-out "$out/pruned.manifest.json"
    # The card reads the audit's report as JSON: the same audit again (the model is small).
    $r -q audit "$out/pruned-00001-of-00002.gguf" --source "$out/model-00001-of-00002.gguf" --json >"$out/audit.json"
    echo "== estimate"; $r estimate "$out/model-00001-of-00002.gguf" --keeplist "$out/rank/keeplist.json" --tp 2,4
    echo "== card";    $r card "$out/pruned-00001-of-00002.gguf" --source "$out/model-00001-of-00002.gguf" \
                          --rank "$out/rank" --audit "$out/audit.json" --manifest "$out/pruned.manifest.json" \
                          --base-model example/Kimi-K2-demo --tp 2,4 -o "$out/README.md"
    sed -n '1,40p' "$out/README.md"
    echo "demo outputs in $out (the model card: $out/README.md)"
}

run_tests() {
    # A Release (-O3) build, warnings as errors: what users build, and the build whose warnings
    # (-Wrestrict and friends only show at -O3) must stay clean.
    build build -DCMAKE_BUILD_TYPE=Release
    (cd build && ctest --output-on-failure -j "$JOBS")
    # The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, at -O1 with line
    # tables: that compiles in 40 % of the time -O2 -g takes under the sanitizers and still gives
    # symbolized reports (docs/performance.md, "CI").
    # (-Werror stays in the build above: g++ 12's flow warnings are unreliable under ASan instrumentation,
    #  e.g. a false -Wmaybe-uninitialized inside std::regex)
    build build-asan -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DGGUF_REAP_SANITIZE=ON \
        -DGGUF_REAP_WERROR=OFF
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$JOBS")
    # libFuzzer smoke: each parser target for a short fixed time.
    # (only the fuzz targets: they compile the parsers themselves, instrumented for coverage)
    cmake -S "$ROOT" -B build-fuzz -G Ninja -DGGUF_REAP_WERROR=ON -DCMAKE_CXX_COMPILER=clang++ \
        -DGGUF_REAP_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
    cmake --build build-fuzz -j "$JOBS" --target fuzz_gguf_header fuzz_imatrix fuzz_keeplist fuzz_plan_npz fuzz_manifest fuzz_external_plan
    tools/fuzz-smoke.sh build-fuzz "${FUZZ_SECONDS:-8}"
}

install_missing
case "${1:-}" in
    demo) demo ;;
    test) run_tests ;;
    *) echo "usage: tools/setup.sh demo|test" >&2; exit 2 ;;
esac
