// rank's input sanity (ops/rank/imatrix_sanity.h): routed-expert counts against top-k × tokens, blocks with
// no routed data, chunk sizes and dataset lists between files; on hand-built inputs whose numbers are
// chosen so that each rule decides, and end to end on a fixture imatrix whose counts were altered.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "ops/rank/imatrix_sanity.h"
#include "ops/rank/rank_keep.h"
#include "ops/rank/rank_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

// One GGUF domain: tokens = chunks × chunk size; counts per block (E = counts[b].size()).
DomainData domain(const std::string& name, uint64_t chunks, uint64_t chunk_size,
                  const std::vector<std::vector<double>>& counts, std::vector<std::string> datasets = {}) {
    DomainData d;
    d.name = name;
    d.path = name + ".imatrix.gguf";
    d.format = "gguf";
    d.chunks = chunks;
    d.chunk_size = chunk_size;
    d.tokens = chunks * chunk_size;
    d.datasets = datasets.empty() ? std::vector<std::string>{name + ".txt"} : datasets;
    for (size_t b = 0; b < counts.size(); ++b) {
        BlockStats s;
        s.present = true;
        s.count = counts[b];
        s.counts_offset = 1000 * (b + 1);
        d.blocks.push_back(s);
    }
    return d;
}

RankInput input(uint64_t used, std::vector<DomainData> domains) {
    RankInput in;
    in.expert_count = 4;
    in.blocks = {1, 2};
    in.expert_used_count = used;
    in.domains = std::move(domains);
    return in;
}

TEST(ImatrixSanity, CountsSumToTopKTimesTokens) {
    // 2 chunks × 8 tokens = 16 tokens, top-2: 32 routed (token, slot) pairs per block.
    const RankInput ok = input(2, {domain("chat", 2, 8, {{10, 6, 8, 8}, {16, 16, 0, 0}})});
    EXPECT_TRUE(check_imatrix_sanity(ok).empty());
    // Block 2 of a file whose counts were altered: 31.
    const RankInput bad = input(2, {domain("chat", 2, 8, {{10, 6, 8, 8}, {16, 15, 0, 0}})});
    const auto p = check_imatrix_sanity(bad);
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].file, "chat.imatrix.gguf");
    EXPECT_EQ(p[0].offset, 2000u);
    EXPECT_EQ(p[0].field, "entry 'blk.2.ffn_down_exps.weight' counts");
    EXPECT_EQ(
        p[0].message,
        "domain chat: blk.2: the routed-expert counts sum to 31, but expert_used_count 2 × 16 tokens "
        "(imatrix.chunk_count 2 × imatrix.chunk_size 8) is 32: made with another top-k, by a partial or "
        "streamed run, or for another model?");
    // Made with top-4: every block twice the routed pairs.
    const RankInput top4 = input(2, {domain("chat", 2, 8, {{16, 16, 16, 16}, {16, 16, 16, 16}})});
    EXPECT_EQ(check_imatrix_sanity(top4).size(), 2u);
}

TEST(ImatrixSanity, WithoutTheModelBlocksAndFilesMustAgreeOnTopK) {
    // No --model: block 1 of chat implies top-2; code's block 2 implies top-3.
    const RankInput in = input(0, {domain("chat", 2, 8, {{10, 6, 8, 8}, {16, 16, 0, 0}}),
                                   domain("code", 1, 8, {{4, 4, 4, 4}, {8, 8, 8, 0}})});
    const auto p = check_imatrix_sanity(in);
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].file, "code.imatrix.gguf");
    EXPECT_EQ(
        p[0].message,
        "domain code: blk.2: the routed-expert counts sum to 24, but the top-k 2 that chat blk.1 implies "
        "× 8 tokens (imatrix.chunk_count 1 × imatrix.chunk_size 8) is 16: made with another top-k, by a "
        "partial or streamed run, or for another model?");
    // Not a whole multiple of the tokens at all.
    const RankInput frac = input(0, {domain("chat", 2, 8, {{10, 6, 8, 7}, {16, 16, 0, 0}})});
    const auto q = check_imatrix_sanity(frac);
    ASSERT_EQ(q.size(), 1u);
    EXPECT_EQ(
        q[0].message,
        "domain chat: blk.1: the routed-expert counts sum to 31, which is not a whole multiple of the 16 "
        "tokens (imatrix.chunk_count 2 × imatrix.chunk_size 8): every token is routed to the same number "
        "of experts, so a partial or streamed run, or another model?");
}

TEST(ImatrixSanity, BlockWithoutRoutedData) {
    const RankInput in = input(2, {domain("chat", 2, 8, {{10, 6, 8, 8}, {0, 0, 0, 0}})});
    const auto p = check_imatrix_sanity(in);
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].offset, 2000u);
    EXPECT_EQ(p[0].message,
              "domain chat: blk.2: no token was routed to any expert (every count is 0): the file holds no "
              "routed-expert data for this block");
}

