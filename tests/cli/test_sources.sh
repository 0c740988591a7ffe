# CMakeLists.txt lists the sources (issue 35; docs/design.md): every .cpp under src/ and tools/gen/, every
# public header, every tests/*_test.cpp and every tests/cli/test_*.sh is named in a list, so that a file
# added without a line fails here instead of being left out, and the build never depends on what a glob
# found.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

case_ "every source file is listed in CMakeLists.txt"
missing=""
while IFS= read -r f; do
    [ "$f" = src/main.cpp ] && continue
    grep -qE "^[[:space:]]*$f\)?\$" "$SRC/CMakeLists.txt" || missing="$missing $f"
done < <(cd "$SRC" && find src tools/gen include -name '*.cpp' -o -name '*.h' -path 'include/*' | sort)
[ -z "$missing" ] && _pass || _fail "not listed in CMakeLists.txt:$missing"
missing=""
while IFS= read -r f; do
    grep -qE "^[[:space:]]*$f\)?\$" "$SRC/tests/CMakeLists.txt" || missing="$missing $f"
done < <(cd "$SRC/tests" && find . -maxdepth 1 -name '*_test.cpp' | sed 's|^\./||' | sort)
[ -z "$missing" ] && _pass || _fail "unit tests not listed in tests/CMakeLists.txt:$missing"
missing=""
while IFS= read -r f; do
    grep -qE "^[[:space:]]*$f\)?\$" "$SRC/tests/CMakeLists.txt" || missing="$missing $f"
done < <(cd "$SRC/tests" && find cli -maxdepth 1 -name 'test_*.sh' | sort)
[ -z "$missing" ] && _pass || _fail "CLI tests not listed in tests/CMakeLists.txt:$missing"
# The fuzz build names a few io/ and services/ sources; each must exist (a rename broke it once).
missing=$(/usr/bin/python3 - "$SRC" <<'PY'
import os, re, sys
src = sys.argv[1]
text = open(os.path.join(src, "tests/fuzz/CMakeLists.txt")).read()
for names, d in re.findall(r"foreach\(f ([^)]*)\)\s*list\(APPEND \S+ \$\{PROJECT_SOURCE_DIR\}/(src/\w+)/", text):
    for n in names.split():
        if not os.path.exists(os.path.join(src, d, n + ".cpp")):
            print(f"{d}/{n}.cpp")
PY
)
[ -z "$missing" ] && _pass || _fail "tests/fuzz/CMakeLists.txt names sources that do not exist: $missing"
grep -q 'file(GLOB' "$SRC/CMakeLists.txt" "$SRC/tests/CMakeLists.txt" "$SRC/tests/fuzz/CMakeLists.txt" &&
    _fail "a CMakeLists.txt still globs sources" || _pass
finish
