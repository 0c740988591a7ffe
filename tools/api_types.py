#!/usr/bin/env python3
"""Private types in the public API (issue 39, item 3: "the API is only API").

    tools/api_types.py [ROOT]

The public headers (include/gguf_reap/*.h) may name a type of the library's own (src/) only by a
forward declaration (`class ShardSet;`, `enum class ExpertRole : uint8_t;`). Such a type is private: a
user of the installed library can neither build nor look into it. Two rules:

- No function declared in include/ may take or return one; a declaration that needs one belongs in a
  header under src/, beside the code that uses it.
- The one private type include/ may name is the handle `Opened` (include/gguf_reap/opened.h), which
  results hold to what their command opened or planned. Any other forward declaration of a type that
  include/ does not define is refused: a result holds the handle, or plain data.

Prints one line per offence (header:line: function: the private type, or header:line: the type) and exits
1 if there is any; with none, says so and exits 0.
"""
import pathlib
import re
import sys

FORWARD = re.compile(r'^\s*(?:class|struct)\s+(\w+)\s*;', re.M)
# An opaque enum declaration (`enum class ExpertRole : uint8_t;`) is a forward declaration too.
OPAQUE_ENUM = re.compile(r'^\s*enum\s+(?:class\s+|struct\s+)?(\w+)\s*:\s*[\w:]+\s*;', re.M)
# The one private type the public headers may name.
HANDLE = 'Opened'
DEFINED = re.compile(r'^\s*(?:class|struct|union)\s+(\w+)\b[^;]*?(?:\{|:\s*(?:public|private|std|uint|int))', re.M)
ENUM_DEFINED = re.compile(r'^\s*enum\s+(?:class\s+|struct\s+)?(\w+)\s*(?::\s*[\w:]+\s*)?\{', re.M)
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
        forward.update(OPAQUE_ENUM.findall(t))
        defined.update(DEFINED.findall(t))
        defined.update(ENUM_DEFINED.findall(t))
        defined.update(ALIAS.findall(t))
    private = forward - defined
    bad = []
    for h, t in texts.items():
        for m in list(FORWARD.finditer(t)) + list(OPAQUE_ENUM.finditer(t)):
            if m.group(1) in private and m.group(1) != HANDLE:
                line = t.count('\n', 0, m.start(1)) + 1
                bad.append(f'{h.relative_to(root)}:{line}: {m.group(1)}: forward-declared, and include/ does not '
                           f'define it (only the handle {HANDLE} may be)')
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
        print(f'{len(bad)} use(s) of a type include/ does not define: declare such a function in a header '
              f'under src/; hold such a type in the handle {HANDLE} (src/services/opened.h), or define it in '
              'include/')
        return 1
    print('no function in include/ takes or returns a private type, and no public header declares one but '
          f'the handle {HANDLE}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
