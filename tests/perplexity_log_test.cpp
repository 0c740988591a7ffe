// format/perplexity_log on logs recorded from llama.cpp 34af94cd9 (tests/data/llama-perplexity/README.md).
#include "format/perplexity_log.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace gguf_reap {
namespace {

std::string recorded(const std::string& name) {
    std::ifstream in(fmt::format("{}/llama-perplexity/{}", GGUF_REAP_TEST_DATA, name), std::ios::binary);
    EXPECT_TRUE(in) << name;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST(PerplexityLog, KldRunSummary) {
    const KldLog log = parse_kld_log(recorded("kld-keep8-python.txt"));
    ASSERT_TRUE(log.shape);
    EXPECT_EQ(log.shape->chunks, 8);
    EXPECT_EQ(log.shape->n_ctx, 128);
    EXPECT_EQ(log.shape->batch, 2048);
    EXPECT_EQ(log.shape->n_seq, 16);
    ASSERT_EQ(log.rows.size(), 8u);
    EXPECT_EQ(log.rows[0].chunk, 1);
    EXPECT_DOUBLE_EQ(log.rows[0].ppl.value, 61.5583);
    EXPECT_DOUBLE_EQ(log.rows[0].same_top.err, 6.349);
    EXPECT_TRUE(log.summary_complete);
    ASSERT_TRUE(log.figures);
    const KldFigures& f = *log.figures;
    EXPECT_EQ(f.from, "summary");
    EXPECT_EQ(f.chunks, 8);
    EXPECT_DOUBLE_EQ(f.ppl_output.value, 69.769033);
    EXPECT_DOUBLE_EQ(f.ppl_output.err, 8.942042);
    ASSERT_TRUE(f.ppl_source);
    EXPECT_DOUBLE_EQ(f.ppl_source->value, 33.990600);
    EXPECT_DOUBLE_EQ(f.ln_ppl_ratio.value, 0.719106);
    EXPECT_DOUBLE_EQ(f.ln_ppl_ratio.err, 0.058970);
    EXPECT_DOUBLE_EQ(f.kld.value, 0.865733);
    EXPECT_DOUBLE_EQ(f.kld.err, 0.038526);
    EXPECT_EQ(f.kld_median, 0.689885);
    EXPECT_EQ(f.kld_p99, 4.122076);
    EXPECT_EQ(f.kld_p999, 6.689950);
    EXPECT_EQ(f.kld_max, 7.684709);
    EXPECT_DOUBLE_EQ(f.rms_dp.value, 25.058);
    EXPECT_DOUBLE_EQ(f.rms_dp.err, 1.356);
    EXPECT_DOUBLE_EQ(f.same_top.value, 39.881);
    EXPECT_DOUBLE_EQ(f.same_top.err, 2.183);
    EXPECT_FALSE(log.too_few_tokens);
}

TEST(PerplexityLog, EveryRecordedKldRunHasItsSummary) {
    const std::pair<const char*, double> runs[] = {{"kld-keep12-python.txt", 0.638036},
                                                   {"kld-keep12-c.txt", 0.163024},
                                                   {"kld-keep8-c.txt", 0.596336},
                                                   {"kld-keep8-python.txt", 0.865733}};
    for (const auto& [name, kld] : runs) {
        const KldLog log = parse_kld_log(recorded(name));
        ASSERT_TRUE(log.figures) << name;
        EXPECT_EQ(log.figures->from, "summary") << name;
        EXPECT_DOUBLE_EQ(log.figures->kld.value, kld) << name;
        EXPECT_EQ(log.rows.size(), 8u) << name;
    }
    EXPECT_DOUBLE_EQ(parse_kld_log(recorded("kld-keep8-c.txt")).figures->same_top.value, 58.730);
}

TEST(PerplexityLog, SummaryCutOffReadsTheLastChunkRow) {
    const KldLog log = parse_kld_log(recorded("kld-keep8-python-cut.txt"));
    EXPECT_FALSE(log.summary_complete);
    ASSERT_TRUE(log.figures);
    const KldFigures& f = *log.figures;
    EXPECT_EQ(f.from, "last chunk row");
    EXPECT_EQ(f.chunks, 8);
    EXPECT_DOUBLE_EQ(f.kld.value, 0.86573);
    EXPECT_DOUBLE_EQ(f.kld.err, 0.03853);
    EXPECT_DOUBLE_EQ(f.ppl_output.value, 69.7690);
    EXPECT_DOUBLE_EQ(f.ln_ppl_ratio.value, 0.71911);
    EXPECT_DOUBLE_EQ(f.rms_dp.value, 25.058);
    EXPECT_DOUBLE_EQ(f.same_top.value, 39.881);
    EXPECT_FALSE(f.ppl_source);
    EXPECT_FALSE(f.kld_p99);
    EXPECT_FALSE(f.kld_median);
}

TEST(PerplexityLog, TooFewScoredTokensForASummary) {
    // 1 chunk = 63 scored tokens: llama-perplexity prints no summary below 100.
    const KldLog log = parse_kld_log(recorded("kld-keep8-python-1chunk.txt"));
    ASSERT_EQ(log.rows.size(), 1u);
    ASSERT_TRUE(log.figures);
    EXPECT_EQ(log.figures->from, "last chunk row");
    EXPECT_DOUBLE_EQ(log.figures->kld.value, 1.04418);
    EXPECT_DOUBLE_EQ(log.figures->same_top.value, 50.794);
}

TEST(PerplexityLog, AFailedRunHasNoFigures) {
    const KldLog log = parse_kld_log(recorded("kld-missing-base.txt"));
    EXPECT_FALSE(log.figures);
    EXPECT_TRUE(log.rows.empty());
    EXPECT_EQ(last_lines(recorded("kld-missing-base.txt"), 1),
              "0.00.641.926 E kl_divergence: failed to open missing.kld");
}

TEST(PerplexityLog, BaseRun) {
    const BaseLog b = parse_base_log(recorded("base-python.txt"));
    ASSERT_TRUE(b.shape);
    EXPECT_EQ(b.shape->chunks, 8);
    EXPECT_EQ(b.shape->n_ctx, 128);
    ASSERT_TRUE(b.ppl);
    EXPECT_DOUBLE_EQ(b.ppl->value, 33.9905);
    EXPECT_DOUBLE_EQ(b.ppl->err, 4.56278);
    EXPECT_FALSE(b.too_few_tokens);
    EXPECT_DOUBLE_EQ(parse_base_log(recorded("base-c.txt")).ppl->value, 27.0052);
}

TEST(PerplexityLog, TooShortText) {
    const BaseLog b = parse_base_log(recorded("base-too-short.txt"));
    ASSERT_TRUE(b.too_few_tokens);
    EXPECT_EQ(b.too_few_tokens->needed, 256);
    EXPECT_EQ(b.too_few_tokens->have, 94);
    EXPECT_FALSE(b.ppl);
    EXPECT_FALSE(b.shape);
}

TEST(PerplexityLog, CutRowsAndForeignLinesAreIgnored) {
    const std::string row =
        "   3      72.3509 ±   15.6837       0.74119 ±    0.10941       1.00413 ±    0.07961    24.774 ±  "
        "2.342 %    39.683 ±  3.568 %\n";
    EXPECT_EQ(parse_kld_log(row).rows.size(), 1u);
    // The same row cut inside its last column, and lines that only look alike.
    const std::string cut = row.substr(0, row.size() - 12) + "\n";
    EXPECT_TRUE(parse_kld_log(cut).rows.empty());
    // Eighteen words, but a "%" that is not one: after Δp RMS, and after same-top (the row's last word).
    EXPECT_TRUE(parse_kld_log(
                    "   3      72.3509 ±   15.6837       0.74119 ±    0.10941       1.00413 ±    0.07961    "
                    "24.774 ±  2.342 x    39.683 ±  3.568 %\n")
                    .rows.empty());
    EXPECT_TRUE(parse_kld_log(
                    "   3      72.3509 ±   15.6837       0.74119 ±    0.10941       1.00413 ±    0.07961    "
                    "24.774 ±  2.342 %    39.683 ±  3.568 x\n")
                    .rows.empty());
    EXPECT_TRUE(
        parse_kld_log("chunk             PPL  ln(PPL(Q)/PPL(base))\n[1]23.7496,[2]19.3478,\n").rows.empty());
    EXPECT_FALSE(parse_kld_log("Mean    KLD:   abc ±   0.1\n").figures);
    EXPECT_FALSE(parse_base_log("Final estimate: PPL = 1.0 +/-\n").ppl);
}

TEST(PerplexityLog, TokenCount) {
    EXPECT_EQ(parse_token_count("[1, 2, 3]\nTotal number of tokens: 3\n"), 3);
    EXPECT_FALSE(parse_token_count("[1, 2, 3]\n"));
}

}  // namespace
}  // namespace gguf_reap
