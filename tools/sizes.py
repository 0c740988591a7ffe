#!/usr/bin/env python3
"""Functions over 100 lines and files over 500 in the library and the CLI (src/, include/): issue 39's
sizes, checked. A file or a function may be longer when a comment in its first lines (the file's first
ten, or the ten above the function) holds "better whole:" and says why.

    tools/sizes.py [--max-function N] [--max-file N] [ROOT]

Prints one line per function or file over its limit and exits 1 if there is any, 0 otherwise.

A function is found the way clang-format lays them out: a line ending in "{" whose statement (with the
lines before it that continue it) has a parameter list and is not a control statement, a lambda or an
initializer; it ends at the first line that is its first line's indentation and "}". Its length counts
from the signature's first line to that brace, as a reader scrolls it.
"""
import argparse
import pathlib
import re
import sys

CONTROL = re.compile(r'^\s*(if|for|while|switch|else|do|catch|try|return|case)\b')
TYPE = re.compile(r'^(namespace|struct|class|enum|union|extern)\b')
WHOLE = 'better whole:'


def functions(lines):
    """(first line, last line, signature) of each function definition, 0-based."""
    for i, line in enumerate(lines):
        text = line.strip()
        if not text.endswith('{') or CONTROL.match(line) or text.startswith(('//', '#')):
            continue
        j = i
        while j > 0:
            prev = lines[j - 1].strip()
            if not prev or prev.endswith((';', '{', '}', ':')) or prev.startswith(('//', '#', 'template')):
                break
            j -= 1
        sig = ' '.join(x.strip() for x in lines[j:i + 1])
        head = sig[:sig.rfind('{')]
        if CONTROL.match(lines[j]) or '](' in sig or ')' not in head or TYPE.match(sig):
            continue
        if '=' in head.split('(')[0]:  # an initializer: `auto x = f(...) {`, a table
            continue
        indent = lines[j][:len(lines[j]) - len(lines[j].lstrip())]
        for k in range(i + 1, len(lines)):
            if lines[k].rstrip() in (indent + '}', indent + '};'):
                yield j, k, sig
                break


def excused(lines, first):
    return any(WHOLE in line for line in lines[max(0, first - 10):first])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--max-function', type=int, default=100)
    ap.add_argument('--max-file', type=int, default=500)
    ap.add_argument('root', nargs='?', default=pathlib.Path(__file__).resolve().parent.parent, type=pathlib.Path)
    a = ap.parse_args()
    over = []
    paths = sorted(p for d in ('src', 'include') for p in (a.root / d).rglob('*') if p.suffix in ('.cpp', '.h'))
    for p in paths:
        lines = p.read_text().split('\n')
        if lines and lines[-1] == '':
            lines.pop()
        name = p.relative_to(a.root)
        if len(lines) > a.max_file and not excused(lines, 10):
            over.append(f'{name}: {len(lines)} lines (at most {a.max_file}, or a "{WHOLE}" comment at its top)')
        for first, last, sig in functions(lines):
            n = last - first + 1
            if n > a.max_function and not excused(lines, first):
                over.append(f'{name}:{first + 1}: {n} lines, {sig[:60]}... (at most {a.max_function})')
    for line in over:
        print(line)
    print(f'sizes: {len(paths)} files, {len(over)} over the limits', file=sys.stderr)
    return 1 if over else 0


if __name__ == '__main__':
    sys.exit(main())
