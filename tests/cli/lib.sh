# Helpers for CLI tests. Each tests/cli/test_*.sh is one CTest test, cli.test_X, run as
#   bash test_X.sh GGUF_REAP GGUF_REAP_GEN SHARED_DIR
# It sources this file, calls `run ...` and the expect_* assertions, and ends with `finish`.
#
# Parts: cases that run only where something is present (../shared/fixtures, llama.cpp's binaries,
# numpy, the fault shim) form a part, and each part is a CTest test of its own, so that a skipped part
# shows as skipped in ctest's summary ("The following tests did not run: … (Skipped)") instead of
# hiding inside a passing script. A script names its parts on one line near its top,
#   # ctest-parts: fixtures numpy
# and tests/CMakeLists.txt registers cli.test_X.fixtures and cli.test_X.numpy beside cli.test_X. The
# script runs its parts itself (they share its set-up) and reports each one exactly once, with `part`
# (or `fixtures`, the part named "fixtures") where it decides, or `part_skipped`. cli.test_X.NAME then
# passes when the part ran (its cases count in cli.test_X, which must pass first) and exits 77, shown
# as skipped with the reason in its output, when it did not. `finish` fails the script when a listed
# part was never reported or an unlisted one was; `skip_all` reports every listed part as skipped.
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

SCRIPT=$(basename "$0" .sh)
# The parts this script lists (see the top of this file), and where their outcome goes for CTest.
PARTS_LISTED=" $(sed -n 's/^# ctest-parts: *//p' "$0" | tr -s ' \t' '  ') "
PARTS_DIR=${GGUF_REAP_CLI_PARTS:-}
PARTS_REPORTED=" "
SKIPPED=0
if [ -n "$PARTS_DIR" ]; then
    mkdir -p "$PARTS_DIR"
    rm -f "$PARTS_DIR/$SCRIPT".*
fi

_report_part() {  # _report_part NAME OUTCOME
    case $PARTS_REPORTED in
        *" $1 "*) _fail "part '$1' reported twice" ;;
    esac
    PARTS_REPORTED="$PARTS_REPORTED$1 "
    if [ -n "$PARTS_DIR" ]; then echo "$2" >"$PARTS_DIR/$SCRIPT.$1"; fi
}
# part NAME WHAT CONDITION...: true, and part NAME ran, when CONDITION succeeds; otherwise false, and
# part NAME is skipped ("skipped: WHAT" on stdout and in cli.test_X.NAME).
part() {
    local name=$1 what=$2
    shift 2
    if "$@" >/dev/null 2>&1; then
        _report_part "$name" ran
        return 0
    fi
    part_skipped "$name" "$what"
    return 1
}
# part_skipped NAME WHAT: part NAME does not run here (e.g. it lies inside another part that did not).
part_skipped() {
    echo "skipped: $2"
    SKIPPED=$((SKIPPED + 1))
    _report_part "$1" "skipped: $2"
}

# skipped: the old way to skip a group of cases, which CTest never saw. It now fails the script.
skipped() { _fail "skipped \"$*\": make it a part (part_skipped NAME WHAT, listed in '# ctest-parts:')"; }

# live_why [HINT]: the parenthesis a live part's skip line ends with (cases that run llama.cpp's own tools,
# found through GGUF_REAP_LLAMA_BIN): "(HINT)", by default "(set GGUF_REAP_LLAMA_BIN to llama.cpp's bin
# directory)"; but in the ASan/UBSan pass, which leaves GGUF_REAP_LLAMA_BIN unset on purpose
# (tools/setup.sh sets GGUF_REAP_TEST_PASS=sanitizers for it), "(not run under the sanitizers: the live
# parts run in the Release pass)".
LIVE_BIN_GIVEN=${GGUF_REAP_LLAMA_BIN:+1}
live_why() {
    if [ "${GGUF_REAP_TEST_PASS:-}" = sanitizers ] && [ -z "$LIVE_BIN_GIVEN" ]; then
        echo "(not run under the sanitizers: the live parts run in the Release pass)"
    else
        local hint="set GGUF_REAP_LLAMA_BIN to llama.cpp's bin directory"
        echo "(${1:-$hint})"
    fi
}

have_fixtures() { [ -f "$FIX/expected.json" ]; }
# fixtures WHAT: `part fixtures`: true when ../shared/fixtures is there; otherwise WHAT is skipped.
fixtures() { part fixtures "$1 (no $FIX)" have_fixtures; }
# skip_all REASON: nothing in this script can run here; CTest shows it, and each of its parts, as skipped
# (SKIP_RETURN_CODE 77).
skip_all() {
    echo "skipped: $*"
    local p
    for p in $PARTS_LISTED; do
        if [ -n "$PARTS_DIR" ]; then echo "skipped: $*" >"$PARTS_DIR/$SCRIPT.$p"; fi
    done
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
    echo "  stdout: $(head -c 2000 "$OUT" 2>/dev/null)" >&2
    echo "  stderr: $(head -c 2000 "$ERR" 2>/dev/null)" >&2
    # tools/mutants.sh: a mutant is killed by its first failure; the cases after it would cost minutes.
    if [ -n "${GGUF_REAP_TEST_FAIL_FAST:-}" ]; then
        echo "GGUF_REAP_TEST_FAIL_FAST: stopped at the first failure" >&2
        exit 1
    fi
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

# wait_for WHAT CMD...: runs CMD every 50 ms until it succeeds, for an event another process makes (a
# file written, a line logged); false, failing the case, when WHAT has not happened after 120 s (a bound
# for a broken run, not what the test waits for).
wait_for() {
    local what=$1 i
    shift
    for ((i = 0; i < 2400; i++)); do
        "$@" 2>/dev/null && return 0
        sleep 0.05
    done
    _fail "$what did not happen within 120 s"
    return 1
}

# True when a server listens on 127.0.0.1:PORT, read from /proc/net/tcp without connecting: a probe
# connection would count as a client of a server that logs its clients, and ggml-rpc-server's own
# "endpoint" line sits in its stdout buffer while its stdout is a file.
listening() {
    grep -q " $(printf '0100007F:%04X' "$1") 00000000:0000 0A " /proc/net/tcp
}

finish() {
    local p
    for p in $PARTS_LISTED; do
        case $PARTS_REPORTED in *" $p "*) ;; *) CASE="parts" _fail "part '$p' is listed in '# ctest-parts:' but was never reported" ;; esac
    done
    for p in $PARTS_REPORTED; do
        case $PARTS_LISTED in *" $p "*) ;; *) CASE="parts" _fail "part '$p' was reported but is not listed in '# ctest-parts:'" ;; esac
    done
    echo "$PASSED passed, $FAILED failed, $SKIPPED part(s) skipped"
    [ "$FAILED" -eq 0 ]
}
