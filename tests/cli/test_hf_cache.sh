# The local Hugging Face cache (issue 41 item 3, docs/remote.md "The local Hugging Face cache"): an hf://
# model pinned to a commit is read from ROOT/models--ORG--REPO/snapshots/COMMIT/PATH (symlinks into
# blobs/, as huggingface_hub writes them) when the copy there is the Hub's file; the server then sees the
# refs and tree API calls and HEADs, and sends no byte of a file (inspect, estimate, splice, audit). The root's variables in their order; a
# copy of another size is not used (a warning, the Hub read instead); eval and calibrate, whose llama.cpp
# tools read only local files, are given the cache's copy or refused with the `hf download` command.
# ctest-parts: fixtures
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"

R=$WORK/srv/org/repo
mkdir -p "$R/Q8_0"
"$GEN" model --skeleton --preset tiny --shards 3 -o "$R/Q8_0/tiny-Q8_0" >/dev/null || { echo "gen failed"; exit 1; }
SHARDS=(Q8_0/tiny-Q8_0-00001-of-00003.gguf Q8_0/tiny-Q8_0-00002-of-00003.gguf Q8_0/tiny-Q8_0-00003-of-00003.gguf)
printf '{"drop": {"1": [0, 1], "2": [2, 3], "3": [14, 15]}}' >"$WORK/drop.json"
"$BIN" splice "$R/${SHARDS[0]}" --keeplist "$WORK/drop.json" -o "$WORK/local" -q >/dev/null ||
    { echo "local splice failed"; exit 1; }
