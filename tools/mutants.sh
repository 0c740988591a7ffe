#!/usr/bin/env bash
# Mutation testing (docs/testing.md, "Mutants"): applies each mutation of tests/mutants.txt, one at a time,
# to a scratch copy of the tree, rebuilds what its test needs, runs only that test, and says whether the
# test killed the mutant (failed) or let it survive (passed).
#   tools/mutants.sh                       every mutant of the list
#   tools/mutants.sh --check               only check the list: every snippet occurs exactly once in its
#                                          file and every test named exists (no build; ctest mutants.check)
#   tools/mutants.sh --filter REGEX        the mutants whose name matches REGEX (grep -E)
#   tools/mutants.sh --sample N [--seed S] N of them, chosen at random (the seed is printed)
#   tools/mutants.sh --build-dir DIR       where the scratch copy and its build live (default build-mutants)
#   tools/mutants.sh --list FILE           another list (default tests/mutants.txt)
#   tools/mutants.sh --no-baseline         do not first run the tests on the unmutated build
#   tools/mutants.sh --sanitizers          build and test as the ASan/UBSan pass of tools/setup.sh test does
#                                          (DIR/build-asan, without llama.cpp: live mutants are skipped)
# Exit 0 when every mutant run was killed; 1 when one survived or did not build (or --check found a
# problem); 2 on bad usage or a malformed list; 3 when the unmutated tree does not build or its tests
# fail (then nothing can be measured); 130 when interrupted.
#
# Neither the tree nor build/ is ever written. DIR/src is a copy of the tree's files (tracked and
# untracked, not ignored), synced at the start of each run (a changed file is copied, with a new mtime, so
# that the incremental build sees it); DIR/shared points at ../shared, as the tree's does; DIR/build is a
# Release build with warnings as errors, like the Release pass of tools/setup.sh test (DIR/build-asan, with
# --sanitizers, is like its ASan/UBSan pass). Each mutant is
# written into DIR/src and the file is restored on every way out (the EXIT trap; a mutant left there by a
# killed run is undone by the next sync). While a mutant is built, DIR/build holds its binaries: they are
# deleted on the way out, so that no one runs a mutant by mistake, and rebuilt by the next run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
JOBS=${JOBS:-$(nproc)}

usage() {
    sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

LIST=$ROOT/tests/mutants.txt
BD=$ROOT/build-mutants
FILTER=""
SAMPLE=""
SEED=""
CHECK=0
BASELINE=1
SANITIZERS=0
while [ $# -gt 0 ]; do
    case $1 in
        --list) LIST=${2:?--list needs a file}; shift 2 ;;
        --build-dir) BD=${2:?--build-dir needs a directory}; shift 2 ;;
        --filter) FILTER=${2?--filter needs a regex}; shift 2 ;;
        --sample) SAMPLE=${2:?--sample needs a count}; shift 2 ;;
        --seed) SEED=${2:?--seed needs a number}; shift 2 ;;
        --check) CHECK=1; shift ;;
        --no-baseline) BASELINE=0; shift ;;
        --sanitizers) SANITIZERS=1; shift ;;
        -h|--help) usage ;;
        *) echo "mutants: unknown argument '$1'" >&2; usage ;;
    esac
done
case $SAMPLE in ''|[1-9]|[1-9][0-9]|[1-9][0-9][0-9]) ;; *) echo "mutants: --sample takes a count of 1 or more" >&2; exit 2 ;; esac
case $SEED in ''|[0-9]|[0-9]*[0-9]) ;; *) echo "mutants: --seed takes a number" >&2; exit 2 ;; esac
[ -f "$LIST" ] || { echo "mutants: $LIST: no such file" >&2; exit 2; }
LIST=$(cd "$(dirname "$LIST")" && pwd)/$(basename "$LIST")

