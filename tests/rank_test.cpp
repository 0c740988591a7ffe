// rank's decision on synthetic measurements: scores, ties, consensus, dead and super experts, groups,
// protection and the refusals, without any file (rank_experts is pure).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "ops/rank/criteria.h"
#include "ops/rank/rank_keep.h"
#include "ops/rank/rank_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

// One domain whose expert e in block b saw count(b, e) tokens with `mean` energy per token.
DomainData domain(const std::string& name, size_t blocks, int64_t E,
                  const std::function<std::pair<double, double>(size_t, int64_t)>& count_mean) {
    DomainData d;
    d.name = name;
    d.path = name + ".imatrix.gguf";
    d.format = "gguf";
    for (size_t b = 0; b < blocks; ++b) {
        BlockStats s;
        s.present = true;
        for (int64_t e = 0; e < E; ++e) {
            auto [c, m] = count_mean(b, e);
            s.count.push_back(c);
            s.mean.push_back(c > 0 ? m : 0);
            s.energy.push_back(c * m);
            s.peak.push_back(c > 0 ? m / 10 : 0);  // the hottest channel: a tenth of the row's energy
            s.dead.push_back(c == 0);
        }
        d.blocks.push_back(s);
    }
    return d;
}

RankInput input(int64_t E, std::vector<int> blocks, uint64_t used = 0, uint64_t groups = 0) {
    RankInput in;
    in.expert_count = E;
    in.blocks = std::move(blocks);
    in.expert_used_count = used;
    in.expert_group_count = groups;
    return in;
}

RankOptions keep(int64_t n) {
    RankOptions o;
    o.keep = n;
    return o;
}

std::vector<int64_t> kept(const RankDecision& r, size_t b) {
    return r.keeplist.blocks[b].keep;
}

std::string usage_error(const RankInput& in, const RankOptions& o) {
    try {
        rank_experts(in, resolve_rank_method(o));
    } catch (const UsageError& e) {
        return test::shown(e);
    }
    return "(no error)";
}

// The criteria table (ops/rank/criteria.cpp) has one row per value of Criterion, each with a name
// that parses back to it, and the pooled consensus exactly where the inputs are imatrices.
TEST(RankCriteria, EveryCriterionHasOneRow) {
    std::set<std::string> names;
    for (int i = 0; i <= static_cast<int>(Criterion::kExternal); ++i) {  // kExternal: the last value
        const Criterion c = static_cast<Criterion>(i);
        const CriterionSpec& row = criterion_spec(c);
        EXPECT_EQ(row.id, c);
        EXPECT_EQ(parse_criterion(row.name), c);
        EXPECT_TRUE(names.insert(row.name).second) << row.name;
        EXPECT_NE(std::string(row.formula), "");
        EXPECT_NE(row.score, nullptr);
        EXPECT_EQ(row.pooled == nullptr, row.needs.score_files) << row.name;
        EXPECT_EQ(row.model_why != nullptr, row.needs.down_weights) << row.name;
    }
    EXPECT_EQ(criteria().size(), names.size());
    EXPECT_EQ(criterion_choices(" | ", " | "), "frequency | energy | reap-mean | weighted-energy | external");
    EXPECT_EQ(criterion_choices(", ", " or "), "frequency, energy, reap-mean, weighted-energy or external");
    EXPECT_EQ(consensus_choices(", ", " or "), "min-rank, mean-rank, sum, pooled or max-min");
}

