#!/usr/bin/env python3
"""Functions of the public API that take or return a type the API does not define (issue 39, item 3).

    tools/api_types.py [ROOT]

The public headers (include/gguf_reap/*.h) may name a type of the library's own (src/) only by a
forward declaration (`class ShardSet;`). Such a type is private: a user of the installed library can
neither build nor look into it. No function declared in include/ may take or return one; a declaration
that needs one belongs in a header under src/, beside the code that uses it.

Prints one line per offending declaration (header:line: function: the private type) and exits 1 if there
is any; with none, prints the private types still named in include/ (as members of results; issue 39's
"results hold one opaque handle") and exits 0.
"""
import pathlib
import re
import sys

FORWARD = re.compile(r'^\s*(?:class|struct)\s+(\w+)\s*;', re.M)
DEFINED = re.compile(r'^\s*(?:class|struct|enum(?:\s+class)?|union)\s+(\w+)\b[^;]*?(?:\{|:\s*(?:public|private|std|uint|int))', re.M)
ALIAS = re.compile(r'^\s*using\s+(\w+)\s*=', re.M)
# A declaration: a return type, a name, a parameter list, then ";" or a body. Member variables (no
# parentheses) and macros are not matched.
# A parameter may have a default, `= {}` or `= f(x)`.
FUNCTION = re.compile(r'(?:^|[;{}]\s*)([A-Za-z_][\w:<>,\s*&]*?)\b(\w+)\s*\('
                      r'((?:[^;{}()]|\{\})*(?:\([^()]*\)(?:[^;{}()]|\{\})*)*)\)'
                      r'\s*(?:const)?\s*(?:noexcept)?\s*(?:;|\{|=)', re.M)


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else '.')
    headers = sorted((root / 'include' / 'gguf_reap').glob('*.h'))
    if not headers:
        print(f'api_types: no headers under {root}/include/gguf_reap', file=sys.stderr)
        return 2
    texts = {h: strip_comments(h.read_text()) for h in headers}
    forward, defined = set(), set()
    for t in texts.values():
        forward.update(FORWARD.findall(t))
        defined.update(DEFINED.findall(t))
        defined.update(ALIAS.findall(t))
    private = forward - defined
    bad = []
    for h, t in texts.items():
        for m in FUNCTION.finditer(t):
            ret, name, params = m.group(1), m.group(2), m.group(3)
            if name in ('if', 'for', 'while', 'switch', 'return', 'sizeof', 'decltype', 'static_assert'):
                continue
            used = sorted(p for p in private if re.search(r'\b%s\b' % p, ret + ' ' + params))
            if used:
                line = t.count('\n', 0, m.start(2)) + 1
                bad.append(f'{h.relative_to(root)}:{line}: {name}: {", ".join(used)}')
    for b in bad:
        print(b)
    if bad:
        print(f'{len(bad)} function(s) in include/ take or return a type include/ does not define; '
              'declare them in a header under src/')
        return 1
    members = sorted(p for p in private if any(re.search(r'\b%s\b' % p, t.replace(f'class {p};', '')
                                                          .replace(f'struct {p};', '')) for t in texts.values()))
    print('no function in include/ takes or returns a private type; still named as members: '
          + (', '.join(members) if members else 'none'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
