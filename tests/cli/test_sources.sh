# CMakeLists.txt lists the sources (issue 35; docs/design.md): every .cpp under src/ and tools/gen/ is
# named in a list there, so that a file added without a line fails here instead of being left out of
# the library, and the build never depends on what a glob found.
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

case_ "every source file is listed in CMakeLists.txt"
missing=""
while IFS= read -r f; do
    [ "$f" = src/main.cpp ] && continue
    grep -qE "^[[:space:]]*$f\$" "$SRC/CMakeLists.txt" || missing="$missing $f"
done < <(cd "$SRC" && find src tools/gen -name '*.cpp' | sort)
[ -z "$missing" ] && _pass || _fail "not listed in CMakeLists.txt:$missing"
grep -q 'file(GLOB' "$SRC/CMakeLists.txt" && _fail "CMakeLists.txt still globs sources" || _pass
finish