TEST(RankRules, KeepsTheHighestEnergyExperts) {
    RankInput in = input(8, {1});
    in.domains.push_back(domain(
        "chat", 1, 8, [](size_t, int64_t e) { return std::make_pair(100.0, 1.0 + static_cast<double>(e)); }));
    in.domains.push_back(domain(
        "code", 1, 8, [](size_t, int64_t e) { return std::make_pair(100.0, 1.0 + static_cast<double>(e)); }));
    in.domains.push_back(domain(
        "wiki", 1, 8, [](size_t, int64_t e) { return std::make_pair(100.0, 1.0 + static_cast<double>(e)); }));
    const RankDecision r = rank_experts(in, resolve_rank_method(keep(5)));
    EXPECT_EQ(kept(r, 0), (std::vector<int64_t>{3, 4, 5, 6, 7}));
    EXPECT_EQ(r.keeplist.blocks[0].prune, (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(r.ranks[r.idx(0, 0, 7)], 1);
    EXPECT_EQ(r.ranks[r.idx(0, 0, 0)], 8);
    EXPECT_EQ(safety_margin_sentence(r),
              "no pruned expert ranks better than 6 of 8 in any domain, in any layer (median layer: 6); the "
              "closest to being kept is blk.1 expert 2, ranked 6 in chat");
    EXPECT_TRUE(r.warnings.size() >= 1);  // no --model
}

// Fewer than three domains warn, naming the kinds of text that no domain is named for.
TEST(RankRules, FewDomainsWarnOfTheKindsNotGiven) {
    auto warning_for = [](std::vector<std::string> names) {
        RankInput in = input(4, {0});
        for (const auto& n : names)
            in.domains.push_back(domain(n, 1, 4, [](size_t, int64_t e) {
                return std::make_pair(10.0, 1.0 + static_cast<double>(e));
            }));
        for (const auto& w : rank_experts(in, resolve_rank_method(keep(2))).warnings)
            if (w.starts_with("only ")) return w;
        return std::string("(none)");
    };
    EXPECT_EQ(warning_for({"chat", "Code"}),
              "only 2 domain(s) (chat, Code): experts that serve other kinds of text (reasoning, other "
              "languages) may look unused; rank with imatrices from several kinds of text");
    EXPECT_EQ(warning_for({"wiki"}),
              "only 1 domain(s) (wiki): experts that serve other kinds of text (code, dialogue, reasoning, "
              "other languages) may look unused; rank with imatrices from several kinds of text");
    EXPECT_EQ(warning_for({"a", "b", "c"}), "(none)");
}

TEST(RankRules, TiesRankTheLowerExpertIdBetter) {
    RankInput in = input(6, {0});
    for (const char* n : {"a", "b", "c"})
        in.domains.push_back(domain(n, 1, 6, [](size_t, int64_t) { return std::make_pair(10.0, 2.0); }));
    const RankDecision r = rank_experts(in, resolve_rank_method(keep(4)));
    EXPECT_EQ(kept(r, 0), (std::vector<int64_t>{0, 1, 2, 3}));
    for (int64_t e = 0; e < 6; ++e) EXPECT_EQ(r.ranks[r.idx(0, 0, static_cast<size_t>(e))], e + 1);
}

// Ranks from external scores as given (any sign, zeros of both signs, infinities, NaN, repeats),
// against the rule stated in docs/method.md, applied here by a comparison sort: score descending, equal
// scores (0.0 == -0.0) by the lower expert id, NaN last.
TEST(RankRules, RanksFollowScoresDescendingThenIdsForAnyValues) {
    std::vector<double> v = {3.5,     -1.0, 0.0, -0.0, std::nan(""), INFINITY, -INFINITY, 1e300,
                             -1e-300, 3.5,  2.0, 7.0,  -INFINITY,    0.0,      5e-324,    -5e-324};
    uint64_t x = 12345;
    for (int i = 0; i < 1000; ++i) {  // many values with few distinct ones (ties) and spread exponents
        x = x * 6364136223846793005u + 1442695040888963407u;
        const double m = static_cast<double>((x >> 33) % 17) - 8;
        v.push_back(i % 3 ? m : std::ldexp(m, static_cast<int>((x >> 20) % 200) - 100));
    }
    const int64_t E = static_cast<int64_t>(v.size());
    RankInput in = input(E, {0});
    DomainData d;
    d.name = "ext";
    d.path = "ext.json";
    d.format = "json";
    BlockStats s;
    s.present = true;
    s.external = v;
    s.count.assign(v.size(), std::nan(""));
    s.dead.assign(v.size(), 0);
    d.blocks.push_back(s);
    in.domains.push_back(d);
    RankOptions o = keep(E);
    o.criterion = Criterion::kExternal;
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    std::vector<size_t> order(v.size());
    for (size_t e = 0; e < v.size(); ++e) order[e] = e;
    const auto key = [&](size_t e) { return std::isnan(v[e]) ? -INFINITY : v[e]; };
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t c) { return key(a) != key(c) ? key(a) > key(c) : a < c; });
    for (size_t i = 0; i < order.size(); ++i)
        ASSERT_EQ(r.ranks[r.idx(0, 0, order[i])], static_cast<int32_t>(i + 1)) << "expert " << order[i];
    EXPECT_EQ(r.ranks[r.idx(0, 0, 5)], 1);                            // +inf
    EXPECT_EQ(r.ranks[r.idx(0, 0, 3)], r.ranks[r.idx(0, 0, 2)] + 1);  // -0.0 ties 0.0: lower id first
    EXPECT_EQ(r.ranks[r.idx(0, 0, 6)], r.ranks[r.idx(0, 0, 4)] + 1);  // NaN is -inf, before expert 6's
    EXPECT_EQ(r.ranks[r.idx(0, 0, 12)], E);                           // the last -inf
}

