# Helpers for CLI tests. Each tests/cli/test_*.sh is one CTest test, run as
#   bash test_X.sh GGUF_REAP GGUF_REAP_GEN SHARED_DIR
# It sources this file, calls `run ...` and the expect_* assertions, and ends with `finish`.
set -u
BIN=$1
GEN=$2
SHARED=$3
FIX=$SHARED/fixtures
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gguf-reap-cli.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
OUT=$WORK/.out
ERR=$WORK/.err
CODE=0

SKIPPED=0

have_fixtures() { [ -f "$FIX/expected.json" ]; }
# fixtures WHAT: true when ../shared/fixtures is there; otherwise says that WHAT is skipped.
fixtures() {
    have_fixtures && return 0
    skipped "$1 (no $FIX)"
    return 1
}
# skipped WHAT: some cases of this script did not run; stdout says which, and finish counts them.
skipped() {
    echo "skipped: $*"
    SKIPPED=$((SKIPPED + 1))
}
# skip_all REASON: nothing in this script can run here; CTest shows it as skipped (SKIP_RETURN_CODE 77).
skip_all() {
    echo "skipped: $*"
    exit 77
}

# run CMD ARGS...: runs a command, capturing stdout, stderr and the exit code.
run() {
    CODE=0
    "$@" >"$OUT" 2>"$ERR" </dev/null || CODE=$?
}

_fail() {
    FAILED=$((FAILED + 1))
    echo "FAIL [${CASE:-?}]: $*" >&2
    echo "  stdout: $(head -c 2000 "$OUT")" >&2
    echo "  stderr: $(head -c 2000 "$ERR")" >&2
}
_pass() { PASSED=$((PASSED + 1)); }

case_() { CASE=$1; }
expect_code() { [ "$CODE" -eq "$1" ] && _pass || _fail "exit code $CODE, expected $1"; }
expect_out() { grep -qF -- "$1" "$OUT" && _pass || _fail "stdout lacks: $1"; }
expect_err() { grep -qF -- "$1" "$ERR" && _pass || _fail "stderr lacks: $1"; }
expect_no_out() { [ ! -s "$OUT" ] && _pass || _fail "stdout not empty"; }
expect_err_lines() { [ "$(wc -l <"$ERR")" -eq "$1" ] && _pass || _fail "stderr has $(wc -l <"$ERR") lines, expected $1"; }
# expect_json PYTHON_EXPR: evaluates EXPR with `d` bound to stdout parsed as exactly one JSON document.
expect_json() {
    /usr/bin/python3 - "$OUT" "$1" <<'PY' && _pass || _fail "json check failed: $1"
import json, sys
d = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
sys.exit(0 if ok else 1)
PY
}

finish() {
    echo "$PASSED passed, $FAILED failed, $SKIPPED group(s) of cases skipped"
    [ "$FAILED" -eq 0 ]
}
