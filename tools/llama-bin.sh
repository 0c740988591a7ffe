#!/usr/bin/env bash
# tools/llama-bin.sh SRC DEST: prints a directory of llama.cpp's tools that runs here, for
# GGUF_REAP_LLAMA_BIN. That is SRC itself when its tools start; when SRC's shared-library symlinks arrived
# as small text files naming their target (a copy made without symlinks, as ../shared/llama.cpp/bin is),
# it is DEST: a copy of SRC's files with those links made real again (the tools find their libraries
# through RPATH $ORIGIN, so a copy runs anywhere). Exit 1, saying why on stderr, when neither runs.
set -euo pipefail
src=$1 dest=$2
starts() { "$1/llama-completion" --version >/dev/null 2>&1; }
if starts "$src"; then
    echo "$src"
    exit 0
fi
links=0
for f in "$src"/lib*.so*; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    [ "$(stat -c %s "$f")" -lt 256 ] || continue
    target=$(head -c 255 "$f")
    case $target in */* | "") continue ;; esac
    [ -e "$src/$target" ] && links=$((links + 1))
done
if [ $links = 0 ]; then
    echo "llama-bin: $src/llama-completion does not start: $("$src/llama-completion" --version 2>&1 | tail -n 1)" >&2
    exit 1
fi
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
for f in "$src"/*; do
    name=$(basename "$f")
    if [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 256 ] && case $name in lib*.so*) true ;; *) false ;; esac; then
        target=$(head -c 255 "$f")
        if [ -e "$src/$target" ] && case $target in */*) false ;; *) true ;; esac; then
            ln -s "$target" "$dest.tmp/$name"
            continue
        fi
    fi
    cp -p "$f" "$dest.tmp/$name"
    chmod u+w "$dest.tmp/$name"
done
rm -rf "$dest"
mv "$dest.tmp" "$dest"
if ! starts "$dest"; then
    echo "llama-bin: $dest/llama-completion does not start either: $("$dest/llama-completion" --version 2>&1 | tail -n 1)" >&2
    exit 1
fi
echo "llama-bin: $src has its library symlinks as text files ($links); using a copy with real links, $dest" >&2
echo "$dest"