TEST(RankRules, MinRankKeepsASpecialistThatMeanRankDrops) {
    // Expert 0 is the best in "code" and the worst elsewhere; expert 5 is second everywhere.
    RankInput in = input(6, {0});
    in.domains.push_back(domain("code", 1, 6, [](size_t, int64_t e) {
        return std::make_pair(10.0, e == 0 ? 100.0 : 10.0 - static_cast<double>(e));
    }));
    for (const char* n : {"chat", "wiki", "prose"})
        in.domains.push_back(domain(n, 1, 6, [](size_t, int64_t e) {
            return std::make_pair(10.0, e == 0 ? 0.5 : 10.0 - static_cast<double>(e));
        }));
    RankOptions o = keep(2);
    o.super_share = 1.0;  // expert 0 carries 74 % of code's energy: not what this test is about
    const RankDecision minr = rank_experts(in, resolve_rank_method(o));
    EXPECT_EQ(kept(minr, 0), (std::vector<int64_t>{0, 1}));
    o.consensus = Consensus::kMeanRank;
    const RankDecision meanr = rank_experts(in, resolve_rank_method(o));
    EXPECT_EQ(kept(meanr, 0), (std::vector<int64_t>{1, 2}));
}

TEST(RankRules, MinRankTiesUseTheSecondBestRank) {
    // Experts 1 and 2 are both ranked first somewhere; expert 2 is second in the other domain.
    RankInput in = input(4, {0});
    const double a[4] = {2, 9, 5, 1}, b[4] = {1, 2, 8, 9};
    in.domains.push_back(domain("a", 1, 4, [&](size_t, int64_t e) { return std::make_pair(1.0, a[e]); }));
    in.domains.push_back(domain("b", 1, 4, [&](size_t, int64_t e) { return std::make_pair(1.0, b[e]); }));
    RankOptions o = keep(1);
    o.super_share = 1.0;
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    // Ranks (a, b): expert 0 → (3, 4), 1 → (1, 3), 2 → (2, 2), 3 → (4, 1). Experts 1 and 3 tie on their
    // best rank; the second best breaks it: 3 beats 4.
    EXPECT_EQ(kept(r, 0), (std::vector<int64_t>{1}));
    EXPECT_EQ(r.consensus_rank[r.idx(0, 1)], 1);
    EXPECT_EQ(r.consensus_rank[r.idx(0, 3)], 2);
}