# The list's parser and the steps that handle text: `listtool COMMAND ARGS...`.
listtool() {
    python3 - "$@" <<'PY'
import os, random, re, shutil, subprocess, sys, xml.etree.ElementTree as ET

def fail(msg, code=2):
    print(f"mutants: {msg}", file=sys.stderr)
    sys.exit(code)

# ---- the list: blocks separated by blank lines; "# " lines are comments -------------------------------
def parse(path):
    """(blocks, problems). A block: name, why, line, file, test, live, minus (snippet), plus (replacement)."""
    blocks, problems, cur = [], [], None
    rel = os.path.relpath(path)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for no, line in enumerate(lines, 1):
        where = f"{rel}:{no}"
        if line.startswith("## "):
            if cur is not None:
                problems.append(f"{where}: a new block starts without a blank line after '{cur['name']}'")
            m = re.fullmatch(r"## ([A-Za-z0-9._-]+): (\S.*)", line)
            if not m:
                problems.append(f"{where}: a block starts '## NAME: why' (NAME of letters, digits, . _ -)")
                cur = {"name": "?", "why": "", "line": no}
            else:
                cur = {"name": m[1], "why": m[2], "line": no}
            cur.update(file=None, test=None, live=False, minus=[], plus=[])
            blocks.append(cur)
        elif line.strip() == "":
            cur = None
        elif line.startswith("#"):
            continue
        elif cur is None:
            problems.append(f"{where}: outside a block (a block starts with '## NAME: why')")
        elif line.startswith("file:"):
            cur["file"] = line[5:].strip()
        elif line.startswith("test:"):
            cur["test"] = line[5:].strip()
        elif line.startswith("live:"):
            v = line[5:].strip()
            if v not in ("yes", "no"):
                problems.append(f"{where}: live: is yes or no, not '{v}'")
            cur["live"] = v == "yes"
        elif line.startswith("-"):
            if cur["plus"]:
                problems.append(f"{where}: a '-' line after the '+' lines of '{cur['name']}'")
            cur["minus"].append(line[1:])
        elif line.startswith("+"):
            cur["plus"].append(line[1:])
        else:
            problems.append(f"{where}: not a key (file:, test:, live:), a '-' or '+' line, or a '# ' comment")
    seen = {}
    for b in blocks:
        where = f"{rel}:{b['line']}: {b['name']}"
        if b["name"] in seen and b["name"] != "?":
            problems.append(f"{where}: the name is already used on line {seen[b['name']]}")
        seen.setdefault(b["name"], b["line"])
        if not b["file"]:
            problems.append(f"{where}: no file:")
        if not b["test"]:
            problems.append(f"{where}: no test:")
        else:
            try:
                re.compile(b["test"])
            except re.error as e:
                problems.append(f"{where}: test: '{b['test']}' is not a regex ({e})")
        if not b["minus"]:
            problems.append(f"{where}: no '-' lines (the snippet to replace)")
        elif b["minus"] == b["plus"]:
            problems.append(f"{where}: the '+' lines equal the '-' lines: nothing is mutated")
    return blocks, problems

def occurrences(text, s):
    n, i = 0, text.find(s)
    while i >= 0:
        n += 1
        i = text.find(s, i + 1)
    return n

def snippet(b):
    return "\n".join(b["minus"])

def mutate(b, text):
    """The file's text with the mutation applied; the snippet must occur exactly once."""
    s, r = snippet(b), "\n".join(b["plus"])
    n = occurrences(text, s)
    if n != 1:
        return None, n
    i = text.find(s)
    end = i + len(s)
    # A deletion of whole lines takes their line break too.
    if not b["plus"] and (i == 0 or text[i - 1] == "\n") and text[end:end + 1] == "\n":
        end += 1
    return text[:i] + r + text[end:], 1

# ---- the ctest names the tree defines, read from its sources (no build needed) ------------------------
def static_test_names(root):
    names = set()
    tests = os.path.join(root, "tests")
    cm = open(os.path.join(tests, "CMakeLists.txt"), encoding="utf-8").read()
    m = re.search(r"set\(GGUF_REAP_CLI_TESTS(.*?)\)", cm, re.S)
    for script in re.findall(r"cli/(test_\w+)\.sh", m[1] if m else ""):
        names.add(f"cli.{script}")
        try:
            body = open(os.path.join(tests, "cli", script + ".sh"), encoding="utf-8").read()
        except OSError:
            continue
        pm = re.search(r"^# ctest-parts:(.*)$", body, re.M)
        for p in (pm[1].split() if pm else []):
            names.add(f"cli.{script}.{p}")
    for f in (os.path.join(root, "CMakeLists.txt"), os.path.join(tests, "CMakeLists.txt")):
        names.update(re.findall(r"add_test\(NAME ([A-Za-z0-9_.-]+)", open(f, encoding="utf-8").read()))
    for f in sorted(os.listdir(tests)):
        if not f.endswith(".cpp"):
            continue
        src = open(os.path.join(tests, f), encoding="utf-8").read()
        for kind, suite, test in re.findall(r"\bTEST(_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)", src):
            names.add(f"P/{suite}.{test}/0" if kind == "_P" else f"{suite}.{test}")
    return names

def matching(test, names):
    rx = re.compile(test)
    return sorted(n for n in names if rx.fullmatch(n))

# ---- commands ------------------------------------------------------------------------------------------
def cmd_check(list_path, root):
    blocks, problems = parse(list_path)
    names = static_test_names(root)
    for b in blocks:
        where = f"{os.path.relpath(list_path)}:{b['line']}: {b['name']}"
        if b["file"]:
            path = os.path.join(root, b["file"])
            if not os.path.isfile(path):
                problems.append(f"{where}: file: {b['file']} does not exist")
            elif b["minus"]:
                _, n = mutate(b, open(path, encoding="utf-8").read())
                if n != 1:
                    problems.append(f"{where}: the snippet occurs {n} times in {b['file']}, not once"
                                    + (" (the code moved: update the snippet or the file)" if n == 0 else
                                       " (add lines around it until it is unique)"))
        try:
            if b["test"] and not matching(b["test"], names):
                problems.append(f"{where}: test: '{b['test']}' names no test of the tree")
        except re.error:
            pass  # named above
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"mutants: {len(problems)} problem(s) in {os.path.relpath(list_path)}", file=sys.stderr)
        sys.exit(1)
    live = sum(b["live"] for b in blocks)
    print(f"mutants: {os.path.relpath(list_path)}: {len(blocks)} mutants ({live} live), every snippet "
          "occurs exactly once in its file and every test named exists")

