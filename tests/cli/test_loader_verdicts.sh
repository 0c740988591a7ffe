# audit against llama.cpp's loader, one changed key at a time (docs/reliability.md): every row of
# tests/data/loader-verdicts.tsv (written by tools/loader-diff.py with llama.cpp 34af94cd9) names an
# architecture preset (or a variant of it: generator options that add the optional keys, e.g. expert
# groups or MTP blocks), a key and the value it was changed to, and whether llama.cpp loads the result.
# Each file is regenerated the same way (gguf-reap-gen model --arch A [GEN] --set-key KEY=TO), must have the
# sha256 the table records (a generator that drifted would make every verdict about other files), and is
# audited: audit must pass exactly the files llama.cpp loads, and refuse the others with a finding (exit 1)
# that names the key that was changed.
#
# With GGUF_REAP_LLAMA_BIN set, llama.cpp judges the files again, and a verdict that differs from the
# recorded one fails: a newer llama.cpp that changed a rule shows up here. It asks about a sample (668 of
# the 2,195 rows: every row of the architectures in tests/data/live-sample.txt, and one row of every
# key, variant and verdict besides); GGUF_REAP_LIVE_FULL=1 asks about every row. Without it that is skipped.
#
# Under the sanitizers (GGUF_REAP_TEST_PASS=sanitizers) a smaller sample is regenerated and audited: the
# first row of every key (without its architecture), variant, verdict and changed value, and the first
# row of every architecture. Each row starts two instrumented processes; the whole table took half an
# hour of the sanitizer pass, and the live sample 12 minutes. The rest is the part "all-rows", skipped
# there and run in the Release pass (docs/performance.md, "CI").
# ctest-parts: llama all-rows
source "$(dirname "$0")/lib.sh"
TABLE=$(dirname "$0")/../data/loader-verdicts.tsv
LLAMA=${GGUF_REAP_LLAMA_BIN:-}
if [ -n "$LLAMA" ] && [ ! -x "$LLAMA/llama-completion" ]; then
    echo "GGUF_REAP_LLAMA_BIN=$LLAMA has no llama-completion" >&2
    exit 2
fi
part llama "asking llama.cpp again $(live_why)" [ -n "$LLAMA" ] || true

case_ "the table is there and has rows"
[ "$(grep -vc '^#' "$TABLE")" -ge 100 ] && _pass || _fail "$TABLE has fewer than 100 rows"

# The files go to tmpfs where there is one: audit flushes every file it checks (fdatasync), which on a
# disk costs more than writing and auditing the file together.
FILES=$WORK
[ -d /dev/shm ] && [ -w /dev/shm ] && FILES=$(mktemp -d /dev/shm/gguf-reap-verdicts.XXXXXX)
trap 'rm -rf "$WORK" "$FILES"' EXIT

# The rows llama.cpp is asked about: every row with GGUF_REAP_LIVE_FULL=1, else those of the sampled
# architectures and the first row of each (key without its architecture, variant, verdict) they lack.
SAMPLE=" $(sed 's/#.*//' "$(dirname "$0")/../data/live-sample.txt" | tr -s ' \n' '  ') "
grep -v '^#' "$TABLE" | awk -F'\t' -v OFS='|' -v sample="$SAMPLE" -v full="${GGUF_REAP_LIVE_FULL:-0}" '
    { rows[NR] = $1 OFS $2 OFS $3 OFS $5; arch[NR] = $1; fam[NR] = substr($3, index($3, ".") + 1) OFS $2 OFS $6 }
    index(sample, " " $1 " ") { seen[fam[NR]] = 1 }
    END {
        for (i = 1; i <= NR; i++) {
            ask = full == 1 || index(sample, " " arch[i] " ")
            if (!ask && !(fam[i] in seen)) { ask = 1; seen[fam[i]] = 1 }
            if (ask) print rows[i]
        }
    }' >"$WORK/ask"
# The rows judged here: every row, but under the sanitizers only those that reach a rule, a changed value
# or an architecture no earlier row reached.
TOTAL=$(grep -vc '^#' "$TABLE")
if part all-rows "the other rows (not run under the sanitizers: the Release pass audits all $TOTAL)" \
    [ "${GGUF_REAP_TEST_PASS:-}" != sanitizers ]; then
    grep -v '^#' "$TABLE" | awk -F'\t' -v OFS='|' '{print $1, $2, $3, $5}' >"$WORK/rows"
else
    grep -v '^#' "$TABLE" | awk -F'\t' -v OFS='|' '
        { f = substr($3, index($3, ".") + 1) OFS $2 OFS $6 OFS $5 }
        !(f in seen) || !($1 in arch) { print $1, $2, $3, $5 }
        { seen[f] = 1; arch[$1] = 1 }' >"$WORK/rows"
    echo "under the sanitizers: $(wc -l <"$WORK/rows") of $TOTAL rows"
fi
[ -n "$LLAMA" ] && echo "asking llama.cpp about $(wc -l <"$WORK/ask") of $TOTAL rows ($([ "${GGUF_REAP_LIVE_FULL:-0}" = 1 ] && echo "GGUF_REAP_LIVE_FULL=1" || echo "the sample; GGUF_REAP_LIVE_FULL=1 asks about all"))"