TEST(RankRules, DeadExpertsArePrunedFirstAndListed) {
    RankInput in = input(8, {1, 2}, 2);
    in.domains.push_back(domain("chat", 2, 8, [](size_t b, int64_t e) {
        return std::make_pair((b == 0 && e == 5) || (b == 1 && e == 0) ? 0.0 : 50.0,
                              1.0 + static_cast<double>(e % 3));
    }));
    const RankDecision r = rank_experts(in, resolve_rank_method(keep(7)));
    EXPECT_EQ(r.keeplist.blocks[0].prune, (std::vector<int64_t>{5}));
    EXPECT_EQ(r.keeplist.blocks[1].prune, (std::vector<int64_t>{0}));
    EXPECT_EQ(r.keeplist.blocks[0].dead, (std::vector<int64_t>{5}));
    ASSERT_EQ(r.dead_experts.size(), 2u);
    EXPECT_EQ(r.dead_experts[0].reason, "never routed in any of the 1 domain(s) (count 0 and zero energy)");
    ASSERT_EQ(r.keeplist.blocks[0].dead_reasons.size(), 1u);
}

TEST(RankRules, AnExpertRoutedInOneDomainIsNotDead) {
    RankInput in = input(4, {0});
    in.domains.push_back(
        domain("a", 1, 4, [](size_t, int64_t e) { return std::make_pair(e == 3 ? 0.0 : 5.0, 1.0); }));
    in.domains.push_back(domain("b", 1, 4, [](size_t, int64_t) { return std::make_pair(5.0, 1.0); }));
    const RankDecision r = rank_experts(in, resolve_rank_method(keep(4)));
    EXPECT_TRUE(r.dead_experts.empty());
}

TEST(RankRules, RefusesToKeepMoreThanTheLiveExperts) {
    RankInput in = input(8, {3});
    in.domains.push_back(
        domain("chat", 1, 8, [](size_t, int64_t e) { return std::make_pair(e < 3 ? 0.0 : 5.0, 1.0); }));
    EXPECT_EQ(usage_error(in, keep(6)),
              "block 3 has 3 dead experts (0, 1, 2), which are always pruned, but --keep 6 keeps 6 per "
              "block: keep at "
              "most 5 per block (prune at least the dead ones)");
}

TEST(RankRules, RefusesFewerThanExpertUsedCount) {
    RankInput in = input(16, {1}, 4);
    in.domains.push_back(domain("chat", 1, 16, [](size_t, int64_t) { return std::make_pair(5.0, 1.0); }));
    EXPECT_EQ(usage_error(in, keep(3)),
              "--keep 3 keeps 3 experts per block, fewer than expert_used_count = 4: llama.cpp routes every "
              "token to 4 "
              "experts and requires expert_used_count <= expert_count; keep at least 4");
    RankOptions o;
    o.prune = 13;
    EXPECT_NE(
        usage_error(in, o).find("--prune 13 keeps 3 experts per block, fewer than expert_used_count = 4"),
        std::string::npos);
}

TEST(RankRules, EveryGroupKeepsTheSameNumber) {
    // 8 experts in 2 groups of 4; group 0 has all the energy, yet each group keeps 2.
    RankInput in = input(8, {1}, 2, 2);
    in.domains.push_back(domain("chat", 1, 8, [](size_t, int64_t e) {
        return std::make_pair(10.0, e < 4 ? 100.0 + static_cast<double>(e) : 1.0 + static_cast<double>(e));
    }));
    const RankDecision r = rank_experts(in, resolve_rank_method(keep(4)));
    EXPECT_EQ(kept(r, 0), (std::vector<int64_t>{2, 3, 6, 7}));
    EXPECT_EQ(usage_error(in, keep(5)),
              "--keep 5 keeps 5 experts per block, not a multiple of expert_group_count = 2: routing picks "
              "experts group "
              "by group, so every group must keep the same number");
}

