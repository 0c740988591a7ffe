// rank on the llama.cpp-made fixtures (../shared/fixtures): the imatrices of tiny-deepseek2 know their
// dead experts (3 per MoE block) and the super-expert (block 2, expert 6); both readers must agree.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "cli/options.h"
#include "format/npz.h"
#include "gguf_reap/error.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/rank.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "ops/rank/rank_keep.h"
#include "ops/rank/rank_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::expected_json;
using test::fixture;

const char* kDomains[] = {"chat", "code", "prose", "reasoning", "wiki", "all"};
const char* kModel = "models/tiny-deepseek2-Q8_0.gguf";

std::string imatrix_path(const std::string& domain, const char* ext) {
    return fixture("imatrix/tiny-deepseek2." + domain + ".imatrix." + ext);
}

// Dead experts by design: router-dead plus bias-dead, per block.
std::set<std::pair<int, int64_t>> design_dead() {
    std::set<std::pair<int, int64_t>> out;
    const auto& des = expected_json()["design"]["tiny-deepseek2-f16.gguf"];
    for (const char* k : {"dead", "bias_dead"})
        for (const auto& [b, ids] : des[k].items())
            for (const auto& e : ids) out.insert({std::stoi(b), e.get<int64_t>()});
    return out;
}

std::set<std::pair<int, int64_t>> found_dead(const RankDecision& r) {
    std::set<std::pair<int, int64_t>> out;
    for (const auto& d : r.dead_experts) out.insert({d.block, d.expert});
    return out;
}

void expect_finds_design(const RankDecision& r, const std::string& what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(found_dead(r), design_dead());
    ASSERT_EQ(r.protected_experts.size(), 1u);
    EXPECT_EQ(r.protected_experts[0].block, 2);
    EXPECT_EQ(r.protected_experts[0].expert, 6);
    EXPECT_TRUE(r.protected_experts[0].by_share);
    EXPECT_TRUE(r.protected_experts[0].by_channel);
}

TEST(RankFixtures, EachGgufImatrixFindsTheDeadAndTheSuperExpert) {
    REQUIRE_FIXTURES();
    for (const char* d : kDomains) {
        RankOptions o;
        o.imatrices = {{d, imatrix_path(d, "gguf")}};
        o.model = fixture(kModel);
        o.prune = 3;
        const RankInput in = read_rank_input(resolve_rank_sources(o));
        expect_finds_design(rank_experts(in, resolve_rank_method(o)), d);
    }
}

TEST(RankFixtures, EachLegacyImatrixFindsTheDeadAndTheSuperExpert) {
    REQUIRE_FIXTURES();
    for (const char* d : kDomains) {
        RankOptions o;
        o.imatrices = {
            {d, imatrix_path(d, "dat")}};  // no model: the expert count comes from the router entry
        o.criterion = Criterion::kReapMean;
        o.prune = 3;
        const RankInput in = read_rank_input(resolve_rank_sources(o));
        EXPECT_EQ(in.expert_count, 16);
        EXPECT_EQ(in.blocks, (std::vector<int>{1, 2, 3}));
        expect_finds_design(rank_experts(in, resolve_rank_method(o)), std::string(d) + ".dat");
    }
}

