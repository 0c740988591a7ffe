// The max-min consensus (ops/max_min.h): the search on hand-made blocks whose optimum is worked out
// below, its tie rules, groups, protected and dead experts; against brute force on random blocks; and
// on the fixtures, never a worse worst domain than min-rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "format/npz.h"
#include "gguf_reap/rank.h"
#include "ops/rank/max_min.h"
#include "ops/rank/rank_keep.h"
#include "ops/rank/rank_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

double worst(const std::vector<std::vector<double>>& share, const std::vector<uint8_t>& keep) {
    const auto r = retained_shares(share, keep);
    return *std::min_element(r.begin(), r.end());
}

MaxMinBlock block(std::vector<std::vector<double>> share, int64_t quota, std::vector<uint8_t> start) {
    MaxMinBlock b;
    b.share = std::move(share);
    const size_t E = start.size();
    b.group.assign(E, 0);
    b.quota = quota;
    b.protect.assign(E, 0);
    b.dead.assign(E, 0);
    b.start = std::move(start);
    return b;
}

TEST(MaxMin, HandWorkedBlock) {
    // Domain 0 lives in experts 0 and 1, domain 1 in 2 and 3. Keeping 2: {0, 2} and {0, 3} both leave
    // (0.6, 0.5), the best worst share; elimination drops 1 first ((0.7, 0.9) is the best remainder),
    // then 2 and 3 tie in objective and summed share (0.5 each): the higher id, 3, goes.
    const MaxMinBlock b = block({{0.5, 0.3, 0.1, 0.1}, {0.1, 0.1, 0.4, 0.4}}, 2, {1, 1, 0, 0});
    EXPECT_EQ(max_min_select(b), (std::vector<uint8_t>{1, 0, 1, 0}));
    EXPECT_DOUBLE_EQ(worst(b.share, max_min_select(b)), 0.5);
    EXPECT_DOUBLE_EQ(worst(b.share, b.start), 0.2);  // the start {0, 1} starves domain 1
}

TEST(MaxMin, ProtectedKeptDeadNeverAndGroupsHoldTheirQuota) {
    // 8 experts in 2 groups of 4, 2 kept per group. Expert 1 is protected though it carries nothing;
    // expert 6 is dead though its share is the largest of domain 1.
    MaxMinBlock b =
        block({{0.3, 0.0, 0.3, 0.1, 0.1, 0.1, 0.0, 0.1}, {0.1, 0.0, 0.0, 0.1, 0.2, 0.1, 0.4, 0.1}}, 2,
              {1, 1, 0, 0, 1, 1, 0, 0});
    b.group = {0, 0, 0, 0, 1, 1, 1, 1};
    b.protect[1] = 1;
    b.dead[6] = 1;
    const auto keep = max_min_select(b);
    EXPECT_EQ(keep[1], 1);
    EXPECT_EQ(keep[6], 0);
    EXPECT_EQ(std::count(keep.begin(), keep.begin() + 4, 1), 2);
    EXPECT_EQ(std::count(keep.begin() + 4, keep.end(), 1), 2);
    // Group 0 keeps 1 and the best other for both domains; group 1 can give domain 1 at most 0.2 + 0.1.
    EXPECT_GE(worst(b.share, keep), worst(b.share, b.start));
}

// All kept sets of `quota` per group (E ≤ 12), the best worst share.
double brute_force(const MaxMinBlock& b) {
    const size_t E = b.start.size();
    double best = -1;
    for (uint32_t m = 0; m < (1u << E); ++m) {
        std::vector<uint8_t> keep(E);
        bool ok = true;
        std::vector<int64_t> held(E, 0);
        for (size_t e = 0; e < E; ++e) {
            keep[e] = (m >> e) & 1;
            if (keep[e]) ++held[static_cast<size_t>(b.group[e])];
            if ((keep[e] && b.dead[e]) || (!keep[e] && b.protect[e])) ok = false;
        }
        for (size_t g = 0; g < E && ok; ++g)
            if (held[g] != (g <= static_cast<size_t>(b.group.back()) ? b.quota : 0)) ok = false;
        if (ok) best = std::max(best, worst(b.share, keep));
    }
    return best;
}

TEST(MaxMin, RandomBlocksAgainstBruteForce) {
    std::mt19937 rng(7);
    int optimal = 0, n = 0;
    for (int trial = 0; trial < 300; ++trial) {
        const size_t E = 6 + rng() % 7, D = 2 + rng() % 4;
        std::vector<std::vector<double>> share(D, std::vector<double>(E));
        for (auto& row : share) {
            double total = 0;
            // Skewed: a few experts carry most of a domain, as trained routers do.
            for (auto& x : row) total += (x = std::pow(std::uniform_real_distribution<double>(0, 1)(rng), 3));
            for (auto& x : row) x /= total;
        }
        const int64_t quota = 1 + static_cast<int64_t>(rng() % (E - 1));
        // The start: the first `quota` experts (a valid, arbitrary set).
        std::vector<uint8_t> start(E, 0);
        for (int64_t e = 0; e < quota; ++e) start[static_cast<size_t>(e)] = 1;
        const MaxMinBlock b = block(share, quota, start);
        const auto keep = max_min_select(b);
        ASSERT_EQ(std::count(keep.begin(), keep.end(), 1), quota);
        const double got = worst(share, keep), best = brute_force(b);
        ASSERT_GE(got, worst(share, start) - 1e-12) << "trial " << trial;
        ASSERT_LE(got, best + 1e-12) << "trial " << trial;
        optimal += got >= best - 1e-12;
        ++n;
        // Deterministic.
        ASSERT_EQ(max_min_select(b), keep);
    }
    // A search, not an exact solver: it finds the optimum on nearly every small block.
    EXPECT_GE(optimal, n * 95 / 100) << optimal << " of " << n << " optimal";
    std::printf("max-min found the brute-force optimum on %d of %d random blocks\n", optimal, n);
}

