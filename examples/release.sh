#!/usr/bin/env bash
# From a Hub repository and a budget to an upload folder: the whole of gguf-reap's pipeline, in the order
# docs/release.md walks through.
#
#   examples/release.sh [OPTIONS] ORG/REPO:QUANT[@REVISION] BUDGET [NAME=TEXT...] -o DIR
#
#   ORG/REPO:QUANT  the model, as llama.cpp's -hf names it (hf:// in front is optional)
#   BUDGET          rank --fit's budget: size=277GB, or memory=288GiB[,ctx=N][,overhead=SIZE][,tp=N]
#   NAME=TEXT       a kind of calibration text (a local file): calibrate makes NAME's imatrix with
#                   llama-imatrix, which needs a local copy of the model (--local, or the HF cache)
#   -o DIR          the run's directory; the upload folder is DIR/upload
#
# Options:
#   --imatrix NAME=FILE|URL  a published imatrix instead of calibrating (repeatable; http(s):// or hf://)
#   --local PATH            a local copy of the model (any shard), for calibrate and eval; without it they
#                           are given the pinned hf:// model, which they read from the HF cache
#   --heldout NAME=FILE     a text eval measures (repeatable); without any, eval measures the calibration
#                           texts, and the card says they are not held out
#   --no-eval               do not run eval (the card then says the build was not measured)
#   --name NAME             the build's file name (default: the source's, with -REAPnn before the quant)
#   --hf-repo ORG/REPO      where the build will be uploaded (the card's "How to run")
#   --calibrate-args ARGS, --rank-args ARGS, --splice-args ARGS, --eval-args ARGS, --card-args ARGS
#                           more options for that command (split as a shell would, quotes kept), e.g.
#                           --eval-args "--ctx 512 --chunks 32 --llama-args '-ngl 99'"
#
# Environment: GGUF_REAP (the gguf-reap to run; default: the one on PATH), and what gguf-reap reads
# (HF_TOKEN, HF_ENDPOINT, HF_HUB_CACHE, GGUF_REAP_LLAMA_BIN, ...).
#
# Run it again after a failure or a kill, with the same arguments: every step that finished is not run
# again (DIR/.release/STEP.done), and the step that was stopped continues where its command can (calibrate
# keeps the imatrices it finished, splice resumes its shards) or starts over (the others are quick or
# write nothing until they finish). Other arguments for the same DIR are refused: use another DIR.
# Exit codes: those of the step that failed (2 bad usage or input, 3 I/O, 130 interrupted).
set -euo pipefail

die() { echo "release.sh: $*" >&2; exit 2; }
say() { echo "release.sh: $*" >&2; }
REAP=${GGUF_REAP:-gguf-reap}

ORIG_ARGS=("$@")
MODEL="" BUDGET="" DIR="" LOCAL="" NAME="" HF_REPO="" NO_EVAL=0
TEXTS=() IMATRICES=() HELDOUT=()
CALIBRATE_ARGS="" RANK_ARGS="" SPLICE_ARGS="" EVAL_ARGS="" CARD_ARGS=""
need() { [ $# -ge 2 ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
    case $1 in
        -o) need "$@"; DIR=$2; shift ;;
        --imatrix) need "$@"; IMATRICES+=("$2"); shift ;;
        --local) need "$@"; LOCAL=$2; shift ;;
        --heldout) need "$@"; HELDOUT+=("$2"); shift ;;
        --no-eval) NO_EVAL=1 ;;
        --name) need "$@"; NAME=$2; shift ;;
        --hf-repo) need "$@"; HF_REPO=$2; shift ;;
        --calibrate-args) need "$@"; CALIBRATE_ARGS=$2; shift ;;
        --rank-args) need "$@"; RANK_ARGS=$2; shift ;;
        --splice-args) need "$@"; SPLICE_ARGS=$2; shift ;;
        --eval-args) need "$@"; EVAL_ARGS=$2; shift ;;
        --card-args) need "$@"; CARD_ARGS=$2; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *)
            if [ -z "$MODEL" ]; then MODEL=$1
            elif [ -z "$BUDGET" ]; then BUDGET=$1
            else case $1 in ?*=?*) TEXTS+=("$1") ;; *) die "$1: a text is NAME=FILE" ;; esac; fi ;;
    esac
    shift
