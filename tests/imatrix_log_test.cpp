// format/imatrix_log on output recorded from llama.cpp 34af94cd9 (tests/data/llama-imatrix/README.md).
#include "format/imatrix_log.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace gguf_reap {
namespace {

std::string recorded(const std::string& name) {
    std::ifstream in(fmt::format("{}/llama-imatrix/{}", GGUF_REAP_TEST_DATA, name), std::ios::binary);
    EXPECT_TRUE(in) << name;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST(ImatrixLog, ARun) {
    const ImatrixLog log = parse_imatrix_log(recorded("imatrix-python.txt"));
    ASSERT_TRUE(log.shape);
    EXPECT_EQ(log.shape->chunks, 8);
    EXPECT_EQ(log.shape->n_ctx, 128);
    EXPECT_EQ(log.shape->batch, 128);
    EXPECT_EQ(log.shape->n_seq, 1);
    EXPECT_EQ(log.chunks_done, 8);
    ASSERT_TRUE(log.ppl);
    EXPECT_DOUBLE_EQ(log.ppl->value, 34.4451);
    EXPECT_DOUBLE_EQ(log.ppl->err, 3.2706);
    EXPECT_FALSE(log.too_few_tokens);
}

TEST(ImatrixLog, ChunksSoFar) {
    std::string text = recorded("imatrix-python.txt");
    text = text.substr(0, text.find("[4]"));
    EXPECT_EQ(imatrix_chunks_done(text), 3);
    EXPECT_EQ(imatrix_chunks_done(text.substr(0, text.find("[1]"))), 0);
    // A row the logger cut in the middle of a number is not a chunk yet.
    EXPECT_EQ(imatrix_chunks_done("[1]107.8384,[2]50.01"), 1);
    EXPECT_FALSE(parse_imatrix_log(text).ppl);
}

TEST(ImatrixLog, TooFewTokens) {
    const ImatrixLog log = parse_imatrix_log(recorded("imatrix-too-short.txt"));
    ASSERT_TRUE(log.too_few_tokens);
    EXPECT_EQ(log.too_few_tokens->needed, 256);
    EXPECT_EQ(log.too_few_tokens->have, 94);
    EXPECT_FALSE(log.shape);
}

TEST(TokenIds, Recorded) {
    const auto ids = parse_token_ids(recorded("tokenize-python-1024.txt"));
    ASSERT_TRUE(ids);
    EXPECT_EQ(ids->size(), 1024u);
    EXPECT_EQ(ids->back(), 19);
    EXPECT_EQ(parse_token_count(recorded("tokenize-python-1024.txt")), 1024);
}

TEST(TokenIds, Malformed) {
    EXPECT_EQ(parse_token_ids("[]"), std::vector<int32_t>{});
    EXPECT_EQ(parse_token_ids("x\n[1, 2,3]\n"), (std::vector<int32_t>{1, 2, 3}));
    EXPECT_FALSE(parse_token_ids("[1, x]"));
    EXPECT_FALSE(parse_token_ids("[1, 99999999999]"));
    EXPECT_FALSE(parse_token_ids("Total number of tokens: 3"));
}

}  // namespace
}  // namespace gguf_reap
