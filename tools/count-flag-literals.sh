#!/usr/bin/env bash
# Counts the string literals in src/{io,format,model,ops} that name a gguf-reap option (--flag): the
# library speaks of request fields and conditions, cli/ spells them as options (docs/design.md,
# "Errors"). CI runs it as the ctest `flag_literals`; it fails above the limit.
#   tools/count-flag-literals.sh            print the count, exit 1 above the limit (10)
#   tools/count-flag-literals.sh -v         list each literal counted, file:line
#   tools/count-flag-literals.sh --max N    another limit
#
# How it counts:
#  - gguf-reap's options are the option spellings src/cli/*.cpp registers with CLI11 (string literals made
#    of option spellings only, e.g. "-o,--output", "--ratio"), long ones and short ones (-o, -q, -v).
#  - In the library's sources (comments stripped), every string literal is one candidate; it counts once
#    when it names one or more of those options ("--ratio {}", "give --force to replace it").
#  - A literal made only of option words that llama.cpp takes ("--chunks", "--version", "--cpu-moe", a
#    row of llama.cpp's option table) is an argument of a llama.cpp command line gguf-reap builds (an argv
#    element) or a name in llama.cpp's option tables, not our wording, and does not count; nor does a
#    literal that is a llama.cpp command line ("llama-server --version"). llama.cpp's options are the
#    words of that table (tools/llama-args-table.sh --path says where it is) and the common ones listed
#    below.
set -euo pipefail
cd "$(dirname "$0")/.."
export LLAMA_ARGS_TABLE
LLAMA_ARGS_TABLE=$(tools/llama-args-table.sh --path)
exec python3 - "$@" <<'PY'
import glob, os, re, sys

args = sys.argv[1:]
verbose = "-v" in args
limit = 10
if "--max" in args:
    limit = int(args[args.index("--max") + 1])

def literals(text):
    """(line, literal body) for each string literal, comments skipped (raw strings are read as plain)."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
        elif c == "'":
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif c == '"':
            j, start = i + 1, line
            while j < n and text[j] != '"':
                if text[j] == "\n":
                    line += 1
                j += 2 if text[j] == "\\" else 1
            out.append((start, text[i + 1:j]))
            i = j + 1
        else:
            i += 1
    return out

flag_re = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")
# A short option standing as a word ("give -o DIR"): -o, -q, -v.
short_re = re.compile(r"(?<![\w-])(-[a-zA-Z])(?![\w-])")

ours = set()
for path in sorted(glob.glob("src/cli/*.cpp")):
    for _, lit in literals(open(path, encoding="utf-8").read()):
        if re.fullmatch(r"[-a-zA-Z0-9]+(,[-a-zA-Z0-9]+)*", lit) and "--" in lit:
            ours.update(m.group(1) for m in flag_re.finditer(lit))
            ours.update(m.group(1) for m in short_re.finditer(lit))

llama = set(re.findall(r"--([a-z][a-z0-9-]*)", open(os.environ["LLAMA_ARGS_TABLE"], encoding="utf-8").read()))
# Options every llama.cpp tool takes (so the per-tool table leaves them out) that gguf-reap's argv use.
llama |= {"version", "help", "cpu-moe", "n-cpu-moe", "cache-type-k", "cache-type-v", "threads", "model",
          "ctx-size", "hf-repo", "temp", "top-k", "seed", "log-disable", "stdin", "ids", "show-count", "no-escape",
          "parallel"}

counted = []
files = sorted(f for d in ("io", "format", "model", "services", "ops") for f in glob.glob(f"src/{d}/**/*", recursive=True)
               if re.search(r"\.(cpp|h|inc)$", f))
for path in files:
    for line, lit in literals(open(path, encoding="utf-8").read()):
        names = [m.group(1) for m in flag_re.finditer(lit) if m.group(1) in ours]
        names += [m.group(1) for m in short_re.finditer(lit) if m.group(1) in ours]
        if not names:
            continue
        words = lit.split(" ")
        if all(re.fullmatch(r"--?[a-zA-Z0-9][a-z0-9-]*", w) for w in words) and all(
                w.lstrip("-") in llama or w.startswith("-") and not w.startswith("--") for w in words):
            continue  # llama.cpp option words: an argv element, or a row of llama.cpp's option tables
        if lit.startswith("llama-"):
            continue  # a llama.cpp command line ("llama-server --version")
        counted.append((path, line, lit))

if verbose:
    for path, line, lit in counted:
        print(f'{path}:{line}: "{lit}"')
print(f"count-flag-literals: {len(counted)} string literal(s) in src/{{io,format,model,services,ops}} name a "
      f"gguf-reap option (limit {limit}; {len(ours)} options)")
sys.exit(1 if len(counted) > limit else 0)
PY