TEST(RankRules, RatioRoundsUpToAGroupMultiple) {
    RankInput in = input(8, {1}, 1, 4);
    in.domains.push_back(domain(
        "chat", 1, 8, [](size_t, int64_t e) { return std::make_pair(10.0, 1.0 + static_cast<double>(e)); }));
    RankOptions o;
    o.ratio = 0.4;  // prune round(3.2) = 3 → keep 5 → 8 (next multiple of 4)
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    EXPECT_EQ(r.n_keep, 8);
    o.ratio = 0.5;
    EXPECT_EQ(rank_experts(in, resolve_rank_method(o)).n_keep, 4);
    o.ratio = 1.5;
    EXPECT_EQ(usage_error(in, o), "--ratio 1.5 must be a fraction of experts to prune, 0 < R < 1");
}

TEST(RankRules, ExactlyOneRuleIsRequired) {
    RankInput in = input(4, {0});
    in.domains.push_back(domain("chat", 1, 4, [](size_t, int64_t) { return std::make_pair(1.0, 1.0); }));
    RankOptions o;
    EXPECT_EQ(usage_error(in, o), "give exactly one of --keep N, --prune N, --ratio R or --fit BUDGET");
    o.keep = 2;
    o.prune = 2;
    EXPECT_EQ(usage_error(in, o), "give exactly one of --keep N, --prune N, --ratio R or --fit BUDGET");
}

TEST(RankRules, ProtectKeepsAnExpertTheScoresWouldPrune) {
    RankInput in = input(6, {2});
    in.domains.push_back(domain(
        "chat", 1, 6, [](size_t, int64_t e) { return std::make_pair(10.0, 1.0 + static_cast<double>(e)); }));
    RankOptions o = keep(3);
    o.protect.push_back({2, 0});
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    EXPECT_EQ(kept(r, 0), (std::vector<int64_t>{0, 4, 5}));
    ASSERT_EQ(r.keeplist.blocks[0].protected_experts.size(), 1u);
    EXPECT_EQ(r.keeplist.blocks[0].protected_experts[0].reason, "--protect");
    o.protect = {{7, 0}};
    EXPECT_EQ(usage_error(in, o), "--protect 7:0: block 7 is not an MoE block (MoE blocks: 2..2)");
    o.protect = {{2, 6}};
    EXPECT_EQ(usage_error(in, o), "--protect 2:6: expert 6 is out of range (experts 0..5)");
}

TEST(RankRules, ProtectingADeadExpertIsRefused) {
    RankInput in = input(6, {2});
    in.domains.push_back(
        domain("chat", 1, 6, [](size_t, int64_t e) { return std::make_pair(e == 1 ? 0.0 : 10.0, 1.0); }));
    RankOptions o = keep(3);
    o.protect.push_back({2, 1});
    EXPECT_EQ(usage_error(in, o),
              "--protect 2:1: this expert was never routed in any domain; dead experts are always pruned "
              "(remove it "
              "from --protect, or add a domain in which it is routed)");
}

TEST(RankRules, TooManyProtectedExpertsIsRefused) {
    RankInput in = input(6, {2});
    in.domains.push_back(domain("chat", 1, 6, [](size_t, int64_t) { return std::make_pair(10.0, 1.0); }));
    RankOptions o = keep(1);
    o.protect = {{2, 3}, {2, 4}};
    EXPECT_EQ(usage_error(in, o),
              "block 2 has 2 protected experts (3, 4) but --keep 1 keeps only 1: keep more, or protect fewer "
              "(--super-share, --super-channel-ratio, --protect)");
}

