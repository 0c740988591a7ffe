#!/usr/bin/env bash
# Counts the string literals outside src/services/llama_cpp/ that name one of llama.cpp's tools
# ("llama-perplexity") or options ("--kl-divergence-base", "-ngl"): services/llama_cpp is the one place
# that knows llama.cpp (docs/design.md, "services/llama_cpp"), and a flag or a tool renamed upstream is
# one line of its table. CI runs it as the ctest `llama_literals`; it fails above the limit.
#   tools/count-llama-literals.sh            print the count, exit 1 above the limit
#   tools/count-llama-literals.sh -v         list each literal counted, file:line
#   tools/count-llama-literals.sh --max N    another limit
#
# What it reads: src/ (but src/cli/, whose help and tables speak to the user in llama.cpp's words) and
# include/, comments stripped; every string literal is one candidate, counted once.
#  - A tool: "llama-" and one of the names below or of the table's (src/services/llama_cpp/), as a word.
#  - An option: a word of llama.cpp's option table (tools/llama-args-table.sh --path) or one the literals
#    of src/services/llama_cpp/ spell. A long one (--temp) counts wherever it stands as a word; a short
#    one (-c, -ngl) where a command line would put it: first in the literal, after "(" or "`", or in a
#    literal that names a tool ("sha256sum -c FILE" is another program's).
set -euo pipefail
cd "$(dirname "$0")/.."
export LLAMA_ARGS_TABLE
LLAMA_ARGS_TABLE=$(tools/llama-args-table.sh --path)
exec python3 - "$@" <<'PY'
import glob, os, re, sys

args = sys.argv[1:]
verbose = "-v" in args
limit = 0
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

def sources(pattern):
    return sorted(f for f in glob.glob(pattern, recursive=True) if re.search(r"\.(cpp|h|inc)$", f))

home = "src/services/llama_cpp/"
option_re = re.compile(r"(?<![\w-])(--?[a-zA-Z][a-zA-Z0-9-]*)(?![\w-])")
tools = {"cli", "server", "perplexity", "imatrix", "completion", "tokenize", "bench", "quantize", "gguf-split",
         "simple", "embedding"}
options = set()
for path in sources(home + "**/*"):
    for _, lit in literals(open(path, encoding="utf-8").read()):
        tools.update(re.findall(r"^llama-([a-z][a-z-]*)$", lit))
        if re.fullmatch(r"(--?[a-zA-Z][a-zA-Z0-9-]*)( --?[a-zA-Z][a-zA-Z0-9-]*)*", lit):
            options.update(lit.split(" "))
table = open(os.environ["LLAMA_ARGS_TABLE"], encoding="utf-8").read().split("\n", 2)[2]
options.update(option_re.findall(table))
tool_re = re.compile(r"(?<![\w-])llama-(" + "|".join(sorted(tools, key=len, reverse=True)) + r")(?![\w-])")

counted = []
for path in sources("src/**/*") + sources("include/**/*"):
    if path.startswith(home) or path.startswith("src/cli/"):
        continue
    for line, lit in literals(open(path, encoding="utf-8").read()):
        names_tool = bool(tool_re.search(lit))
        hits = []
        for m in option_re.finditer(lit):
            o = m.group(1)
            if o not in options:
                continue
            before = lit[:m.start()].rstrip(" ")
            if o.startswith("--") or names_tool or before == "" or before.endswith(("(", "`")):
                hits.append(o)
        if names_tool or hits:
            counted.append((path, line, lit))

if verbose:
    for path, line, lit in counted:
        print(f'{path}:{line}: "{lit}"')
print(f"count-llama-literals: {len(counted)} string literal(s) outside {home} name a llama.cpp tool or "
      f"option (limit {limit}; {len(tools)} tools, {len(options)} options)")
sys.exit(1 if len(counted) > limit else 0)
PY
