# The library as others use it (issue 35, docs/library.md): `cmake --install` of this build lays out the
# executable, the public headers, libgguf_reap, the CMake package, gguf_reap.pc and the man pages; a
# program outside the tree (examples/embed) finds the package with find_package and with pkg-config,
# links, and prunes a model through the API (rank, splice, audit), byte for byte as the CLI does; and
# `cpack -G DEB` makes a package whose Depends come from the libraries the binary links, holding
# usr/bin/gguf-reap, the headers and the man pages, and whose unpacked binary runs.
# ctest-parts: deb
source "$(dirname "$0")/lib.sh"
BUILD=$(cd "$(dirname "$BIN")" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
P=$WORK/prefix
# A sanitizer build's library needs -fsanitize at every link outside the tree too: the Release pass tests
# what is installed.
grep -q '^GGUF_REAP_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" &&
    skip_all "a sanitizer build (GGUF_REAP_SANITIZE): its instrumented library is not what is installed"

case_ "cmake --install: bin, headers, library, CMake package, pkg-config file, man pages"
run cmake --install "$BUILD" --prefix "$P"
expect_code 0
LIB=$(sed -n 's/^libdir=\${prefix}\///p' "$BUILD/gguf_reap.pc")
for f in bin/gguf-reap include/gguf_reap/rank.h include/gguf_reap/splice.h include/gguf_reap/audit.h \
    include/gguf_reap/version.h "$LIB/cmake/gguf_reap/gguf_reapConfig.cmake" \
    "$LIB/cmake/gguf_reap/gguf_reapConfigVersion.cmake" "$LIB/cmake/gguf_reap/gguf_reapTargets.cmake" \
    "$LIB/pkgconfig/gguf_reap.pc" share/man/man1/gguf-reap.1.gz share/man/man1/gguf-reap-rank.1.gz \
    share/man/man1/gguf-reap-eval.1.gz; do
    [ -f "$P/$f" ] && _pass || _fail "cmake --install left no $f: $(cd "$P" && find . -type f | head -20 | tr '\n' ' ')"
done
[ -f "$P/$LIB/libgguf_reap.a" ] || compgen -G "$P/$LIB/libgguf_reap.so.*" >/dev/null && _pass ||
    _fail "no libgguf_reap in $P/$LIB"
# Every public header of the tree is installed, and none names a private one.
for h in "$SRC"/include/gguf_reap/*.h; do
    [ -f "$P/include/gguf_reap/$(basename "$h")" ] && _pass || _fail "$(basename "$h") is not installed"
done
"$P/bin/gguf-reap" --version >"$OUT" 2>"$ERR"
expect_out "gguf-reap 0.1.0"
# (roff writes each - of an option as \-)
zcat "$P/share/man/man1/gguf-reap-rank.1.gz" | grep -qF -- '\-\-imatrix' && _pass || _fail "gguf-reap-rank(1) lacks --imatrix"

case_ "a build that made no man pages (named targets only, as tools/setup.sh demo) installs without them"
# The build's own install script, with the man pages looked for in an empty directory: what a build of
# `--target gguf-reap` leaves (the shared build's pages stay where they are).
mkdir -p "$WORK/no-man"
sed "s|$BUILD/man/|$WORK/no-man/|g; s|$BUILD/man\"|$WORK/no-man\"|g" "$BUILD/cmake_install.cmake" >"$WORK/install-no-man.cmake"
grep -qF "$WORK/no-man/gguf-reap.1.gz" "$WORK/install-no-man.cmake" && _pass ||
    _fail "cmake_install.cmake names no $BUILD/man/gguf-reap.1.gz (was help2man missing at configure time?)"
run cmake -DCMAKE_INSTALL_PREFIX="$WORK/p-no-man" -P "$WORK/install-no-man.cmake"
expect_code 0
expect_out "gguf-reap: the man pages were not built (cmake --build $BUILD --target man): installing without them"
[ -x "$WORK/p-no-man/bin/gguf-reap" ] && [ -z "$(find "$WORK/p-no-man" -name '*.1.gz')" ] && _pass ||
    _fail "expected bin/gguf-reap and no man page: $(cd "$WORK/p-no-man" && find . -type f | head)"

# A model and an imatrix to prune in the programs below, and the CLI's own result to compare with.
"$GEN" model --preset tiny -o "$WORK/m.gguf" >/dev/null
"$GEN" imatrix --model "$WORK/m.gguf" -o "$WORK/m.imatrix.gguf" --domain code >/dev/null
"$BIN" -q rank --model "$WORK/m.gguf" --imatrix "calibration=$WORK/m.imatrix.gguf" --ratio 0.25 -o "$WORK/cli-rank" >/dev/null
"$BIN" -q splice "$WORK/m.gguf" --keeplist "$WORK/cli-rank/keeplist.json" -o "$WORK/cli-pruned" >/dev/null

case_ "examples/embed finds the installed package with find_package, links, and prunes through the API"
run cmake -S "$SRC/examples/embed" -B "$WORK/embed" -G Ninja -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release
expect_code 0
run cmake --build "$WORK/embed"
expect_code 0
run "$WORK/embed/embed" "$WORK/m.gguf" "$WORK/m.imatrix.gguf" "$WORK/out"
expect_code 0
expect_out "spliced into $WORK/out/pruned.gguf ($(stat -c %s "$WORK/cli-pruned.gguf") bytes), audit passed (0 findings)"
cmp -s "$WORK/out/pruned.gguf" "$WORK/cli-pruned.gguf" && _pass || _fail "the API's output differs from the CLI's"

case_ "the same program built with pkg-config"
run bash -c "g++ -std=c++20 -O1 '$SRC/examples/embed/main.cpp' -o '$WORK/embed-pc' \$(PKG_CONFIG_PATH='$P/$LIB/pkgconfig' pkg-config --cflags --libs gguf_reap)"
expect_code 0
# pkg-config gives no rpath: a shared libgguf_reap outside the loader's paths is found by LD_LIBRARY_PATH
# (docs/library.md); the static one needs nothing.
run env LD_LIBRARY_PATH="$P/$LIB" "$WORK/embed-pc" "$WORK/m.gguf" "$WORK/m.imatrix.gguf" "$WORK/out-pc"
expect_code 0
cmp -s "$WORK/out-pc/pruned.gguf" "$WORK/cli-pruned.gguf" && _pass || _fail "the pkg-config build's output differs from the CLI's"

have_dpkg() { command -v dpkg-deb && command -v dpkg-shlibdeps && command -v file; }
if part deb "the Debian package: no dpkg-deb, dpkg-shlibdeps or file (apt-get install dpkg-dev file)" have_dpkg; then
    case_ "cpack -G DEB: Depends from the linked libraries; bin, headers, man pages; the unpacked binary runs"
    run bash -c "cd '$BUILD' && cpack -G DEB -B '$WORK/deb'"
    expect_code 0
    DEB=$(ls "$WORK"/deb/gguf-reap_*.deb 2>/dev/null | head -n 1)
    [ -n "$DEB" ] && _pass || _fail "cpack made no gguf-reap_*.deb: $(ls "$WORK/deb")"
    dpkg-deb -f "$DEB" Depends >"$OUT"
    for d in libc6 libstdc++6 libcurl4 libzip4 libssl3; do expect_out "$d"; done
    dpkg-deb -f "$DEB" Package Version >"$OUT"
    expect_out "Package: gguf-reap"
    expect_out "Version: 0.1.0"
    dpkg-deb -c "$DEB" >"$OUT"
    for f in ./usr/bin/gguf-reap ./usr/include/gguf_reap/rank.h ./usr/share/man/man1/gguf-reap.1.gz \
        ./usr/share/man/man1/gguf-reap-splice.1.gz gguf_reap.pc gguf_reapConfig.cmake libgguf_reap; do
        expect_out "$f"
    done
    dpkg-deb -x "$DEB" "$WORK/unpacked"
    "$WORK/unpacked/usr/bin/gguf-reap" --version >"$OUT" 2>"$ERR" && _pass || _fail "the unpacked gguf-reap does not run: $(cat "$ERR")"
    expect_out "gguf-reap 0.1.0"
fi
finish