def cmd_sync(root, tree, exclude):
    """Copies the tree's files into `tree` where they differ (new mtime), removes files it no longer has."""
    exclude = os.path.realpath(exclude)
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "-co", "--exclude-standard"],
                             check=True, capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, fs in os.walk(root):
            dirs[:] = [x for x in dirs if not (d == root and (x.startswith("build") or x in (".git", "out")))]
            files += [os.path.relpath(os.path.join(d, f), root) for f in fs]
    keep, copied = set(), 0
    for f in files:
        src = os.path.join(root, f)
        if os.path.realpath(src).startswith(exclude + os.sep) or not os.path.lexists(src) or os.path.isdir(src):
            continue
        keep.add(f)
        dst = os.path.join(tree, f)
        if os.path.islink(src):
            if not (os.path.islink(dst) and os.readlink(dst) == os.readlink(src)):
                if os.path.lexists(dst):
                    os.remove(dst)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.symlink(os.readlink(src), dst)
                copied += 1
            continue
        with open(src, "rb") as fh:
            data = fh.read()
        try:
            with open(dst, "rb") as fh:
                same = fh.read() == data
        except OSError:
            same = False
        if not same:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as fh:
                fh.write(data)
            copied += 1
        shutil.copymode(src, dst)
    removed = 0
    for d, _, fs in os.walk(tree):
        for f in fs:
            rel = os.path.relpath(os.path.join(d, f), tree)
            if rel not in keep:
                os.remove(os.path.join(d, f))
                removed += 1
    print(f"mutants: scratch copy {tree}: {len(keep)} files, {copied} copied, {removed} removed",
          file=sys.stderr)