done
{ [ -n "$MODEL" ] && [ -n "$BUDGET" ] && [ -n "$DIR" ]; } || die "usage: release.sh ORG/REPO:QUANT BUDGET [NAME=TEXT...] -o DIR (see --help)"
command -v "$REAP" >/dev/null || die "gguf-reap not found (set GGUF_REAP or put it on PATH)"
command -v python3 >/dev/null || die "python3 is needed to read gguf-reap's JSON"
case $MODEL in hf://*) ;; *) MODEL=hf://$MODEL ;; esac
case $MODEL in hf://*/*:*) ;; *) die "$MODEL: the model is ORG/REPO:QUANT[@REVISION]" ;; esac
[ ${#TEXTS[@]} -gt 0 ] || [ ${#IMATRICES[@]} -gt 0 ] ||
    die "nothing to rank from: give calibration texts (NAME=FILE) or published imatrices (--imatrix NAME=URL)"
[ ${#TEXTS[@]} -eq 0 ] || [ ${#IMATRICES[@]} -eq 0 ] ||
    die "calibration texts and --imatrix together: give one or the other"
for t in "${TEXTS[@]}" "${HELDOUT[@]}"; do [ -f "${t#*=}" ] || die "${t#*=}: no such file"; done
[ -z "$LOCAL" ] || [ -f "$LOCAL" ] || die "$LOCAL: no such file"

# split OPTION ARGS: WORDS, the words of ARGS as a shell splits them (quotes kept together, nothing
# expanded); words a shell would not take (an unclosed quote) are refused, naming OPTION.
split() {
    WORDS=()
    [ -n "$2" ] || return 0
    local words
    words=$(python3 -c 'import shlex, sys; print("\n".join(shlex.split(sys.argv[1])))' "$2" 2>/dev/null) ||
        die "$1 '$2': not words a shell would read (an unclosed quote?)"
    mapfile -t WORDS <<<"$words"
}
# Every --*-args is read now, so that a typo fails before the first step rather than after hours.
split --calibrate-args "$CALIBRATE_ARGS"
split --rank-args "$RANK_ARGS"
split --splice-args "$SPLICE_ARGS"
split --eval-args "$EVAL_ARGS"
split --card-args "$CARD_ARGS"

# The run's record: the same arguments, or another DIR.
S=$DIR/.release
mkdir -p "$S"
printf '%q ' "${ORIG_ARGS[@]}" >"$S/args.new"
if [ -f "$S/args" ]; then
    cmp -s "$S/args" "$S/args.new" ||
        die "$DIR holds a run with other arguments ($(cat "$S/args")): give those, or another -o DIR"
    say "continuing the run in $DIR"
else
    mv "$S/args.new" "$S/args"
fi
rm -f "$S/args.new"

# step NAME COMMAND...: runs COMMAND unless an earlier run finished NAME.
step() {
    local name=$1
    shift
    if [ -f "$S/$name.done" ]; then
        say "$name: finished in an earlier run"
        return 0
    fi
    local shown=("$@")
    [ "$1" != to ] || shown=("${@:3}")
    say "$name: ${shown[*]}"
    local start=$SECONDS
    "$@" || return $?
    touch "$S/$name.done"
    say "$name: finished in $((SECONDS - start)) s"
}
# to FILE COMMAND...: COMMAND's stdout into FILE, which appears only when COMMAND succeeds.
to() {
    local file=$1
    shift
    "$@" >"$file.part" || return $?
    mv "$file.part" "$file"
}
json() { python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print($2)" "$1"; }

# 1. Pin the revision: inspect reads the headers only; every later step names the commit it found.
step inspect to "$DIR/inspect.json" "$REAP" inspect --json "$MODEL"
PINNED=$(json "$DIR/inspect.json" "d['shards'][0]['path']")
say "the model: $PINNED"

# 2. What the budget keeps, from the headers.
step estimate to "$DIR/estimate.txt" "$REAP" estimate "$PINNED" --fit "$BUDGET"
cat "$DIR/estimate.txt"

# 3. Imatrices: calibrate on a local (or cached) copy, or the published ones.
SOURCE_LOCAL=${LOCAL:-$PINNED}
RANK_INPUTS=()
CALIBRATION=()
if [ ${#TEXTS[@]} -gt 0 ]; then
    split --calibrate-args "$CALIBRATE_ARGS"
    args=(calibrate --model "$SOURCE_LOCAL" -o "$DIR/calibrate")
    for t in "${TEXTS[@]}"; do args+=(--text "$t"); done
    step calibrate "$REAP" "${args[@]}" "${WORDS[@]}"
    for t in "${TEXTS[@]}"; do RANK_INPUTS+=(--imatrix "${t%%=*}=$DIR/calibrate/${t%%=*}.imatrix.gguf"); done
    CALIBRATION=(--calibration "$DIR/calibrate/calibrate.json")
else
    for m in "${IMATRICES[@]}"; do RANK_INPUTS+=(--imatrix "$m"); done
fi

# 4. Rank to the budget. --force: a rank stopped before it finished starts over.
split --rank-args "$RANK_ARGS"
step rank "$REAP" rank "${RANK_INPUTS[@]}" --model "$PINNED" --fit "$BUDGET" -o "$DIR/rank" --force "${WORDS[@]}"

# 5. Splice from the Hub (it resumes by itself).
if [ -z "$NAME" ]; then
    NAME=$(python3 - "$DIR/inspect.json" "$DIR/rank/keeplist.json" "${MODEL##*:}" <<'PY'
import json, re, sys
first = json.load(open(sys.argv[1]))["shards"][0]["path"]
keep = json.load(open(sys.argv[2]))
quant = sys.argv[3].split("@")[0]
base = re.sub(r"(-\d{5}-of-\d{5})?\.gguf$", "", first.split("@")[0].rsplit("/", 1)[-1])
e = keep["source"]["expert_count"]
tag = "REAP%d" % round(100 * (e - keep["n_keep"]) / e)
hits = [m.start() for m in re.finditer(re.escape(quant), base, re.I)]
print(base[: hits[-1]] + tag + "-" + base[hits[-1] :] if hits else base + "-" + tag)
PY
    )
fi
mkdir -p "$DIR/build"
split --splice-args "$SPLICE_ARGS"
step splice to "$DIR/splice.json" "$REAP" splice "$PINNED" --keeplist "$DIR/rank/keeplist.json" \
    -o "$DIR/build/$NAME" --json "${WORDS[@]}"
OUT=$(json "$DIR/splice.json" "d['outputs'][0]['path']")

# 6. Audit every byte against the Hub's, and write the manifest.
step audit to "$DIR/audit.json" "$REAP" audit "$OUT" --source "$PINNED" \
    --manifest-out "$DIR/build/MANIFEST.json" --force --json

# 7. Eval, where a local copy exists.
EVAL=()
if [ "$NO_EVAL" = 0 ]; then
    split --eval-args "$EVAL_ARGS"
    args=(eval "$OUT" --source "$SOURCE_LOCAL" -o "$DIR/eval/eval.json" "${CALIBRATION[@]}")
    for t in "${HELDOUT[@]}"; do args+=(--text "$t"); done
    [ ${#HELDOUT[@]} -gt 0 ] || for t in "${TEXTS[@]}"; do args+=(--text "$t"); done
    [ ${#HELDOUT[@]} -gt 0 ] || [ ${#TEXTS[@]} -gt 0 ] || die "eval needs texts: give --heldout NAME=FILE, or --no-eval"
    mkdir -p "$DIR/eval"
    # An eval that runs now (a copy that appeared in the cache since) gives the card something to say.
    [ -f "$S/eval.done" ] || rm -f "$S/card.done"
    if [ -n "$LOCAL" ] || [ -f "$S/eval.done" ]; then
        step eval "$REAP" "${args[@]}" "${WORDS[@]}"
    else
        # From the HF cache: a model that is not there is refused (exit 2, naming `hf download`), and the
        # build then goes out unmeasured rather than not at all.
        code=0
        step eval "$REAP" "${args[@]}" "${WORDS[@]}" 2> >(tee "$S/eval.err" >&2) || code=$?
        wait
        if [ $code = 2 ] && grep -q 'hf download' "$S/eval.err"; then
            say "eval: skipped: no local copy of the model (--local PATH, or the HF cache); the card says not measured"
        elif [ $code != 0 ]; then
            exit $code
        fi
    fi
    [ ! -f "$S/eval.done" ] || EVAL=(--eval "$DIR/eval/eval.json")
fi

# 8. The card, and the folder to upload. --force: a card stopped while it put its files starts over.
split --card-args "$CARD_ARGS"
args=(card "$OUT" --source "$PINNED" --rank "$DIR/rank" --audit "$DIR/audit.json"
    --manifest "$DIR/build/MANIFEST.json" "${EVAL[@]}" "${CALIBRATION[@]}" --upload-dir "$DIR/upload")
[ -z "$HF_REPO" ] || args+=(--hf-repo "$HF_REPO")
[ ! -d "$DIR/upload" ] || args+=(--force)
step card "$REAP" "${args[@]}" "${WORDS[@]}"
say "done: publish it with: hf upload ${HF_REPO:-ORG/REPO} $DIR/upload ."