// On the fixtures: every block's worst domain keeps at least as much under max-min as under min-rank,
// at every keep count, and ranking.npz carries the shares.
TEST(MaxMinFixtures, NeverWorseThanMinRank) {
    REQUIRE_FIXTURES();
    struct Set {
        std::string model;
        std::vector<DomainSpec> domains;
        std::vector<int64_t> keeps;
    };
    const std::string t = test::fixture("trained/imatrix/tiny-qwen3moe-trained-A.");
    const std::string f = test::fixture("imatrix/tiny-deepseek2.");
    const std::vector<Set> sets{{test::fixture("trained/models/tiny-qwen3moe-trained-A-Q8_0.gguf"),
                                 {{"c", t + "c.imatrix.gguf"},
                                  {"python", t + "python.imatrix.gguf"},
                                  {"markdown", t + "markdown.imatrix.gguf"},
                                  {"legal", t + "legal.imatrix.gguf"},
                                  {"changelog", t + "changelog.imatrix.gguf"}},
                                 {14, 12, 10, 8, 6, 4}},
                                {test::fixture("models/tiny-deepseek2-Q8_0.gguf"),
                                 {{"chat", f + "chat.imatrix.gguf"},
                                  {"code", f + "code.imatrix.gguf"},
                                  {"prose", f + "prose.imatrix.gguf"},
                                  {"wiki", f + "wiki.imatrix.gguf"}},
                                 {12, 10, 8, 6}}};
    bool better_somewhere = false;
    for (const Set& s : sets)
        for (int64_t keep : s.keeps) {
            SCOPED_TRACE(s.model + " keep " + std::to_string(keep));
            RankOptions o;
            o.imatrices = s.domains;
            o.model = s.model;
            o.keep = keep;
            o.hash_inputs = false;
            const RankInput in = read_rank_input(resolve_rank_sources(o));
            o.consensus = Consensus::kMinRank;
            const RankDecision a = rank_experts(in, resolve_rank_method(o));
            o.consensus = Consensus::kMaxMin;
            const RankDecision m = rank_experts(in, resolve_rank_method(o));
            const size_t B = a.blocks.size(), D = in.domains.size();
            for (size_t b = 0; b < B; ++b) {
                double wa = 1, wm = 1;
                for (size_t d = 0; d < D; ++d) {
                    wa = std::min(wa, a.retained_share[d * B + b]);
                    wm = std::min(wm, m.retained_share[d * B + b]);
                }
                EXPECT_GE(wm, wa - 1e-12) << "blk." << a.blocks[b];
                better_somewhere |= wm > wa + 1e-9;
                // The keeplist keeps what the mask says, the dead stay pruned, the protected kept.
                EXPECT_EQ(m.keeplist.blocks[b].keep.size(), static_cast<size_t>(keep));
            }
            EXPECT_GE(m.worst_share, a.worst_share - 1e-12);
        }
    EXPECT_TRUE(better_somewhere) << "max-min never improved on min-rank: the test shows nothing";
}

TEST(MaxMinFixtures, RankingNpzHoldsTheRetainedShares) {
    REQUIRE_FIXTURES();
    const std::string t = test::fixture("trained/imatrix/tiny-qwen3moe-trained-A.");
    RankOptions o;
    o.imatrices = {{"c", t + "c.imatrix.gguf"}, {"legal", t + "legal.imatrix.gguf"}};
    o.model = test::fixture("trained/models/tiny-qwen3moe-trained-A-Q8_0.gguf");
    o.keep = 8;
    o.consensus = Consensus::kMaxMin;
    test::TempDir dir;
    ops::RankRequest q{o, dir.file("out"), false};
    const ops::RankResult out = ops::rank(q);
    const auto a = read_npz(out.ranking_path);
    const NpyArray& s = a.at("retained_share");
    EXPECT_EQ(s.shape, (std::vector<int64_t>{2, 4}));
    std::vector<double> v(8);
    std::memcpy(v.data(), s.data.data(), 64);
    EXPECT_EQ(v, out.result.retained_share);
    const auto bytes = test::read_file(out.receipt_path);
    const std::string receipt(bytes.begin(), bytes.end());
    EXPECT_NE(receipt.find("## What each domain keeps"), std::string::npos);
    EXPECT_NE(
        receipt.find(fmt::format("Worst domain: {} keeps", out.input.domains[out.result.worst_domain].name)),
        std::string::npos);
}

}  // namespace
}  // namespace gguf_reap