COMMIT=89abcdef0123456789abcdef0123456789abcdef
# mkcache ROOT REPO SRC FILE...: the cache huggingface_hub writes for FILE... of REPO at COMMIT: each
# file once in blobs/ under its sha256, the snapshot's entry a relative symlink to it, refs/main the commit.
mkcache() {
    local c=$1/models--${2/\//--} src=$3 f sha link
    shift 3
    mkdir -p "$c/blobs" "$c/refs"
    printf %s "$COMMIT" >"$c/refs/main"
    for f; do
        sha=$(sha256sum "$src/$f" | cut -d' ' -f1)
        cp "$src/$f" "$c/blobs/$sha"
        link=$c/snapshots/$COMMIT/$f
        mkdir -p "$(dirname "$link")"
        ln -s "$(realpath --relative-to="$(dirname "$link")" "$c/blobs/$sha")" "$link"
    done
}
C=$WORK/cache
mkcache "$C" org/repo "$R" "${SHARDS[@]}"
start_server "$WORK/srv" --cdn-host localhost --hub-commit "$COMMIT" --hub-branch dev --ranges-only --hold-cap 2
export HF_ENDPOINT=$URL GGUF_REAP_HTTP_BACKOFF_MS=20 HF_HUB_CACHE=$C
unset HF_TOKEN HF_TOKEN_PATH HF_HOME XDG_CACHE_HOME HUGGINGFACE_HUB_CACHE
# file_bytes: the body bytes the server sent for files (not the API) since clear_log.
file_bytes() {
    settle && /usr/bin/python3 -c "import json, sys; print(sum(r['sent'] for r in map(json.loads, open(sys.argv[1])) if not r['path'].startswith('/api/')))" "$SLOG"
}
# only_pins: every request since clear_log was an API call or a HEAD, and no file byte was sent.
only_pins() {
    settle && log_has "all(r['path'].startswith('/api/') or (r['method'] == 'HEAD' and r['sent'] == 0) for r in rows) and any(r['method'] == 'HEAD' for r in rows)"
}

case_ "inspect hf://org/repo:Q8_0 from the cache: the refs, the tree and a HEAD per shard, no byte of a file"
clear_log
run "$BIN" inspect --json hf://org/repo:Q8_0
expect_code 0
expect_json "len(d['shards']) == 3 and d['shards'][0]['path'] == 'hf://org/repo/${SHARDS[0]}@$COMMIT'"
only_pins && _pass || _fail "a file was fetched: $(cat "$SLOG")"

case_ "splice from the cache: the local splice's bytes, nothing fetched, the source named by the Hub's identity"
clear_log
run "$BIN" splice hf://org/repo:Q8_0 --keeplist "$WORK/drop.json" -o "$WORK/h" --json
expect_code 0
for i in 1 2 3; do cmp -s "$WORK/local-0000$i-of-00003.gguf" "$WORK/h-0000$i-of-00003.gguf" && _pass || _fail "shard $i differs"; done
expect_json "d['bytes_fetched'] == 0 and d['source_revision'] == 'org/repo@$COMMIT'"
expect_json "[s['sha256'] for s in d['source_shards']] == [$(for f in "${SHARDS[@]}"; do printf "'%s', " "$(sha256sum "$R/$f" | cut -d' ' -f1)"; done)]"
only_pins && _pass || _fail "a file was fetched"

case_ "audit --source from the cache passes, nothing fetched"
clear_log
run "$BIN" audit "$WORK/h-00001-of-00003.gguf" --source hf://org/repo:Q8_0 --keeplist "$WORK/drop.json"
expect_code 0
only_pins && _pass || _fail "a file was fetched"

case_ "estimate --fit from the cache: the local file's answer, nothing fetched"
run "$BIN" estimate "$R/${SHARDS[0]}" --fit size=1MB --json
expect_code 0
cp "$OUT" "$WORK/estimate-local.json"
clear_log
run "$BIN" estimate hf://org/repo:Q8_0 --fit size=1MB --json
expect_code 0
/usr/bin/python3 -c 'import json, sys; a, b = (json.load(open(p)) for p in sys.argv[1:]); sys.exit(0 if a["fit"] == b["fit"] else 1)' \
    "$WORK/estimate-local.json" "$OUT" && _pass || _fail "estimate differs from the local file's"
only_pins && _pass || _fail "a file was fetched"

case_ "a plain hf://ORG/REPO/PATH on a branch: pinned by its HEAD, then read from the cache"
clear_log
run "$BIN" inspect --json "hf://org/repo/${SHARDS[1]}@dev"
expect_code 0
expect_json "len(d['shards']) == 3"
only_pins && _pass || _fail "a file was fetched"

case_ "HF_HUB_CACHE before HF_HOME/hub: an empty HF_HUB_CACHE is the one looked in"
mkdir -p "$WORK/empty" "$WORK/home"
ln -s "$C" "$WORK/home/hub"
clear_log
HF_HUB_CACHE=$WORK/empty HF_HOME=$WORK/home run "$BIN" inspect hf://org/repo:Q8_0
expect_code 0
[ "$(file_bytes)" -gt 0 ] && _pass || _fail "HF_HOME/hub was read though HF_HUB_CACHE was set"

case_ "then HF_HOME/hub, then XDG_CACHE_HOME/huggingface/hub, then ~/.cache/huggingface/hub"
mkdir -p "$WORK/xdg/huggingface" "$WORK/user/.cache/huggingface"
ln -s "$C" "$WORK/xdg/huggingface/hub"
ln -s "$C" "$WORK/user/.cache/huggingface/hub"
for env in "HF_HOME=$WORK/home XDG_CACHE_HOME=$WORK/empty" "XDG_CACHE_HOME=$WORK/xdg HOME=$WORK/empty" "HOME=$WORK/user"; do
    clear_log
    # shellcheck disable=SC2086
    (unset HF_HUB_CACHE && env $env "$BIN" inspect hf://org/repo:Q8_0 >/dev/null 2>&1) || _fail "inspect failed with $env"
    only_pins && _pass || _fail "the cache was not read with $env"
done

case_ "a copy of another size: not used, a warning naming it, the Hub read instead; the splice is still the local one's"
chmod u+w "$C/models--org--repo/blobs/$(sha256sum "$R/${SHARDS[1]}" | cut -d' ' -f1)"
printf x >>"$C/models--org--repo/snapshots/$COMMIT/${SHARDS[1]}"
clear_log
run "$BIN" splice hf://org/repo:Q8_0 --keeplist "$WORK/drop.json" -o "$WORK/m" --json
expect_code 0
size=$(stat -c %s "$R/${SHARDS[1]}")
expect_err "warning: hf://org/repo/${SHARDS[1]}@$COMMIT: the Hugging Face cache's copy $C/models--org--repo/snapshots/$COMMIT/${SHARDS[1]} holds $((size + 1)) bytes, the Hub's file $size: not used, read from the Hub"
for i in 1 2 3; do cmp -s "$WORK/local-0000$i-of-00003.gguf" "$WORK/m-0000$i-of-00003.gguf" && _pass || _fail "shard $i differs"; done
settle && log_has "all('00002-of' in r['path'] for r in rows if r['method'] == 'GET' and r['sent'] > 0 and not r['path'].startswith('/api/'))" &&
    _pass || _fail "a shard with a good copy was fetched"
expect_json "d['bytes_fetched'] > 0"

case_ "a copy of the right size whose blob is named by another sha256: not used, a warning naming both"
sha3=$(sha256sum "$R/${SHARDS[2]}" | cut -d' ' -f1)
other=$(printf other | sha256sum | cut -d' ' -f1)
mv "$C/models--org--repo/blobs/$sha3" "$C/models--org--repo/blobs/$other"
ln -sfn "../../../blobs/$other" "$C/models--org--repo/snapshots/$COMMIT/${SHARDS[2]}"
clear_log
run "$BIN" inspect hf://org/repo:Q8_0
expect_code 0
expect_err "warning: hf://org/repo/${SHARDS[2]}@$COMMIT: the Hugging Face cache's copy $C/models--org--repo/snapshots/$COMMIT/${SHARDS[2]} is the blob $other, the Hub's file has the sha256 $sha3: not used, read from the Hub"
settle && log_has "any('00003-of' in r['path'] and r['method'] == 'GET' and r['sent'] > 0 for r in rows)" && _pass || _fail "shard 3 was not read from the Hub"

case_ "calibrate with that copy: refused, naming it and the command that downloads it again"
run "$BIN" calibrate --model hf://org/repo:Q8_0 --text a="$WORK/drop.json" -o "$WORK/cal-bad"
expect_code 2
expect_err "error: hf://org/repo:Q8_0: the Hugging Face cache's copy $C/models--org--repo/snapshots/$COMMIT/${SHARDS[1]} holds $((size + 1)) bytes, the Hub's file $size; download it again with \`hf download org/repo --include 'Q8_0/tiny-Q8_0-*-of-00003.gguf' --force-download\`"
[ ! -e "$WORK/cal-bad" ] && _pass || _fail "calibrate made its output directory"

case_ "eval and calibrate given a model not in the cache: exit 2, one line, the hf download command"
HF_HUB_CACHE=$WORK/empty run "$BIN" calibrate --model hf://org/repo:q8_0 --text a="$WORK/drop.json" -o "$WORK/cal-no"
expect_code 2
expect_err "gguf-reap: error: hf://org/repo:q8_0: not in the Hugging Face cache ($WORK/empty/models--org--repo/snapshots/$COMMIT/${SHARDS[0]} is not there), and llama.cpp's tools read only local files; download it with \`hf download org/repo --include 'Q8_0/tiny-Q8_0-*-of-00003.gguf'\`"
expect_err_lines 1
HF_HUB_CACHE=$WORK/empty run "$BIN" eval --source "hf://org/repo/${SHARDS[0]}@dev" "$WORK/h-00001-of-00003.gguf" --text a="$WORK/drop.json"
expect_code 2
expect_err "gguf-reap: error: hf://org/repo/${SHARDS[0]}@dev: not in the Hugging Face cache ($WORK/empty/models--org--repo/snapshots/$COMMIT/${SHARDS[0]} is not there), and llama.cpp's tools read only local files; download it with \`hf download org/repo --include 'Q8_0/tiny-Q8_0-*-of-00003.gguf' --revision $COMMIT\`"
expect_err_lines 1

case_ "calibrate given a plain URL: exit 2 before anything runs (llama.cpp's tools read only local files)"
run "$BIN" calibrate --model "$URL/org/repo/${SHARDS[0]}" --text a="$WORK/drop.json" -o "$WORK/cal-url"
expect_code 2
expect_err "gguf-reap: error: --model $URL/org/repo/${SHARDS[0]}: llama.cpp's tools, which calibrate runs, read only local files; download it first and give its path"
expect_err_lines 1

case_ "a copy changed during the splice: the end-of-run check asks the copy, exit 3, no output kept"
# Shards 1 and 2 in a cache of their own, shard 3 from the Hub: its first data request is held (the
# server's hold_after, past its 256 KiB header window) while shard 2's copy is modified, then answered.
C2=$WORK/cache2
mkcache "$C2" org/repo "$R" "${SHARDS[0]}" "${SHARDS[1]}"
fault '{"hold_after": 262144}'
clear_log
HF_HUB_CACHE=$C2 "$BIN" splice hf://org/repo:Q8_0 --keeplist "$WORK/drop.json" -o "$WORK/e" >"$OUT" 2>"$ERR" &
pid=$!
wait_until log_has "any(r.get('held') for r in rows)" || _fail "no request was held"
touch -d '2001-01-01 00:00' "$C2/models--org--repo/snapshots/$COMMIT/${SHARDS[1]}"
wait "$pid"
CODE=$?
no_fault
expect_code 3
expect_err "gguf-reap: error: $C2/models--org--repo/snapshots/$COMMIT/${SHARDS[1]}: changed while gguf-reap was reading it (it was modified); nothing made from it is kept"
ls "$WORK"/e-0000* >/dev/null 2>&1 && _fail "an output was kept under its final name" || _pass

if fixtures "calibrate on the trained fixture from the cache"; then
    case_ "calibrate --model hf://org/trained:Q8_0 in the cache: llama-imatrix is given the cache's copy, named in the log and the table"
    TR=$FIX/trained
    T=tiny-qwen3moe-trained-A-Q8_0.gguf
    mkdir -p "$WORK/srv/org/trained"
    cp "$TR/models/$T" "$WORK/srv/org/trained/$T"
    # huggingface_hub's layout where symlinks cannot be made: the file itself in the snapshot (the fake
    # llama-imatrix checks the model's name after following links, and a blob is named by its sha256).
    mkdir -p "$C/models--org--trained/snapshots/$COMMIT"
    cp "$TR/models/$T" "$C/models--org--trained/snapshots/$COMMIT/$T"
    head -c 8000 "$TR/corpora/python.calib.txt" >"$WORK/python.txt"
    clear_log
    GGUF_REAP_LLAMA_BIN= FAKE_LLAMA_CALLS=$WORK/calls run "$BIN" calibrate --model hf://org/trained:Q8_0 \
        --text python="$WORK/python.txt" --ctx 128 --tokens 1024 --threads 1 \
        --llama-bin "$(cd "$(dirname "$0")/fake-llama" && pwd)" -o "$WORK/cal"
    expect_code 0
    expect_err "info: hf://org/trained:Q8_0: read from the Hugging Face cache, $C/models--org--trained/snapshots/$COMMIT/$T"
    expect_out "model   $C/models--org--trained/snapshots/$COMMIT/$T (4.1 MiB"
    # (The fake llama-imatrix takes -m only when it is a local file of the trained model's name.)
    grep -q "^imatrix python " "$WORK/calls" && _pass || _fail "llama-imatrix did not run: $(cat "$WORK/calls")"
    # calibrate.json names no path of this machine: the model by its base name, as for a local one.
    cp "$WORK/cal/calibrate.json" "$OUT"
    expect_json "d['model']['path'] == '$T' and d['complete']"
    only_pins && _pass || _fail "a file was fetched"
fi

finish