# judge_rows ROWS N: for each row "ARCH|GEN|KEY|TO" of ROWS, regenerates its file (as FILES/N.gguf, one
# file per worker, rewritten row after row) and prints "ROW|SHA256 FROM_AUDIT NAMES [FROM_LLAMA]"
# (NAMES: names-key when audit refused it with a finding that names KEY, else "-" or audit's first
# line). One long-lived shell per worker, and only the programs a row needs: the shells, subshells and
# pipes of a row once cost more than its generator and audit together (docs/performance.md, "CI").
judge_rows() {
    local -A asked=()
    local r f=$FILES/$2.gguf name
    name=$(basename "$f")
    while IFS= read -r r; do asked[$r]=1; done <"$WORK/ask"
    while IFS='|' read -r arch gen key to; do
        local row="$arch|$gen|$key|$to" opts=()
        [ "$to" = absent ] && to=""
        [ "$gen" != - ] && read -r -a opts <<<"$gen"
        if ! "$GEN" model --arch "$arch" "${opts[@]}" -o "$f" --set-key "$key=$to" >/dev/null 2>"$f.err"; then
            echo "$row|gen-failed"
            continue
        fi
        local sha code=0
        sha=$(sha256sum "$f")
        "$BIN" audit "$f" >"$f.audit" 2>&1 || code=$?
        local audit
        case $code in 0) audit=pass ;; 1) audit=refuses ;; *) audit="exit-$code" ;; esac
        # Does a finding name the key? The finding lines alone ("  [RULE] FILE: WHAT"), each with the
        # file's name taken out.
        local names=- findings="" l
        if [ $code = 1 ]; then
            while IFS= read -r l; do
                [[ $l == "  ["* ]] || continue
                l=${l//"$f"/FILE}
                findings+="${l//"$name"/FILE}"$'\n'
            done <"$f.audit"
            if [[ $findings == *"$key"* ]]; then
                names=names-key
            else
                names=$(head -n 1 <<<"${findings:-$(grep -m1 -i 'error\|FAIL' "$f.audit")}" | tr ' |' '_/' | cut -c1-200)
                names=${names:--}
            fi
        fi
        local llama=""
        if [ -n "$LLAMA" ] && [ -n "${asked[$row]:-}" ]; then
            case $arch in
                bert | jina-bert-v3 | nomic-bert | nomic-bert-moe | llama-embed)
                    timeout 120 "$LLAMA/llama-embedding" -m "$f" -p Hello -t 1 --no-warmup -c 64 >/dev/null 2>&1 &&
                        llama=loads || llama=refuses ;;
                *) timeout 120 "$LLAMA/llama-completion" -m "$f" -n 1 -p Hello -no-cnv -t 1 --no-warmup -c 64 \
                    >/dev/null 2>&1 && llama=loads || llama=refuses ;;
            esac
        fi
        echo "$row|${sha%% *} $audit $names $llama"
    done <"$1"
    rm -f "$f" "$f.err" "$f.audit"
}

# Two at a time (the table's files are tiny; llama.cpp, when asked, runs at most two): odd rows and even.
awk 'NR % 2 == 1' "$WORK/rows" >"$WORK/rows.1"
awk 'NR % 2 == 0' "$WORK/rows" >"$WORK/rows.2"
judge_rows "$WORK/rows.1" 1 >"$WORK/verdicts.1" &
pid1=$!
judge_rows "$WORK/rows.2" 2 >"$WORK/verdicts.2" || true
wait "$pid1" || true
cat "$WORK/verdicts.1" "$WORK/verdicts.2" >"$WORK/verdicts"

declare -A RECORDED
while IFS=$'\t' read -r arch gen key from to llama audit sha line; do
    [ "${arch:0:1}" = "#" ] && continue
    RECORDED["$arch|$gen|$key|$to"]="$llama|$from|$sha|$line"
done <"$TABLE"

while IFS='|' read -r arch gen key to verdict; do
    read -r got_sha audit names llama <<<"$verdict"
    IFS='|' read -r want from sha line <<<"${RECORDED["$arch|$gen|$key|$to"]}"
    case_ "$arch$([ "$gen" = - ] || echo " $gen"): $key $from -> $to (llama.cpp $want${line:+: $line})"
    [ "$got_sha" = "$sha" ] && _pass || _fail "the regenerated file has sha256 $got_sha, the table's has $sha: the generator changed (tools/loader-diff.py --rehash after a deliberate change)"
    case $want:$audit in
        loads:pass | refuses:refuses) _pass ;;
        loads:*) _fail "audit says $audit, but llama.cpp loads the file (a false alarm)" ;;
        refuses:*) _fail "audit says $audit, but llama.cpp refuses the file (a miss)" ;;
    esac
    if [ "$audit" = refuses ]; then
        [ "$names" = names-key ] && _pass || _fail "audit refuses the file, but no finding names $key: $names"
    fi
    if [ -n "$llama" ]; then
        [ "$llama" = "$want" ] && _pass || _fail "llama.cpp at $LLAMA now $llama the file; the table says $want"
    fi
done <"$WORK/verdicts"

case_ "every row was judged"
[ "$(wc -l <"$WORK/verdicts")" -eq "$(wc -l <"$WORK/rows")" ] && _pass || _fail "some rows were not judged"
finish