TEST(RankRules, SuperExpertByShareOfEnergyIsKept) {
    // Expert 2 carries most of the energy but in few tokens: frequency alone would prune it.
    RankInput in = input(16, {1});
    in.domains.push_back(domain("chat", 1, 16, [](size_t, int64_t e) {
        return std::make_pair(e == 2 ? 5.0 : 100.0 + static_cast<double>(e), e == 2 ? 5000.0 : 1.0);
    }));
    in.domains[0].blocks[0].peak[2] = 0.2;  // no channel outlier: only the share test can find it
    RankOptions o = keep(8);
    o.criterion = Criterion::kFrequency;
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    ASSERT_EQ(r.protected_experts.size(), 1u);
    const SuperExpert& s = r.protected_experts[0];
    EXPECT_EQ(s.expert, 2);
    EXPECT_TRUE(s.by_share);
    EXPECT_FALSE(s.by_channel);  // its peak is a tenth of its mean, like every other expert's
    EXPECT_NEAR(s.share, 25000.0 / (25000.0 + 15 * 100 + 120 - 2), 1e-9);
    EXPECT_EQ(kept(r, 0).front(), 2);
    EXPECT_EQ(r.super_share, 0.5);  // min(0.5, 10/16)
}

TEST(RankRules, SuperExpertByChannelOutlierIsKept) {
    RankInput in = input(8, {1});
    in.domains.push_back(domain("chat", 1, 8, [](size_t, int64_t) { return std::make_pair(10.0, 1.0); }));
    in.domains[0].blocks[0].peak[7] = 50.0;  // 500× the others' 0.1
    RankOptions o = keep(4);
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    ASSERT_EQ(r.protected_experts.size(), 1u);
    EXPECT_TRUE(r.protected_experts[0].by_channel);
    EXPECT_NEAR(r.protected_experts[0].channel_ratio, 500.0, 1e-9);
    EXPECT_EQ(kept(r, 0), (std::vector<int64_t>{0, 1, 2, 7}));
    o.super_channel_ratio = 1000;
    EXPECT_TRUE(rank_experts(in, resolve_rank_method(o)).protected_experts.empty());
}

TEST(RankRules, PooledAddsCountsAcrossDomains) {
    RankInput in = input(3, {0});
    const double ca[3] = {10, 0, 5}, cb[3] = {0, 12, 6};
    in.domains.push_back(domain("a", 1, 3, [&](size_t, int64_t e) { return std::make_pair(ca[e], 1.0); }));
    in.domains.push_back(domain("b", 1, 3, [&](size_t, int64_t e) { return std::make_pair(cb[e], 1.0); }));
    RankOptions o = keep(1);
    o.criterion = Criterion::kFrequency;
    o.consensus = Consensus::kPooled;
    o.super_share = 1.0;
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    EXPECT_EQ(kept(r, 0), (std::vector<int64_t>{1}));  // 12 > 11 > 10
    EXPECT_DOUBLE_EQ(r.consensus_score[r.idx(0, 2)], 11.0);
}

TEST(RankRules, SumOfSharesNormalisesEachDomain) {
    // Domain b has 1000× the tokens of a; sum of shares still weighs them equally.
    RankInput in = input(2, {0});
    const double ca[2] = {9, 1}, cb[2] = {4000, 6000};
    in.domains.push_back(domain("a", 1, 2, [&](size_t, int64_t e) { return std::make_pair(ca[e], 1.0); }));
    in.domains.push_back(domain("b", 1, 2, [&](size_t, int64_t e) { return std::make_pair(cb[e], 1.0); }));
    RankOptions o = keep(1);
    o.consensus = Consensus::kSum;
    o.super_share = 1.0;
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    EXPECT_EQ(kept(r, 0), (std::vector<int64_t>{0}));  // 0.9 + 0.4 > 0.1 + 0.6
    EXPECT_NEAR(r.consensus_score[r.idx(0, 0)], 1.3, 1e-12);
}