def cmd_apply(list_path, tree, name):
    blocks, _ = parse(list_path)
    b = next((b for b in blocks if b["name"] == name), None)
    if b is None:
        fail(f"no mutant '{name}' in {list_path}")
    path = os.path.join(tree, b["file"])
    text = open(path, encoding="utf-8").read()
    out, n = mutate(b, text)
    if out is None:
        fail(f"{name}: the snippet occurs {n} times in {b['file']}, not once")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(out)

def ctest_names(names_file):
    names = []
    for line in open(names_file, encoding="utf-8", errors="replace"):
        m = re.match(r"\s*Test +#\d+: (\S+)", line)
        if m:
            names.append(m[1])
    return names

def cmd_select(list_path, names_file, flt, sample, seed, llama):
    """Prints NAME<TAB>FILE<TAB>TEST<TAB>STATE<TAB>TESTS<TAB>BUILD: STATE is "run" or "skip:<why>", TESTS the
    ctest names TEST matches (comma-joined), BUILD "cli" when they are all CLI tests (no test binary needed),
    else "all"."""
    blocks, _ = parse(list_path)
    names = ctest_names(names_file)
    chosen = [b for b in blocks if not flt or re.search(flt, b["name"])]
    if not chosen:
        fail(f"no mutant's name matches '{flt}'")
    rows = []
    for b in chosen:
        tests = matching(b["test"], names)
        if not tests:
            fail(f"{b['name']}: test: '{b['test']}' matches no test of the build", 3)
        state = "run"
        if b["live"] and not llama:
            state = "skip:live: its test needs llama.cpp, and GGUF_REAP_LLAMA_BIN is not set"
        rows.append((b, tests, state))
    if sample:
        runnable = [i for i, r in enumerate(rows) if r[2] == "run"]
        pick = set(random.Random(int(seed)).sample(runnable, min(int(sample), len(runnable))))
        rows = [r for i, r in enumerate(rows) if i in pick]
    for b, tests, state in rows:
        build = "cli" if all(t.startswith("cli.") for t in tests) else "all"
        print("\t".join([b["name"], b["file"], b["test"], state, ",".join(tests), build]))

def junit(path):
    """{test: "passed" | "failed" | "skipped"} from ctest --output-junit."""
    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        status = tc.get("status", "")
        if tc.find("failure") is not None or tc.find("error") is not None or status == "fail":
            out[tc.get("name")] = "failed"
        elif tc.find("skipped") is not None or status in ("disabled", "notrun"):
            out[tc.get("name")] = "skipped"
        else:
            out[tc.get("name")] = "passed"
    return out

def cmd_outcome(junit_path, tests):
    """Prints "failed T1 T2..", "skipped", or "passed" for the tests of one run."""
    res = junit(junit_path)
    tests = tests.split(",")
    failed = [t for t in tests if res.get(t) == "failed"]
    missing = [t for t in tests if t not in res]
    if failed or missing:
        print("failed " + " ".join(failed + missing))
    elif all(res.get(t) == "skipped" for t in tests):
        print("skipped")
    else:
        print("passed")

cmd = sys.argv[1]
args = sys.argv[2:]
{"check": cmd_check, "sync": cmd_sync, "apply": cmd_apply, "select": cmd_select,
 "outcome": cmd_outcome}[cmd](*args)
PY
}

if [ $CHECK = 1 ]; then
    cd "$ROOT"
    listtool check "$LIST" "$ROOT"
    exit $?
fi

# The list is checked before anything is built: a stale snippet fails in a second, not after a build.
(cd "$ROOT" && listtool check "$LIST" "$ROOT") || exit 2

