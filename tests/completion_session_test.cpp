// format/completion_session: llama-completion's --prompt-cache file and prompt-length line, on files
// recorded from llama.cpp 34af94cd9 (tests/data/llama-perplexity/README.md) and on hostile bytes.
#include "format/completion_session.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gguf_reap/error.h"
#include "io/input_file.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

std::vector<uint8_t> session_bytes(uint32_t magic, uint32_t version, uint32_t n,
                                   const std::vector<int32_t>& ids) {
    std::vector<uint8_t> b(12 + 4 * ids.size());
    std::memcpy(b.data(), &magic, 4);
    std::memcpy(b.data() + 4, &version, 4);
    std::memcpy(b.data() + 8, &n, 4);
    if (!ids.empty()) std::memcpy(b.data() + 12, ids.data(), 4 * ids.size());
    return b;
}

std::string session_error(const std::vector<uint8_t>& b, uint64_t max_tokens) {
    SpanSource src(b, "s.session");
    return test::error_of<InputError>([&] { parse_session_tokens(src, max_tokens); });
}

TEST(CompletionSession, ReadsTheTokenIds) {
    auto b = session_bytes(kSessionMagic, kSessionVersion, 3, {12, 345, 4095});
    b.resize(b.size() + 100, 0x5a);  // the context state that follows is not read
    SpanSource src(b, "s.session");
    EXPECT_EQ(parse_session_tokens(src, 256), (std::vector<int32_t>{12, 345, 4095}));
}

// The recorded session of the source's smoke run ('def main(', 16 tokens), cut after its token ids: the
// prompt's 4 tokens (the log's "number of tokens in prompt = 4") and then the 16 generated ones.
TEST(CompletionSession, RecordedSession) {
    // (fmt::format, not std::string + "...": g++ 12 at -O2 warns of a memcpy out of bounds inside the
    // concatenation's inlined std::string, a false -Warray-bounds)
    const std::string path = fmt::format("{}/llama-perplexity/smoke-source.session", GGUF_REAP_TEST_DATA);
    const auto file = InputFile::open(path);
    FileSource src(*file);
    EXPECT_EQ(parse_session_tokens(src, 256),
              (std::vector<int32_t>{67, 891,  1388, 7,  944, 13,  62,  79, 441, 496,
                                    11, 2116, 13,   62, 79,  441, 496, 8,  198, 220}));
    std::ifstream in(fmt::format("{}/llama-perplexity/smoke-source.txt", GGUF_REAP_TEST_DATA));
    std::stringstream log;
    log << in.rdbuf();
    EXPECT_EQ(parse_prompt_token_count(log.str()), 4);
}

TEST(CompletionSession, RefusesWhatIsNotASessionOfThisVersion) {
    EXPECT_EQ(session_error(session_bytes(0x46554747, kSessionVersion, 0, {}), 256),
              "s.session: magic at offset 0 (0x0): 0x46554747, not a llama.cpp session file (0x6767736e)");
    EXPECT_EQ(session_error(session_bytes(kSessionMagic, 8, 0, {}), 256),
              "s.session: version at offset 4 (0x4): session file version 8; this gguf-reap reads version 9 "
              "(llama.cpp 34af94cd9's)");
    EXPECT_EQ(session_error(session_bytes(kSessionMagic, kSessionVersion, 300, {}), 256),
              "s.session: n_tokens at offset 8 (0x8): 300 tokens, more than the 256 of the context it was "
              "run with");
    EXPECT_EQ(session_error(session_bytes(kSessionMagic, kSessionVersion, 3, {1, 2}), 256),
              "s.session: n_tokens at offset 8 (0x8): 3 tokens need 12 bytes; the file has 8 more (truncated "
              "file?)");
    EXPECT_EQ(
        session_error({0x6e, 0x73}, 256),
        "s.session: magic at offset 0 (0x0): file ends after 2 more byte(s), 4 needed (truncated file?)");
}

TEST(CompletionSession, PromptTokenCount) {
    EXPECT_EQ(parse_prompt_token_count("0.00.075.698 I llama_completion: prompt: 'def main('\n"
                                       "0.00.075.698 I llama_completion: number of tokens in prompt = 3\n"),
              3);
    // A prompt that holds the words is echoed first; its line ends in a quote.
    EXPECT_EQ(parse_prompt_token_count(
                  "I llama_completion: prompt: 'llama_completion: number of tokens in prompt = 9'\n"
                  "I llama_completion: number of tokens in prompt = 12\n"),
              12);
    EXPECT_EQ(parse_prompt_token_count("I llama_completion: number of tokens in prompt = x\n"), std::nullopt);
    EXPECT_EQ(parse_prompt_token_count("no such line"), std::nullopt);
}

}  // namespace
}  // namespace gguf_reap
