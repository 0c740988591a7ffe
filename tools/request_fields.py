#!/usr/bin/env python3
"""Every request field a command's messages name is an option that command takes (issue 39, item 3).

    tools/request_fields.py ROOT GGUF_REAP     (ctest request_fields)

Each request type declares the fields its messages name, once, in its public header
(include/gguf_reap/error.h, RequestField):

    struct RankOptions {
        static constexpr RequestField kImatrix{"imatrix"}, kScores{"scores"}, ...;

and the CLI spells a field as "--" and its name with '-' for '_', the output as "-o"
(src/cli/options.cpp, option_spelling). This reads the declarations from include/ and, for each command,
the options its --help lists, and checks:
  - each field a request declares is an option its command registers, spelled so. A request's command is
    its header's: rank.h is rank's, estimate_fit.h estimate's. A settings type declared elsewhere
    (Budget, in budget.h) is the commands' whose requests hold one: a member of that type, or of a
    template of it (std::optional<Budget>), in a request that declares fields, followed through the
    settings types it reaches;
  - the constant is the name said in words (kImatrixIn for "imatrix_in"), a name is declared once per
    type, and every declared field is named by some source in src/ (a field no message names is
    not declared);
  - no field is made anywhere else: no RequestField constant in src/, none outside a type in include/.
Prints one line per problem and exits 1 if there is any; else one line of counts, and exits 0.
"""
import pathlib
import re
import subprocess
import sys

STRUCT = re.compile(r'^(?:struct|class) (\w+)[^;\n]*\{\n(.*?)^\};', re.M | re.S)
DECL = re.compile(r'static\s+constexpr\s+RequestField\s+([^;]*);')
ONE = re.compile(r'(\w+)\s*\{\s*"([^"]*)"\s*\}')
ANY_DECL = re.compile(r'\bRequestField\s+k\w+\s*\{|\bRequestField\s*\{\s*"')
HELP_OPTION = re.compile(r'^  (-[^\s]+)', re.M)


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def constant(name):
    return 'k' + ''.join(w.capitalize() for w in name.split('_'))


def spelling(name):
    return '-o' if name == 'out' else '--' + name.replace('_', '-')


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    root, binary = pathlib.Path(sys.argv[1]), sys.argv[2]
    problems = []
    commands = sorted(p.stem for p in (root / 'src' / 'cli').glob('*.cpp')
                      if 'add_subcommand(' in p.read_text())

    def command_of(header_stem):
        return next((c for c in commands if header_stem == c or header_stem.startswith(c + '_')), None)

    # type → (header, its fields {constant: name}, the type's member lines)
    types = {}
    for h in sorted((root / 'include' / 'gguf_reap').glob('*.h')):
        text = strip_comments(h.read_text())
        inside = 0
        for m in STRUCT.finditer(text):
            body = m.group(2)
            fields = {}
            for d in DECL.finditer(body):
                inside += 1
                for const, name in ONE.findall(d.group(1)):
                    if const != constant(name):
                        problems.append(f'{h.name}: {m.group(1)}::{const}{{"{name}"}}: the constant of "{name}" '
                                        f'is {constant(name)}')
                    if name in fields.values():
                        problems.append(f'{h.name}: {m.group(1)} declares "{name}" twice')
                    fields[const] = name
            types[m.group(1)] = (h, fields, DECL.sub('', body))
        if len(DECL.findall(text)) != inside:
            problems.append(f'{h.name}: a RequestField declared outside a type (a request declares its own)')
    for p in sorted((root / 'src').rglob('*')):
        if p.suffix in ('.h', '.cpp', '.inc'):
            for i, line in enumerate(strip_comments(p.read_text()).splitlines(), 1):
                if ANY_DECL.search(line):
                    problems.append(f'{p.relative_to(root)}:{i}: a RequestField made outside include/ '
                                    '(declare it in the request it belongs to)')

    declaring = {t for t, (_, fields, _) in types.items() if fields}
    reached = {}  # type → the commands whose requests reach it
    for t in sorted(declaring):
        c = command_of(types[t][0].stem)
        if c:
            reached.setdefault(t, set()).add(c)
    todo = list(reached)
    while todo:
        t = todo.pop()
        for u in declaring:
            if u != t and re.search(rf'\b{u}\b', types[t][2]) and not reached[t] <= reached.get(u, set()):
                reached.setdefault(u, set()).update(reached[t])
                todo.append(u)

    sources = '\n'.join(strip_comments(p.read_text()) for p in (root / 'src').rglob('*')
                        if p.suffix in ('.h', '.cpp'))
    options = {}
    for c in sorted({c for cs in reached.values() for c in cs}):
        run = subprocess.run([binary, c.replace('_', '-'), '--help'], capture_output=True, text=True)
        if run.returncode != 0:
            problems.append(f'{binary} {c.replace("_", "-")} --help: exit {run.returncode}')
        options[c] = {n for first in HELP_OPTION.findall(run.stdout) for n in first.split(',')}
    count = 0
    for t in sorted(declaring):
        h, fields, _ = types[t]
        if t not in reached:
            problems.append(f'{h.name}: {t} declares fields but no command\'s request holds one')
            continue
        for const, name in fields.items():
            count += 1
            if not re.search(rf'\b{t}::{const}\b', sources):
                problems.append(f'{h.name}: {t}::{const} is named by no source in src/')
            for c in sorted(reached[t]):
                if spelling(name) not in options[c]:
                    problems.append(f'{h.name}: {t}::{const} is spelled {spelling(name)}, which '
                                    f'`gguf-reap {c.replace("_", "-")}` does not take')
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f'request_fields: {count} fields declared by {len(declaring)} types, each an option of '
          f'{", ".join(sorted({c for cs in reached.values() for c in cs}))} as its requests reach it')
    return 0


if __name__ == '__main__':
    sys.exit(main())