TEST(RankFixtures, GgufAndLegacyReadersAgreeOnMeanEnergies) {
    REQUIRE_FIXTURES();
    for (const char* d : kDomains) {
        SCOPED_TRACE(d);
        const auto& exp =
            expected_json()["imatrix"]["imatrix/tiny-deepseek2." + std::string(d) + ".imatrix.gguf"];
        RankOptions o;
        o.imatrices = {{"gguf", imatrix_path(d, "gguf")}, {"dat", imatrix_path(d, "dat")}};
        o.model = fixture(kModel);
        o.criterion = Criterion::kReapMean;
        o.hash_inputs = false;
        const RankInput in = read_rank_input(resolve_rank_sources(o));
        ASSERT_EQ(in.domains.size(), 2u);
        EXPECT_EQ(in.domains[0].format, "gguf");
        EXPECT_EQ(in.domains[1].format, "dat");
        for (size_t b = 0; b < in.blocks.size(); ++b) {
            const std::string name = "blk." + std::to_string(in.blocks[b]) + ".ffn_down_exps.weight";
            const auto& means = exp["mean_sq_act_per_expert"][name];
            const auto& peaks = exp["max_channel_mean_sq_per_expert"][name];
            const auto& counts = exp["per_expert_counts"][name];
            for (size_t e = 0; e < 16; ++e) {
                for (size_t k = 0; k < 2; ++k) {
                    const BlockStats& s = in.domains[k].blocks[b];
                    SCOPED_TRACE(name + " expert " + std::to_string(e) + (k ? " dat" : " gguf"));
                    if (means[e].is_null()) {
                        EXPECT_TRUE(s.dead[e]);
                        continue;
                    }
                    EXPECT_FALSE(s.dead[e]);
                    // expected.json rounds to 6 decimals: a relative 1e-6 plus that rounding.
                    const double m = means[e].get<double>();
                    EXPECT_NEAR(s.mean[e] / 256.0, m, 1e-6 * m + 5e-7);
                    const double p = peaks[e].get<double>();
                    EXPECT_NEAR(s.peak[e], p, 1e-6 * p + 5e-7);
                }
                EXPECT_EQ(in.domains[0].blocks[b].count[e], counts[e].get<double>());
                EXPECT_TRUE(std::isnan(in.domains[1].blocks[b].count[e])) << "legacy .dat stores no counts";
                // The readers agree to float precision, not only to expected.json's rounding.
                if (!means[e].is_null()) {
                    const double g = in.domains[0].blocks[b].mean[e], l = in.domains[1].blocks[b].mean[e];
                    EXPECT_NEAR(g, l, 1e-6 * g);
                }
            }
        }
    }
}

TEST(RankFixtures, PruneThreeGivesTheDropDeadSpecOnEveryModel) {
    REQUIRE_FIXTURES();
    KeepList spec = KeepList::load(fixture("prune_specs/tiny-deepseek2.drop-dead.json"));
    for (const char* model :
         {"models/tiny-deepseek2-Q8_0.gguf", "models/tiny-deepseek2-Q4_K_M.gguf",
          "models/tiny-deepseek2-IQ2_XXS.gguf", "shards/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf"}) {
        SCOPED_TRACE(model);
        RankOptions o;
        for (const char* d : {"chat", "code", "prose", "reasoning", "wiki"})
            o.imatrices.push_back({d, imatrix_path(d, "gguf")});
        o.model = fixture(model);
        o.prune = 3;
        o.hash_inputs = false;
        const RankInput in = read_rank_input(resolve_rank_sources(o));
        const RankDecision r = rank_experts(in, resolve_rank_method(o));
        ShardSet m = ShardSet::open(fixture(model));
        MoeLayout layout = build_moe_layout(m);
        KeepList s = spec;
        validate_keeplist(s, layout, "drop-dead.json");
        KeepList mine = r.keeplist;
        validate_keeplist(mine, layout, "rank");
        ASSERT_EQ(mine.blocks.size(), s.blocks.size());
        for (size_t b = 0; b < s.blocks.size(); ++b) {
            EXPECT_EQ(mine.blocks[b].block, s.blocks[b].block);
            EXPECT_EQ(mine.blocks[b].keep, s.blocks[b].keep);
            EXPECT_EQ(mine.blocks[b].prune, s.blocks[b].prune);
        }
        EXPECT_EQ(
            safety_margin_sentence(r),
            "no pruned expert ranks better than 14 of 16 in any domain, in any layer (median layer: 14); "
            "the closest to being kept is blk.1 expert 3, ranked 14 in chat");
        for (size_t d = 0; d < 5; ++d) {
            EXPECT_EQ(r.pruned_token_share[d], 0.0);
            EXPECT_EQ(r.pruned_energy_share[d], 0.0);
        }
        ASSERT_TRUE(mine.source.has_value());
        EXPECT_EQ(mine.source->architecture, "deepseek2");
        EXPECT_EQ(mine.source->expert_used_count, 4u);
        EXPECT_EQ(mine.source->tensor_count, 70u);
        EXPECT_EQ(mine.source->shards.size(), std::string(model).find("shards/") == 0 ? 3u : 1u);
    }
}