TEST(ImatrixSanity, ChunkSizesAndOverlappingDatasetsBetweenFiles) {
    const RankInput in =
        input(2, {domain("chat", 2, 8, {{10, 6, 8, 8}, {16, 16, 0, 0}}, {"chat.txt"}),
                  domain("code", 1, 16, {{10, 6, 8, 8}, {16, 16, 0, 0}}, {"code.txt"}),
                  domain("all", 1, 8, {{4, 4, 4, 4}, {4, 4, 4, 4}}, {"chat.txt", "code.txt"})});
    const auto p = check_imatrix_sanity(in);
    ASSERT_EQ(p.size(), 3u);
    EXPECT_EQ(p[0].file, "");
    EXPECT_EQ(p[0].field, "imatrix.chunk_size");
    EXPECT_EQ(
        p[0].message,
        "domains chat (chat.imatrix.gguf) and code (code.imatrix.gguf) were computed with chunk sizes 8 "
        "and 16: statistics from different context lengths are not comparable");
    EXPECT_EQ(p[1].message, "domains chat and all share dataset(s) chat.txt: that text is counted in both");
    EXPECT_EQ(p[2].message, "domains code and all share dataset(s) code.txt: that text is counted in both");
}

TEST(ImatrixSanity, LegacyFilesAreNotChecked) {
    DomainData d = domain("chat", 2, 8, {{1, 1, 1, 1}, {1, 1, 1, 1}});
    d.format = "dat";
    EXPECT_TRUE(check_imatrix_sanity(input(2, {d})).empty());
}

// End to end: the fixture's chat imatrix with one count of blk.2 raised by 5.
class ImatrixSanityFixture : public ::testing::Test {
  protected:
    void SetUp() override {
        fix_ = std::filesystem::path(GGUF_REAP_SHARED_DIR) / "fixtures";
        if (!std::filesystem::exists(fix_ / "expected.json")) GTEST_SKIP() << "no " << fix_.string();
    }
    std::filesystem::path fix_;
    test::TempDir dir_;
};

TEST_F(ImatrixSanityFixture, AlteredCountsWarnAndStrictRefuses) {
    const std::string model = (fix_ / "models/tiny-deepseek2-Q8_0.gguf").string();
    const std::string code = (fix_ / "imatrix/tiny-deepseek2.code.imatrix.gguf").string();
    auto bytes = test::read_file((fix_ / "imatrix/tiny-deepseek2.chat.imatrix.gguf").string());
    // The counts of blk.2.ffn_down_exps.weight: found through the reader, then altered in the copy.
    const std::string chat = dir_.file("chat.imatrix.gguf");
    test::write_file(chat, bytes);
    RankOptions o;
    o.imatrices = {{"chat", chat}, {"code", code}};
    o.model = model;
    o.ratio = 0.25;
    const RankInput clean = read_rank_input(resolve_rank_sources(o));
    EXPECT_TRUE(clean.sanity.empty()) << clean.sanity.front().message;
    const uint64_t at = clean.domains[0].blocks[1].counts_offset;
    float c;
    std::memcpy(&c, bytes.data() + at, 4);
    c += 5;
    std::memcpy(bytes.data() + at, &c, 4);
    test::write_file(chat, bytes);

    const RankInput in = read_rank_input(resolve_rank_sources(o));
    ASSERT_EQ(in.sanity.size(), 1u);
    EXPECT_EQ(
        in.sanity[0].message,
        "domain chat: blk.2: the routed-expert counts sum to 6661, but expert_used_count 4 × 1664 tokens "
        "(imatrix.chunk_count 13 × imatrix.chunk_size 128) is 6656: made with another top-k, by a "
        "partial or streamed run, or for another model?");
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    EXPECT_NE(std::find(r.warnings.begin(), r.warnings.end(), chat + ": " + in.sanity[0].message),
              r.warnings.end());
    EXPECT_NE(render_receipt(in, r).find("- " + chat + ": " + in.sanity[0].message), std::string::npos);

    o.strict = true;
    try {
        read_rank_input(resolve_rank_sources(o));
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_EQ(e.file(), chat);
        EXPECT_EQ(e.offset(), at);
        EXPECT_EQ(e.field(), "entry 'blk.2.ffn_down_exps.weight' counts");
        EXPECT_EQ(e.detail(), in.sanity[0].message + " (strict)");  // the library names the request field
        EXPECT_EQ(test::shown(e).substr(test::shown(e).size() - 11), " (--strict)");
    }
}

}  // namespace
}  // namespace gguf_reap
