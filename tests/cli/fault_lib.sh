# Fault injection for CLI tests (sourced after lib.sh). The shim tests/fault/fault_inject.cpp is built
# by CMake and found through GGUF_REAP_FAULT_SHIM; its FAULT_* variables are documented in that file.
SHIM=${GGUF_REAP_FAULT_SHIM:-}
have_shim() { [ -n "$SHIM" ] && [ -f "$SHIM" ]; }
# require_shim: a script made only of fault cases ends here, as skipped, when the shim is not built.
require_shim() {
    have_shim && return
    skip_all "GGUF_REAP_FAULT_SHIM is not set (run through ctest)"
}
# The ASan build insists on its runtime coming first in the library list; the shim has no sanitizer of
# its own and only forwards calls, so the order does not matter here.
if ldd "$BIN" 2>/dev/null | grep -q libasan; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
fi

# faulty FAULT_X=... CMD ARGS...: `run` with the shim preloaded and the given FAULT_* settings.
faulty() {
    local envs=()
    while [[ $# -gt 0 && "$1" == FAULT_* ]]; do
        envs+=("$1")
        shift
    done
    run env LD_PRELOAD="$SHIM" "${envs[@]}" "$@"
}

# expect_only DIR NAME...: DIR holds exactly these names (no temporary, no lock file, nothing else).
expect_only() {
    local dir=$1
    shift
    local want got
    want=$(printf '%s\n' "$@" | sed '/^$/d' | sort)
    got=$(ls -A "$dir" | sort)
    [ "$got" = "$want" ] && _pass || _fail "$dir holds '$(echo $got)', expected '$(echo $want)'"
}

# expect_same_bytes SUMFILE: every file listed in a sha256sum file still has those bytes.
expect_same_bytes() {
    (cd "$(dirname "$1")" && sha256sum --quiet -c "$1" >/dev/null 2>&1) && _pass || _fail "bytes differ from $1"
}
