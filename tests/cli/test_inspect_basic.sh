source "$(dirname "$0")/lib.sh"

case_ "help goes to stdout with exit 0"
run "$BIN" --help
expect_code 0
expect_out "inspect"

case_ "unknown option is a usage error"
run "$BIN" inspect --bogus x
expect_code 2
expect_err "gguf-reap: error:"

case_ "missing file is an I/O error"
run "$BIN" inspect "$WORK/nope.gguf"
expect_code 3
expect_err "nope.gguf: open: No such file or directory"

case_ "not a GGUF file"
printf 'hello world, not gguf' >"$WORK/x.gguf"
run "$BIN" inspect "$WORK/x.gguf"
expect_code 2
expect_err "x.gguf: magic at offset 0 (0x0): not a GGUF file"
expect_err_lines 1

if have_fixtures; then
    case_ "inspect --json on a fixture model"
    run "$BIN" inspect --json "$FIX/models/tiny-deepseek2-Q8_0.gguf"
    expect_code 0
    expect_json "d['arch'] == 'deepseek2' and d['tensor_count'] == 70 and d['moe']['experts'] == 16"
fi
finish