mkdir -p "$BD"
BD=$(cd "$BD" && pwd)
TREE=$BD/src
BUILD=$BD/build
LOGS=$BD/logs
mkdir -p "$TREE" "$LOGS"
# One run at a time in a build directory.
exec 9>"$BD/lock"
flock -n 9 || { echo "mutants: another run is using $BD" >&2; exit 3; }
rm -f "$LOGS"/*.log "$LOGS"/*.log.test
# The list as it was at the start: it may be edited while the run goes on.
cp "$LIST" "$BD/mutants.txt"
LIST=$BD/mutants.txt

# The mutant in effect (its file in TREE) and whether BUILD holds a mutant's binaries.
MUTATED=""
DIRTY=0
restore() {
    if [ -n "$MUTATED" ]; then
        # Rewritten, not moved back: a new mtime, so that the next build compiles it again.
        cat "$BD/original" >"$TREE/$MUTATED"
        MUTATED=""
    fi
}
cleanup() {
    restore
    if [ $DIRTY = 1 ]; then
        rm -f "$BUILD/gguf-reap" "$BUILD/gguf-reap-gen" "$BUILD/tests/gguf_reap_tests"
    fi
}
trap cleanup EXIT
trap 'echo "mutants: interrupted; restoring $BD/src" >&2; exit 130' INT
trap 'exit 143' TERM

START=$(date +%s)
secs() { echo $(($(date +%s) - $1)); }
mmss() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }

# The scratch copy, and ../shared beside it as beside the tree (the tests read the fixtures from there).
listtool sync "$ROOT" "$TREE" "$BD"
if [ -e "$ROOT/../shared" ]; then
    ln -sfn "$(cd "$ROOT/../shared" && pwd)" "$BD/shared"
else
    rm -f "$BD/shared"
fi

launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# The flags of tools/setup.sh test's two passes; the sanitizer pass runs its tests without llama.cpp.
if [ $SANITIZERS = 1 ]; then
    BUILD=$BD/build-asan
    flags=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DGGUF_REAP_SANITIZE=ON -DGGUF_REAP_WERROR=OFF)
    unset GGUF_REAP_LLAMA_BIN
    export ASAN_OPTIONS=detect_leaks=1 GGUF_REAP_TEST_PASS=sanitizers
else
    flags=(-DCMAKE_BUILD_TYPE=Release -DGGUF_REAP_WERROR=ON)
fi
if [ ! -f "$BUILD/build.ninja" ]; then
    echo "mutants: configuring $BUILD (${flags[*]})" >&2
    cmake -S "$TREE" -B "$BUILD" -G Ninja "${flags[@]}" "${launcher[@]}" \
        >"$LOGS/configure.log" 2>&1 || { tail -n 30 "$LOGS/configure.log" >&2; exit 3; }
fi
echo "mutants: building the unmutated tree in $BUILD" >&2
if ! cmake --build "$BUILD" -j "$JOBS" >"$LOGS/build.log" 2>&1; then
    tail -n 30 "$LOGS/build.log" >&2
    echo "mutants: the unmutated tree does not build (log: $LOGS/build.log)" >&2
    exit 3
fi
(cd "$BUILD" && ctest -N) >"$LOGS/tests.txt"

llama=""
[ -n "${GGUF_REAP_LLAMA_BIN:-}" ] && llama=1
[ -n "$SAMPLE" ] && [ -z "$SEED" ] && SEED=$(( $(date +%s) % 100000 ))
selected=$(listtool select "$LIST" "$LOGS/tests.txt" "$FILTER" "$SAMPLE" "$SEED" "$llama") || exit $?
[ -n "$selected" ] || exit 3
mapfile -t ROWS <<<"$selected"
[ -n "$SAMPLE" ] && echo "mutants: a sample of ${#ROWS[@]} (seed $SEED: --sample $SAMPLE --seed $SEED repeats it)" >&2

# ctest over exactly the tests named (a regex anchored at both ends); the outcome is read from its
# JUnit report. `run_ctest LOG REGEX [FAST]`: with FAST, a CLI script stops at its first failing case
# (GGUF_REAP_TEST_FAIL_FAST, tests/cli/lib.sh), which is all a mutant needs to be killed; the baseline
# runs every case.
run_ctest() {
    (cd "$BUILD" && GGUF_REAP_TEST_FAIL_FAST=${3:-} ctest -j "$JOBS" --output-on-failure -R "^($2)\$" \
        --output-junit "$LOGS/junit.xml") >"$1" 2>&1 || true
}

# The baseline: every test named, once, on the unmutated build. A test that fails there would "kill"
# every mutant; one that is skipped here cannot kill any.
BASE_SECS=0
if [ $BASELINE = 1 ]; then
    regex=""
    for row in "${ROWS[@]}"; do
        IFS=$'\t' read -r _ _ test state _ _ <<<"$row"
        [ "$state" = run ] && regex=${regex:+$regex|}$test
    done
    if [ -n "$regex" ]; then
        echo "mutants: running the tests named on the unmutated build" >&2
        t0=$(date +%s)
        run_ctest "$LOGS/baseline.log" "$regex"
        BASE_SECS=$(secs "$t0")
        cp "$LOGS/junit.xml" "$LOGS/baseline.xml"
        for i in "${!ROWS[@]}"; do
            IFS=$'\t' read -r name file test state tests build <<<"${ROWS[$i]}"
            [ "$state" = run ] || continue
            outcome=$(listtool outcome "$LOGS/baseline.xml" "$tests")
            case $outcome in
                failed*)
                    echo "mutants: ${outcome#failed } fail(s) without any mutation (log: $LOGS/baseline.log):" \
                        "fix the tree first" >&2
                    exit 3 ;;
                skipped)
                    state="skip:$test skips here (see $LOGS/baseline.log)"
                    ROWS[$i]=$(printf '%s\t' "$name" "$file" "$test" "$state" "$tests" "$build") ;;
            esac
        done
    fi
fi

killed=0 survived=0 unbuilt=0 skipped=0 build_secs=0 test_secs=0
bad=()
n=${#ROWS[@]}
i=0
for row in "${ROWS[@]}"; do
    i=$((i + 1))
    IFS=$'\t' read -r name file test state tests build <<<"$row"
    tag=$(printf '[%2d/%d] %-40s' "$i" "$n" "$name")
    if [ "$state" != run ]; then
        echo "$tag skipped (${state#skip:})"
        skipped=$((skipped + 1))
        continue
    fi
    # The programs the CLI tests run; the test binary too when a unit test is named.
    targets=(gguf-reap gguf-reap-gen fault_inject)
    [ "$build" = cli ] || targets+=(gguf_reap_tests)
    log=$LOGS/$name.log
    cp "$TREE/$file" "$BD/original"
    MUTATED=$file
    listtool apply "$LIST" "$TREE" "$name"
    t0=$(date +%s)
    if ! cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" >"$log" 2>&1; then
        restore
        b=$(secs "$t0")
        build_secs=$((build_secs + b))
        echo "$tag DOES NOT BUILD (a mutant must be a real program; log: $log)"
        unbuilt=$((unbuilt + 1))
        bad+=("$name (does not build)")
        continue
    fi
    DIRTY=1
    b=$(secs "$t0")
    t1=$(date +%s)
    run_ctest "$log.test" "$test" 1
    cat "$log.test" >>"$log" && rm -f "$log.test"
    t=$(secs "$t1")
    restore
    build_secs=$((build_secs + b))
    test_secs=$((test_secs + t))
    outcome=$(listtool outcome "$LOGS/junit.xml" "$tests")
    case $outcome in
        failed*)
            echo "$tag killed by ${outcome#failed } (build $b s, test $t s)"
            killed=$((killed + 1)) ;;
        skipped)
            echo "$tag skipped ($test skipped under the mutant; log: $log)"
            skipped=$((skipped + 1)) ;;
        *)
            echo "$tag SURVIVED: $test passed (build $b s, test $t s; log: $log)"
            survived=$((survived + 1))
            bad+=("$name (survived)") ;;
    esac
done

total=$(secs "$START")
echo "mutants: $n: $killed killed, $survived survived, $unbuilt do not build, $skipped skipped;" \
    "$(mmss "$total") (builds $(mmss "$build_secs"), tests $(mmss "$test_secs"), baseline $(mmss "$BASE_SECS"))"
if [ ${#bad[@]} -gt 0 ]; then
    printf 'mutants: not killed: %s\n' "${bad[@]}"
    exit 1
fi
