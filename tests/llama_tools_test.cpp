// services/llama_cpp/llama_tools: the command lines gguf-reap runs, built from the one table of llama.cpp's
// tools, and the refusals of --llama-args derived from the same table: every option gguf-reap writes for
// a tool is one --llama-args may not give it.
#include "services/llama_cpp/llama_tools.h"

#include <gtest/gtest.h>

namespace gguf_reap::llama_cpp {
namespace {

using Words = std::vector<std::string>;

bool is_option(const std::string& w) {
    return w.size() > 1 && w[0] == '-' && !(w[1] >= '0' && w[1] <= '9');
}

// Every command line gguf-reap runs, with its tool.
std::vector<std::pair<LlamaTool, Words>> every_command(const LlamaArgs& extra) {
    const PerplexityJob p{"llama-perplexity", "m.gguf", "t.txt", 512, 2048, 8, 4};
    return {
        {LlamaTool::perplexity, kld_base_command(p, "base.kld", extra)},
        {LlamaTool::perplexity, kld_command(p, "base.kld", extra)},
        {LlamaTool::perplexity, version_command(LlamaTool::perplexity, "llama-perplexity")},
        {LlamaTool::imatrix, imatrix_command({"llama-imatrix", "m.gguf", "t.txt", 512, 4}, "o.gguf", extra)},
        {LlamaTool::imatrix, version_command(LlamaTool::imatrix, "llama-imatrix")},
        {LlamaTool::tokenize, tokenize_command("llama-tokenize", "m.gguf")},
        {LlamaTool::completion, greedy_command({"llama-completion", "m.gguf", "hi", 16, 256, 4}, "s", extra)},
        {LlamaTool::server, server_command({"llama-server", "m.gguf", 8080, 4, 2048, 4}, extra)},
        {LlamaTool::server, version_command(LlamaTool::server, "llama-server")},
    };
}

TEST(LlamaTools, TheCommandLinesGgufReapRuns) {
    const PerplexityJob p{"bin/llama-perplexity", "m.gguf", "t.txt", 128, 2048, 8, 0};
    EXPECT_EQ(kld_base_command(p, "base.kld", {}),
              (Words{"bin/llama-perplexity", "-m", "m.gguf", "-f", "t.txt", "-c", "128", "-b", "2048",
                     "--chunks", "8", "--no-escape", "--kl-divergence-base", "base.kld"}));
    EXPECT_EQ(kld_command({"llama-perplexity", "o.gguf", "t.txt", 128, 2048, 8, 2}, "base.kld",
                          LlamaArgs::parse("-ngl 99 --process-output")),
              (Words{"llama-perplexity", "-m", "o.gguf", "-f", "t.txt", "-c", "128", "-b", "2048", "--chunks",
                     "8", "--no-escape", "-t", "2", "--kl-divergence-base", "base.kld", "--kl-divergence",
                     "-ngl", "99"}));  // --process-output is llama-imatrix's alone
    EXPECT_EQ(imatrix_command({"llama-imatrix", "m.gguf", "t.txt", 512, 1}, "o.gguf", {}),
              (Words{"llama-imatrix", "-m", "m.gguf", "-f", "t.txt", "-c", "512", "-b", "512", "--no-escape",
                     "--output-format", "gguf", "-o", "o.gguf", "-t", "1"}));
    EXPECT_EQ(tokenize_command("llama-tokenize", "m.gguf"),
              (Words{"llama-tokenize", "-m", "m.gguf", "--stdin", "--no-escape", "--ids", "--show-count",
                     "--log-disable"}));
    EXPECT_EQ(greedy_command({"llama-completion", "m.gguf", "def main(", 16, 256, 0}, "SESSION", {}),
              (Words{"llama-completion",
                     "-m",
                     "m.gguf",
                     "-p",
                     "def main(",
                     "-n",
                     "16",
                     "-c",
                     "256",
                     "--temp",
                     "0",
                     "--top-k",
                     "1",
                     "-s",
                     "1",
                     "-no-cnv",
                     "--no-warmup",
                     "--no-escape",
                     "--verbose-prompt",
                     "--prompt-cache",
                     "SESSION",
                     "--prompt-cache-all"}));
    EXPECT_EQ(server_command({"llama-server", "m.gguf", 8080, 4, 2048, 0}, {}),
              (Words{"llama-server", "-m", "m.gguf", "--host", "127.0.0.1", "--port", "8080", "-np", "4",
                     "-c", "2048", "--no-webui", "--cors-origins", "localhost"}));
    EXPECT_EQ(version_command(LlamaTool::server, "llama-server"), (Words{"llama-server", "--version"}));
}

TEST(LlamaTools, WhatGgufReapWritesIsRefusedInLlamaArgs) {
    const LlamaArgs extra = LlamaArgs::parse("-ngl 99");
    for (const auto& [tool, argv] : every_command(extra)) {
        ASSERT_GE(argv.size(), 2u);
        for (size_t i = 1; i < argv.size(); ++i) {
            if (!is_option(argv[i]) || argv[i] == "-ngl") continue;  // the user's own argument
            EXPECT_NE(refusal(tool, argv[i]), nullptr) << llama_tool_name(tool) << " " << argv[i];
        }
    }
    // What every tool's command line means the same by is refused for every tool, even one gguf-reap
    // never gives it to (an -o meant for llama-imatrix would name llama-perplexity's output too).
    for (LlamaTool t : {LlamaTool::perplexity, LlamaTool::imatrix, LlamaTool::completion, LlamaTool::server})
        for (const char* o : {"-m", "-hf", "-f", "-p", "-c", "-b", "-t", "-o", "--chunks", "--kl-divergence",
                              "--in-file", "--version", "--log-disable"})
            EXPECT_NE(refusal(t, o), nullptr) << llama_tool_name(t) << " " << o;
    // What only one tool's command line sets is that tool's.
    EXPECT_NE(refusal(LlamaTool::completion, "--temp"), nullptr);
    EXPECT_EQ(refusal(LlamaTool::perplexity, "--temp"), nullptr);
    EXPECT_NE(refusal(LlamaTool::server, "--port"), nullptr);
    EXPECT_EQ(refusal(LlamaTool::imatrix, "--port"), nullptr);
    EXPECT_EQ(refusal(LlamaTool::perplexity, "-ngl"), nullptr);
}

TEST(LlamaTools, DocumentsNameThemFromTheTable) {
    EXPECT_EQ(greedy_words(), "llama-completion --temp 0");
    EXPECT_EQ(kld_base_words(), "llama-perplexity --kl-divergence-base");
    EXPECT_EQ(kld_words(), "--kl-divergence");
    EXPECT_EQ(session_option(), "--prompt-cache");
    EXPECT_EQ(version_words(LlamaTool::imatrix), "llama-imatrix --version");
    EXPECT_STREQ(llama_tool_name(LlamaTool::quantize), "llama-quantize");
}

}  // namespace
}  // namespace gguf_reap::llama_cpp
