// External per-token-mean scores (docs/method.md, "Per-token means"): summed over routed tokens by
// default (mean × activation_counts), kept as means with --score-aggregate mean, with the receipt's
// warning above 25 % pruned; on the trained fixture's true REAP scores and on hand-written files.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "ops/rank/rank_keep.h"
#include "ops/rank/rank_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

std::vector<std::vector<int64_t>> kept(const RankDecision& r) {
    std::vector<std::vector<int64_t>> k;
    for (const auto& b : r.keeplist.blocks) k.push_back(b.keep);
    return k;
}

bool warns(const RankDecision& r, const std::string& part) {
    return std::any_of(r.warnings.begin(), r.warnings.end(),
                       [&](const std::string& w) { return w.find(part) != std::string::npos; });
}

TEST(ScoreAggregate, TrainedFixtureReapIsSummedByDefault) {
    REQUIRE_FIXTURES();
    const std::string s = test::fixture("trained/scores/tiny-qwen3moe-trained-A.reap.");
    RankOptions o;
    o.criterion = Criterion::kExternal;
    for (const char* d : {"c", "python", "markdown", "legal", "changelog"})
        o.score_files.push_back({d, s + d + ".json"});
    o.model = test::fixture("trained/models/tiny-qwen3moe-trained-A-Q8_0.gguf");
    o.keep = 8;
    o.hash_inputs = false;
    // The default: `reap` × activation_counts, which ranks as the file's own reap_sum does.
    const RankInput summed = read_rank_input(resolve_rank_sources(o));
    EXPECT_TRUE(summed.score_is_mean && summed.score_times_counts);
    const RankDecision a = rank_experts(summed, resolve_rank_method(o));
    o.score_field = "reap_sum";
    const RankInput sums = read_rank_input(resolve_rank_sources(o));
    EXPECT_FALSE(sums.score_is_mean);
    EXPECT_EQ(kept(a), kept(rank_experts(sums, resolve_rank_method(o))));
    EXPECT_FALSE(warns(a, "per-token mean"));
    EXPECT_NE(render_receipt(summed, a).find("Score field: `reap`, a per-token mean, summed over the routed "
                                             "tokens: `reap` × `activation_counts`"),
              std::string::npos);
    EXPECT_EQ(rank_method_json(summed, a)["score_aggregate"], "sum");
    // --score-aggregate mean: the paper's form, another selection, and the warning at 50 % pruned.
    o.score_field = "";
    o.score_aggregate = "mean";
    const RankInput means = read_rank_input(resolve_rank_sources(o));
    const RankDecision m = rank_experts(means, resolve_rank_method(o));
    EXPECT_NE(kept(m), kept(a));
    EXPECT_TRUE(warns(m,
                      "score field 'reap' is a per-token mean and prunes 8 of 16 experts in every block "
                      "(50 %): above 25 % a mean keeps rarely routed experts and drops busy ones"));
    EXPECT_EQ(rank_method_json(means, m)["score_aggregate"], "mean");
    // At 25 % pruned (4 of 16) no warning.
    o.keep = 12;
    EXPECT_FALSE(warns(rank_experts(read_rank_input(resolve_rank_sources(o)), resolve_rank_method(o)),
                       "per-token mean"));
}

TEST(ScoreAggregate, MeanWithoutCountsNeedsTheFlag) {
    test::TempDir dir;
    const nlohmann::json j{{"format", "gguf-reap.expert-scores"},
                           {"version", 1},
                           {"blocks", {{"1", {{"reap", {0.5, 0.1, 0.2, 0.3}}}}}}};
    const std::string t = j.dump();
    test::write_file(dir.file("s.json"), std::vector<uint8_t>(t.begin(), t.end()));
    RankOptions o;
    o.criterion = Criterion::kExternal;
    o.score_files = {{"a", dir.file("s.json")}};
    o.keep = 2;
    try {
        read_rank_input(resolve_rank_sources(o));
        FAIL() << "no error";
    } catch (const UsageError& e) {
        EXPECT_EQ(test::shown(e),
                  dir.file("s.json") +
                      ": block 1: 'reap' is a per-token mean, which rank sums over the routed tokens (mean × "
                      "activation_counts) by default, but the block has no activation_counts: add them, or "
                      "give --score-aggregate mean for the REAP paper's per-token form (docs/method.md: it "
                      "keeps rarely routed experts at high ratios)");
    }
    o.score_aggregate = "mean";
    const RankInput in = read_rank_input(resolve_rank_sources(o));
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    EXPECT_EQ(r.keeplist.blocks[0].keep, (std::vector<int64_t>{0, 3}));
    EXPECT_TRUE(warns(r, "score field 'reap' is a per-token mean and prunes 2 of 4"));
    // A field that is not a mean is taken as given, with or without counts.
    o.score_aggregate = "sum";
    o.score_field = "reap";
    const nlohmann::json k{{"blocks", {{"1", {{"score", {0.5, 0.1, 0.2, 0.3}}}}}}};
    const std::string u = k.dump();
    test::write_file(dir.file("t.json"), std::vector<uint8_t>(u.begin(), u.end()));
    o.score_files = {{"a", dir.file("t.json")}};
    o.score_field = "score";
    EXPECT_EQ(rank_experts(read_rank_input(resolve_rank_sources(o)), resolve_rank_method(o))
                  .keeplist.blocks[0]
                  .keep,
              (std::vector<int64_t>{0, 3}));
}

TEST(ScoreAggregate, ReapMeanCriterionWarnsAboveAQuarter) {
    REQUIRE_FIXTURES();
    const std::string t = test::fixture("trained/imatrix/tiny-qwen3moe-trained-A.");
    RankOptions o;
    o.imatrices = {{"c", t + "c.imatrix.gguf"}, {"legal", t + "legal.imatrix.gguf"}};
    o.model = test::fixture("trained/models/tiny-qwen3moe-trained-A-Q8_0.gguf");
    o.criterion = Criterion::kReapMean;
    o.keep = 10;
    o.hash_inputs = false;
    const RankInput in = read_rank_input(resolve_rank_sources(o));
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    EXPECT_TRUE(warns(r,
                      "criterion reap-mean is a per-token mean and prunes 6 of 16 experts in every block "
                      "(38 %)"));
    EXPECT_NE(render_receipt(in, r).find("criterion reap-mean is a per-token mean"), std::string::npos);
    o.criterion = Criterion::kEnergy;
    EXPECT_FALSE(warns(rank_experts(read_rank_input(resolve_rank_sources(o)), resolve_rank_method(o)),
                       "per-token mean"));
}

}  // namespace
}  // namespace gguf_reap