TEST(RankFixtures, EveryCriterionAndConsensusStillFindsTheDesign) {
    REQUIRE_FIXTURES();
    for (Criterion c :
         {Criterion::kFrequency, Criterion::kEnergy, Criterion::kReapMean, Criterion::kWeightedEnergy})
        for (Consensus k : {Consensus::kMinRank, Consensus::kMeanRank, Consensus::kSum, Consensus::kPooled,
                            Consensus::kMaxMin}) {
            RankOptions o;
            for (const char* d : {"chat", "code", "prose", "reasoning", "wiki"})
                o.imatrices.push_back({d, imatrix_path(d, "gguf")});
            o.model = fixture(kModel);
            o.criterion = c;
            o.consensus = k;
            o.prune = 3;
            o.hash_inputs = false;
            const RankInput in = read_rank_input(resolve_rank_sources(o));
            const RankDecision r = rank_experts(in, resolve_rank_method(o));
            expect_finds_design(r, std::string(criterion_name(c)) + " " + consensus_name(k));
            for (size_t b = 0; b < 3; ++b) EXPECT_EQ(r.keeplist.blocks[b].prune, r.keeplist.blocks[b].dead);
        }
}

TEST(RankFixtures, PruningLiveExpertsKeepsTheSuperExpertAndReportsShares) {
    REQUIRE_FIXTURES();
    RankOptions o;
    for (const char* d : {"chat", "code", "prose", "reasoning", "wiki"})
        o.imatrices.push_back({d, imatrix_path(d, "gguf")});
    o.model = fixture(kModel);
    o.keep = 8;
    o.hash_inputs = false;
    const RankInput in = read_rank_input(resolve_rank_sources(o));
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    const auto& b2 = r.keeplist.blocks[1];
    EXPECT_TRUE(std::binary_search(b2.keep.begin(), b2.keep.end(), 6));
    // The rare experts (1 in blk.1, 11 in blk.2, 2 in blk.3: a handful of tokens) go before live ones.
    EXPECT_TRUE(std::binary_search(r.keeplist.blocks[0].prune.begin(), r.keeplist.blocks[0].prune.end(), 1));
    EXPECT_TRUE(std::binary_search(r.keeplist.blocks[2].prune.begin(), r.keeplist.blocks[2].prune.end(), 2));
    for (size_t d = 0; d < 5; ++d) {
        EXPECT_GT(r.pruned_token_share[d], 0.0);
        EXPECT_LT(r.pruned_token_share[d], 0.5);
        EXPECT_GT(r.pruned_energy_share[d], 0.0);
    }
    EXPECT_GT(r.safety_rank, 1);
}