TEST(RankRules, LegacyDomainsRefuseCriteriaThatNeedCounts) {
    RankInput in = input(4, {0});
    in.domains.push_back(domain("chat", 1, 4, [](size_t, int64_t) { return std::make_pair(1.0, 1.0); }));
    in.domains[0].format = "dat";
    in.domains[0].path = "chat.imatrix.dat";
    EXPECT_EQ(
        usage_error(in, keep(2)),
        "chat.imatrix.dat: a legacy .dat imatrix holds only each expert's mean energy (scaled by one ncall "
        "shared "
        "by all experts) and no per-expert routing counts, so --criterion energy cannot be computed from it; "
        "use "
        "the GGUF imatrix of the same run (llama-imatrix --output-format gguf, the default since 2025-07) or "
        "--criterion reap-mean");
    RankOptions o = keep(2);
    o.criterion = Criterion::kReapMean;
    EXPECT_NO_THROW(rank_experts(in, resolve_rank_method(o)));
    o.consensus = Consensus::kPooled;
    EXPECT_NE(usage_error(in, o).find("--consensus pooled adds raw counts and sums"), std::string::npos);
}

TEST(RankRules, ABlockMissingFromOneDomainIsRankedFromTheOthers) {
    RankInput in = input(4, {0, 1});
    in.domains.push_back(domain(
        "a", 2, 4, [](size_t, int64_t e) { return std::make_pair(5.0, 1.0 + static_cast<double>(e)); }));
    in.domains.push_back(domain(
        "b", 2, 4, [](size_t, int64_t e) { return std::make_pair(5.0, 10.0 - static_cast<double>(e)); }));
    in.domains[1].blocks[1] = BlockStats{};  // legacy partial-skip: no entry
    const RankDecision r = rank_experts(in, resolve_rank_method(keep(2)));
    EXPECT_EQ(kept(r, 1), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(r.ranks[r.idx(1, 1, 0)], 0);
}

TEST(RankRules, KeeplistCarriesIdentityOrOnlyTheExpertCount) {
    RankInput in = input(4, {5});
    in.domains.push_back(domain("a", 1, 4, [](size_t, int64_t) { return std::make_pair(5.0, 1.0); }));
    RankDecision r = rank_experts(in, resolve_rank_method(keep(2)));
    ASSERT_TRUE(r.keeplist.source.has_value());
    EXPECT_TRUE(r.keeplist.source->from_imatrix_only);
    const auto j = r.keeplist.to_json();
    EXPECT_EQ(j["source"].dump(), R"({"expert_count":4,"derived_from":"imatrix"})");
    EXPECT_EQ(j["method"]["criterion"], "energy");
    EXPECT_EQ(j["method"]["consensus"], "min-rank");
    EXPECT_EQ(j["method"]["domains"][0]["name"], "a");
}

TEST(RankHelpers, DomainSpecs) {
    auto d = parse_domain_spec("chat=/x/y.gguf");
    EXPECT_EQ(d.name, "chat");
    EXPECT_EQ(d.path, "/x/y.gguf");
    d = parse_domain_spec("/data/tiny.code.imatrix.gguf");
    EXPECT_EQ(d.name, "tiny.code");
    d = parse_domain_spec("/a=b/wiki.dat");
    EXPECT_EQ(d.name, "wiki");
    EXPECT_EQ(d.path, "/a=b/wiki.dat");
}

TEST(RankHelpers, ExpertRefs) {
    auto r = parse_expert_ref("2:6");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->block, 2);
    EXPECT_EQ(r->expert, 6);
    EXPECT_FALSE(parse_expert_ref("2"));
    EXPECT_FALSE(parse_expert_ref("2:x"));
    EXPECT_FALSE(parse_expert_ref("-1:3"));
    EXPECT_FALSE(parse_expert_ref("1:3:4"));
}

TEST(RankHelpers, Spearman) {
    EXPECT_NEAR(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, 1e-12);
    EXPECT_NEAR(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0, 1e-12);
    EXPECT_NEAR(spearman({1, 2, 3}, {1, 3, 2}), 0.5, 1e-12);
    EXPECT_TRUE(std::isnan(spearman({1, 1, 1}, {1, 2, 3})));
    // Ties get average ranks: a = (1.5, 1.5, 3), b = (1, 2, 3).
    EXPECT_NEAR(spearman({5, 5, 9}, {1, 2, 3}), 0.8660254037844386, 1e-12);
}

}  // namespace
}  // namespace gguf_reap
