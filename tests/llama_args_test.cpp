// model/llama_args: --llama-args split as a shell splits words, collisions refused, and each llama.cpp
// tool given only the options its --help lists (llama.cpp 34af94cd9).
#include "gguf_reap/llama_args.h"

#include <gtest/gtest.h>

#include "cli/options.h"
#include "gguf_reap/error.h"

namespace gguf_reap {
namespace {

using Words = std::vector<std::string>;

std::string usage_error(const std::string& text, LlamaTool tool = LlamaTool::perplexity) {
    try {
        LlamaArgs::parse(text, "--llama-args").check(tool);  // as the CLI names them
    } catch (const UsageError& e) {
        return e.message().empty() ? e.what() : cli::option_message(e.message());  // as the CLI prints it
    }
    return "";
}

TEST(LlamaArgs, SplitsLikeAShellWithoutExpanding) {
    EXPECT_EQ(LlamaArgs::parse("").words, Words{});
    EXPECT_EQ(LlamaArgs::parse("  \t\n ").words, Words{});
    EXPECT_EQ(LlamaArgs::parse("-ngl 99  -ot exps=CPU").words, (Words{"-ngl", "99", "-ot", "exps=CPU"}));
    EXPECT_EQ(LlamaArgs::parse(R"(-ot 'blk\.(1|2)\.ffn_.*=CPU')").words,
              (Words{"-ot", R"(blk\.(1|2)\.ffn_.*=CPU)"}));
    EXPECT_EQ(LlamaArgs::parse(R"(--rpc "a:1,b:2" x"y z"w '' "")").words,
              (Words{"--rpc", "a:1,b:2", "xy zw", "", ""}));
    EXPECT_EQ(LlamaArgs::parse(R"("a\"b\\c\d" a\ b \$HOME $HOME ~ *)").words,
              (Words{R"(a"b\c\d)", "a b", "$HOME", "$HOME", "~", "*"}));
    EXPECT_EQ(LlamaArgs::parse("'it''s'").words, Words{"its"});
}

TEST(LlamaArgs, RefusesWhatAShellWouldNotSplit) {
    EXPECT_THROW(LlamaArgs::parse("-ot 'exps=CPU"), UsageError);
    EXPECT_THROW(LlamaArgs::parse("-ot \"exps=CPU"), UsageError);
    EXPECT_THROW(LlamaArgs::parse("-ngl 99 \\"), UsageError);
    try {
        LlamaArgs::parse("-ngl 99 -ot 'exps", "GGUF_REAP_LLAMA_ARGS");
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "GGUF_REAP_LLAMA_ARGS: the ' at character 13 is never closed");
    }
}

TEST(LlamaArgs, ShellJoinRoundTrips) {
    const Words w{"-ot", "blk\\.1=CPU", "a b", "it's", "", "$X"};
    EXPECT_EQ(LlamaArgs::parse(shell_join(w)).words, w);
    EXPECT_EQ(shell_join({"-ngl", "99"}), "-ngl 99");
}

TEST(LlamaArgs, GroupsOptionsWithTheirValues) {
    const auto g = LlamaArgs::parse("stray -ngl -1 -ts 3,1 --no-mmap -fa on").grouped();
    ASSERT_EQ(g.size(), 5u);
    EXPECT_EQ(g[0].option, "");
    EXPECT_EQ(g[0].values, Words{"stray"});
    EXPECT_EQ(g[1].option, "-ngl");
    EXPECT_EQ(g[1].values, Words{"-1"});
    EXPECT_EQ(g[3].option, "--no-mmap");
    EXPECT_TRUE(g[3].values.empty());
    EXPECT_EQ(g[4].values, Words{"on"});
}

TEST(LlamaArgs, RefusesEachCollision) {
    for (const char* a : {"-m x.gguf",
                          "--model x.gguf",
                          "-f t.txt",
                          "--file t.txt",
                          "-c 4096",
                          "--ctx-size 8",
                          "-b 512",
                          "--batch-size 512",
                          "-o x",
                          "--output-file x",
                          "--chunks 4",
                          "--kl-divergence",
                          "--kl-divergence-base x",
                          "--in-file a.gguf",
                          "--output-format dat",
                          "-t 8",
                          "--threads 8",
                          "--escape",
                          "--log-disable",
                          "--version",
                          "-hf org/model",
                          "--ctx-size=4096"}) {
        EXPECT_NE(usage_error(a, LlamaTool::perplexity), "") << a;
        EXPECT_NE(usage_error(a, LlamaTool::imatrix), "") << a;
    }
    EXPECT_EQ(
        usage_error("-ngl 99 -ot exps=CPU --n-cpu-moe 3 -ts 1,1 --rpc 127.0.0.1:50052 -fa on --no-mmap"), "");
    EXPECT_EQ(
        usage_error("-ngl 99 -c 4096"),
        "--llama-args: -c collides with an argument gguf-reap sets for llama-perplexity: give gguf-reap's "
        "--ctx N instead");
    try {  // the library names the field, the CLI spells it as its option (above)
        LlamaArgs::parse("-c 4096").check(LlamaTool::perplexity);
        ADD_FAILURE() << "-c was not refused";
    } catch (const RequestError& e) {
        EXPECT_STREQ(e.what(),
                     "llama_args: -c collides with an argument gguf-reap sets for llama-perplexity: give "
                     "gguf-reap's ctx N instead");
    }
    EXPECT_EQ(
        usage_error("--no-ppl", LlamaTool::imatrix),
        "--llama-args: --no-ppl collides with an argument gguf-reap sets for llama-imatrix: calibrate sets "
        "how llama-imatrix runs and saves itself");
    EXPECT_EQ(usage_error("--no-ppl", LlamaTool::perplexity), "");  // not given to it (for_tool)
    EXPECT_NE(usage_error("--hellaswag", LlamaTool::perplexity), "");
    EXPECT_NE(usage_error("--temp 0.7", LlamaTool::completion), "");
    EXPECT_EQ(usage_error("--temp 0.7", LlamaTool::perplexity), "");
    EXPECT_NE(usage_error("--port 8080", LlamaTool::server), "");
    EXPECT_EQ(usage_error("-c 4096", LlamaTool::tokenize), "");  // llama-tokenize gets none
}

TEST(LlamaArgs, EachToolGetsWhatItTakes) {
    const LlamaArgs a = LlamaArgs::parse("-ngl 99 --no-warmup --process-output --jinja -x 1 --cont-batching");
    EXPECT_EQ(a.for_tool(LlamaTool::perplexity), (Words{"-ngl", "99", "--no-warmup", "-x", "1"}));
    EXPECT_EQ(a.for_tool(LlamaTool::imatrix), (Words{"-ngl", "99", "--process-output", "-x", "1"}));
    EXPECT_EQ(a.for_tool(LlamaTool::completion), (Words{"-ngl", "99", "--no-warmup", "--jinja", "-x", "1"}));
    EXPECT_EQ(a.for_tool(LlamaTool::server),
              (Words{"-ngl", "99", "--no-warmup", "--jinja", "-x", "1", "--cont-batching"}));
    EXPECT_EQ(a.for_tool(LlamaTool::tokenize), Words{});
    const LlamaArgs rpc =
        LlamaArgs::parse("--rpc 127.0.0.1:1,127.0.0.1:2 -ot exps=CPU --n-cpu-moe 4 -ts 1,1");
    for (LlamaTool t : {LlamaTool::perplexity, LlamaTool::imatrix, LlamaTool::completion, LlamaTool::server})
        EXPECT_EQ(rpc.for_tool(t), rpc.words) << llama_tool_name(t);
}

}  // namespace
}  // namespace gguf_reap