TEST(RankFixtures, OutputsAreWrittenAndReadBack) {
    REQUIRE_FIXTURES();
    test::TempDir dir;
    RankOptions o;
    for (const char* d : {"chat", "code", "prose", "reasoning", "wiki"})
        o.imatrices.push_back({d, imatrix_path(d, "gguf")});
    o.model = fixture(kModel);
    o.prune = 3;
    const RankInput in = read_rank_input(resolve_rank_sources(o));
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    write_rank_outputs(in, r, dir.path().string(), false);
    KeepList back = KeepList::load(dir.file("keeplist.json"));
    EXPECT_EQ(back.n_keep, 13u);
    EXPECT_EQ(back.method["domains"][0]["sha256"],
              expected_json()["imatrix"]["imatrix/tiny-deepseek2.chat.imatrix.gguf"]["sha256"]);
    EXPECT_EQ(back.method["domains"][1]["tokens"], 54 * 128);
    ASSERT_EQ(back.blocks[1].protected_experts.size(), 1u);
    EXPECT_EQ(back.blocks[1].protected_experts[0].expert, 6);
    EXPECT_EQ(back.blocks[0].dead_reasons.size(), 3u);
    auto arrays = read_npz(dir.file("ranking.npz"));
    EXPECT_EQ(arrays["scores"].shape, (std::vector<int64_t>{5, 3, 16}));
    EXPECT_EQ(arrays["keep"].descr, "|b1");
    EXPECT_EQ(arrays["domains"].descr, "<U9");
    EXPECT_EQ(arrays["counts"].to_int64()[1], 4);  // chat, blk.1, expert 1 (rare)
    const auto receipt = test::read_file(dir.file("REAP-KEEPLIST-RECEIPT.md"));
    const std::string text(receipt.begin(), receipt.end());
    EXPECT_NE(
        text.find(
            "no pruned expert ranks better than 14 of 16 in any domain, in any layer (median layer: 14)"),
        std::string::npos);
    EXPECT_NE(text.find("be6f9030dde34296c4ebb12e7abb8c85dcf17a70bfc3d6163e7b82ce2661d7c0"),
              std::string::npos);
    EXPECT_NE(text.find("blk.2 expert 6"), std::string::npos);
    // The receipt names request fields as its caller spells them: field names for a library caller that
    // sets no spelling, the CLI's options for the CLI (RankInput::spell, from Events::spell).
    EXPECT_NE(text.find("plus `protect`. Always kept."), std::string::npos);
    EXPECT_EQ(text.find("--protect"), std::string::npos);
    RankInput spelled_in = in;
    spelled_in.spell = cli::option_spelling;
    write_rank_outputs(spelled_in, r, dir.file("cli"), false);
    const auto cli_receipt = test::read_file(dir.file("cli/REAP-KEEPLIST-RECEIPT.md"));
    const std::string cli_text(cli_receipt.begin(), cli_receipt.end());
    EXPECT_NE(cli_text.find("plus `--protect`. Always kept."), std::string::npos);
    try {
        write_rank_outputs(in, r, dir.path().string(), false);
        FAIL() << "overwrote without --force";
    } catch (const UsageError& e) {
        EXPECT_EQ(test::shown(e), dir.file("keeplist.json") + " exists; use --force to overwrite it");
    }
    EXPECT_NO_THROW(write_rank_outputs(in, r, dir.path().string(), true));
}

TEST(RankFixtures, LegacyImatrixRefusesEnergyAndSaysWhatToUse) {
    REQUIRE_FIXTURES();
    RankOptions o;
    o.imatrices = {{"chat", imatrix_path("chat", "dat")}};
    o.prune = 3;
    try {
        read_rank_input(resolve_rank_sources(o));
        FAIL();
    } catch (const UsageError& e) {
        const std::string m = test::shown(e);
        EXPECT_NE(m.find("tiny-deepseek2.chat.imatrix.dat: a legacy .dat imatrix holds only each expert's "
                         "mean energy"),
                  std::string::npos)
            << m;
        EXPECT_NE(m.find("use the GGUF imatrix of the same run"), std::string::npos);
        EXPECT_NE(m.find("--criterion reap-mean"), std::string::npos);
    }
}

TEST(RankFixtures, ModelChecksNameTheMismatch) {
    REQUIRE_FIXTURES();
    test::TempDir dir;
    // A model with another expert count: the fixture imatrix cannot belong to it.
    auto g = test::run_gen("model --skeleton --preset tiny --experts 8 --used 2 -o " + dir.file("m8.gguf"));
    ASSERT_EQ(g.exit_code, 0) << g.err;
    RankOptions o;
    o.imatrices = {{"chat", imatrix_path("chat", "gguf")}};
    o.model = dir.file("m8.gguf");
    o.prune = 3;
    try {
        read_rank_input(resolve_rank_sources(o));
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("imatrix.gguf: blk.1.ffn_down_exps.weight has 16 experts, but " +
                                             dir.file("m8.gguf") +
                                             " has 8: the imatrix was made for another model"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace gguf_reap
