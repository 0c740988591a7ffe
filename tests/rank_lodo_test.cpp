// The leave-one-domain-out estimate (ops/rank/rank_lodo.h): each domain's share of its own routed energy
// kept by the real selection (seen) and by the same selection made without it (unseen). By hand on a
// small case, against real rank runs without the domain for every consensus, with external scores,
// with one domain, in ranking.npz (read by numpy), and on the trained fixture.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "ops/rank/rank_keep.h"
#include "ops/rank/rank_lodo.h"
#include "ops/rank/rank_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

// A GGUF-imatrix domain: per block, each expert's energy; 100 routed tokens where it is above 0 (dead
// where it is 0), and a hottest channel a tenth of the mean (no channel outlier).
DomainData dom(const std::string& name, const std::vector<std::vector<double>>& energy) {
    DomainData d;
    d.name = name;
    d.path = name + ".imatrix.gguf";
    d.format = "gguf";
    for (const auto& row : energy) {
        BlockStats s;
        s.present = true;
        for (double x : row) {
            const double c = x > 0 ? 100 : 0;
            s.count.push_back(c);
            s.energy.push_back(x);
            s.mean.push_back(c > 0 ? x / c : 0);
            s.peak.push_back(c > 0 ? x / c / 10 : 0);
            s.dead.push_back(c == 0);
        }
        d.blocks.push_back(s);
    }
    return d;
}

RankInput input(int64_t E, std::vector<int> blocks, std::vector<DomainData> domains, uint64_t groups = 0) {
    RankInput in;
    in.expert_count = E;
    in.blocks = std::move(blocks);
    in.expert_group_count = groups;
    in.domains = std::move(domains);
    return in;
}

RankOptions keep(int64_t n, Consensus c = Consensus::kMinRank) {
    RankOptions o;
    o.keep = n;
    o.consensus = c;
    o.threads = 2;
    return o;
}

RankInput without(const RankInput& in, size_t d) {
    RankInput out = in;
    out.domains.erase(out.domains.begin() + static_cast<std::ptrdiff_t>(d));
    return out;
}

// Domain d's share of its mass (energy; external: max(0, score)) kept by `keep` ([block][expert]).
double share(const RankInput& in, size_t d, const std::vector<uint8_t>& keep) {
    const size_t NE = static_cast<size_t>(in.expert_count);
    double kept = 0, total = 0;
    for (size_t b = 0; b < in.blocks.size(); ++b) {
        const BlockStats& s = in.domains[d].blocks[b];
        for (size_t e = 0; e < NE; ++e) {
            const double m = in.domains[d].format == "json" ? std::max(0.0, s.external[e]) : s.energy[e];
            total += m;
            if (keep[b * NE + e]) kept += m;
        }
    }
    return kept / total;
}

// Every domain's line against a real rank run of the input without it.
void expect_matches_runs_without(const RankInput& in, const RankOptions& o) {
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    ASSERT_EQ(r.blind_spot.size(), in.domains.size());
    for (size_t d = 0; d < in.domains.size(); ++d) {
        SCOPED_TRACE("without " + in.domains[d].name);
        const RankDecision w = rank_experts(without(in, d), resolve_rank_method(o));
        EXPECT_DOUBLE_EQ(r.blind_spot[d].seen, share(in, d, r.keep));
        EXPECT_DOUBLE_EQ(r.blind_spot[d].unseen, share(in, d, w.keep));
        int64_t differ = 0;
        for (size_t i = 0; i < r.keep.size(); ++i) differ += r.keep[i] != w.keep[i];
        EXPECT_EQ(r.blind_spot[d].disagree, differ);
        EXPECT_EQ(r.blind_spot[d].unknown, "");
    }
}

// Three domains, one block of six experts, each domain's energies summing to 100, keep 3 (min-rank):
//   chat [40 30 10 10  5  5]  ranks 1 2 3 4 5 6
//   code [ 5 10 40 30 10  5]  ranks 5 3 1 2 4 6
//   wiki [10  5  5 10 40 30]  ranks 3 5 6 4 1 2
// All three: best ranks 1 2 1 2 1 2; the three 1s, {0, 2, 4}, keep 55 % of every domain.
// Without chat: best ranks 3 3 1 2 1 2 → {4 ([1 4]), 2 ([1 6]), 3 ([2 4])}: chat keeps 10+10+5 = 25 %.
// Without code: 1 2 3 4 1 2 → {0 ([1 3]), 4 ([1 5]), 1 ([2 5])}: code keeps 5+10+10 = 25 %.
// Without wiki: 1 2 1 2 4 6 → {2 ([1 3]), 0 ([1 5]), 1 ([2 3])}: wiki keeps 10+5+5 = 20 %.
RankInput three_domains() {
    return input(6, {0},
                 {dom("chat", {{40, 30, 10, 10, 5, 5}}), dom("code", {{5, 10, 40, 30, 10, 5}}),
                  dom("wiki", {{10, 5, 5, 10, 40, 30}})});
}

TEST(RankLodo, SharesByHandOnThreeDomains) {
    const RankInput in = three_domains();
    const RankDecision r = rank_experts(in, resolve_rank_method(keep(3)));
    EXPECT_EQ(r.keeplist.blocks[0].keep, (std::vector<int64_t>{0, 2, 4}));
    ASSERT_EQ(r.blind_spot.size(), 3u);
    const double seen[] = {0.55, 0.55, 0.55}, unseen[] = {0.25, 0.25, 0.20};
    for (size_t d = 0; d < 3; ++d) {
        EXPECT_NEAR(r.blind_spot[d].seen, seen[d], 1e-15) << d;
        EXPECT_NEAR(r.blind_spot[d].unseen, unseen[d], 1e-15) << d;
        EXPECT_EQ(r.blind_spot[d].disagree, 2) << d;  // one expert swapped: kept by one, pruned by the other
    }
    ASSERT_EQ(worst_blind_spot(r), std::optional<size_t>(2));
    const std::string receipt = render_receipt(in, r);
    EXPECT_NE(receipt.find("| wiki | 55.00 % | 20.00 % | 35.00 | 2 |"), std::string::npos) << receipt;
    EXPECT_NE(receipt.find("| chat | 55.00 % | 25.00 % | 30.00 | 2 |"), std::string::npos);
    EXPECT_NE(
        receipt.find("**Estimate:** a kind of text the calibration did not cover loses up to 35.0 points "
                     "of its expert energy (worst: wiki)."),
        std::string::npos);
    EXPECT_EQ(blind_spot_summary(in, r),
              "blind spot (estimate, leaving each domain out): a kind of text the calibration did not cover "
              "loses up to 35.0 points of its expert energy (worst: wiki)");
    const auto& j = r.keeplist.method.at("blind_spot");
    EXPECT_EQ(j.at("worst").at("domain"), "wiki");
    EXPECT_NEAR(j.at("worst").at("drop").get<double>(), 0.35, 1e-15);
    EXPECT_EQ(j.at("domains").at(1).at("disagree"), 2);
    EXPECT_EQ(rank_summary_json(in, r).at("blind_spot"), j);
    expect_matches_runs_without(in, keep(3));
}

// Four domains and three blocks of twelve experts with skewed energies, an expert only one domain
// routes (dead without it) and a super-expert only one domain sees (not protected without it).
RankInput skewed(uint64_t groups = 0) {
    std::vector<DomainData> ds;
    uint64_t x = 7;
    for (const char* name : {"chat", "code", "prose", "wiki"}) {
        std::vector<std::vector<double>> en(3, std::vector<double>(12));
        for (auto& row : en)
            for (double& v : row) {
                x = x * 6364136223846793005u + 1442695040888963407u;
                v = std::pow(2.0, static_cast<double>((x >> 33) % 9)) + static_cast<double>((x >> 20) % 7);
            }
        ds.push_back(dom(name, en));
    }
    for (size_t d = 1; d < 4; ++d)
        ds[d].blocks[1].dead[5] = 1, ds[d].blocks[1].count[5] = 0,
        ds[d].blocks[1].energy[5] = 0;  // only chat routes blk.1 expert 5
    ds[2].blocks[2].energy[7] = 5000;   // a super-expert in prose only
    return input(12, {0, 1, 2}, std::move(ds), groups);
}

TEST(RankLodo, EveryConsensusMatchesARunWithoutTheDomain) {
    const RankInput in = skewed();
    for (Consensus c : {Consensus::kMinRank, Consensus::kMeanRank, Consensus::kSum, Consensus::kPooled,
                        Consensus::kMaxMin}) {
        SCOPED_TRACE(consensus_name(c));
        expect_matches_runs_without(in, keep(6, c));
        const RankDecision r = rank_experts(in, resolve_rank_method(keep(6, c)));
        // Without chat, blk.1 expert 5 is dead; without prose, blk.2 expert 7 is no super-expert.
        EXPECT_TRUE(r.protect[r.idx(2, 7)]);
        EXPECT_FALSE(rank_experts(without(in, 2), resolve_rank_method(keep(6, c))).protect[r.idx(2, 7)]);
        EXPECT_TRUE(rank_experts(without(in, 0), resolve_rank_method(keep(6, c))).dead[r.idx(1, 5)]);
        EXPECT_GT(r.blind_spot[2].disagree, 0);
    }
    expect_matches_runs_without(skewed(2), keep(6));  // two expert groups of six
    expect_matches_runs_without(skewed(2), keep(6, Consensus::kMaxMin));
    RankOptions p = keep(4);
    p.protect = {{0, 3}, {2, 11}};
    expect_matches_runs_without(in, p);
}

TEST(RankLodo, ARunRankWouldRefuseIsUnknownAndSaysWhy) {
    // Only chat routes experts 2 and 3: without it, two of four are dead and keep 3 is refused.
    const RankInput in = input(4, {0}, {dom("chat", {{10, 10, 10, 10}}), dom("code", {{10, 20, 0, 0}})});
    const RankDecision r = rank_experts(in, resolve_rank_method(keep(3)));
    EXPECT_THROW(rank_experts(without(in, 0), resolve_rank_method(keep(3))), UsageError);
    EXPECT_TRUE(std::isnan(r.blind_spot[0].unseen));
    EXPECT_EQ(r.blind_spot[0].unknown,
              "rank without chat refuses: blk.0 would have 2 dead experts, more than --keep 3 prunes");
    EXPECT_EQ(worst_blind_spot(r), std::optional<size_t>(1));
    // code keeps all its energy either way (experts 0 and 1 are all it routes): no drop anywhere.
    EXPECT_EQ(blind_spot_summary(in, r),
              "blind spot (estimate, leaving each domain out): a kind of text the calibration did not cover "
              "loses none of its expert energy in this estimate: no calibration domain kept less when it was "
              "left out");
    EXPECT_NE(render_receipt(in, r).find("| chat | 75.00 % | unknown: rank without chat refuses"),
              std::string::npos);
}

TEST(RankLodo, ExternalScoresUseTheirOwnMass) {
    std::vector<DomainData> ds;
    const std::vector<std::vector<double>> scores = {
        {0.9, 0.1, 0.5, -0.2, 0.3, 0.0}, {0.1, 0.8, 0.2, 0.6, -1.0, 0.4}, {0.3, 0.2, 0.9, 0.1, 0.7, 0.05}};
    for (size_t d = 0; d < 3; ++d) {
        DomainData x;
        x.name = std::string(1, static_cast<char>('a' + d));
        x.path = x.name + ".json";
        x.format = "json";
        BlockStats s;
        s.present = true;
        s.external = scores[d];
        s.count.assign(6, 100);
        s.dead.assign(6, 0);
        x.blocks.push_back(s);
        ds.push_back(x);
    }
    const RankInput in = input(6, {0}, std::move(ds));
    RankOptions o = keep(3);
    o.criterion = Criterion::kExternal;
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    // min-rank: a ranks 0 2 4 …, b 1 3 5 …, c 2 4 0 …: best ranks 1 1 1 2 2 3 → keep {0, 1, 2}.
    EXPECT_EQ(r.keeplist.blocks[0].keep, (std::vector<int64_t>{0, 1, 2}));
    // b's mass: max(0, score) = 0.1+0.8+0.2+0.6+0+0.4 = 2.1, of which {0, 1, 2} keep 1.1.
    EXPECT_NEAR(r.blind_spot[1].seen, 1.1 / 2.1, 1e-12);
    expect_matches_runs_without(in, o);
    EXPECT_EQ(r.keeplist.method.at("blind_spot").at("measure"), "score mass");
    EXPECT_NE(blind_spot_summary(in, r).find("points of its score mass"), std::string::npos);
}

TEST(RankLodo, OneDomainHasNothingToLeaveOut) {
    const RankInput in = input(6, {0}, {dom("chat", {{40, 30, 10, 10, 5, 5}})});
    const RankDecision r = rank_experts(in, resolve_rank_method(keep(3)));
    ASSERT_EQ(r.blind_spot.size(), 1u);
    EXPECT_NEAR(r.blind_spot[0].seen, 0.80, 1e-15);
    EXPECT_NEAR(r.blind_spot[0].seen, 1 - r.pruned_energy_share[0], 1e-15);
    EXPECT_TRUE(std::isnan(r.blind_spot[0].unseen));
    EXPECT_NE(render_receipt(in, r).find("One calibration domain (chat): there is nothing to leave out"),
              std::string::npos);
    EXPECT_EQ(blind_spot_summary(in, r), "blind spot: one domain, nothing to leave out (not estimated)");
    const auto& j = r.keeplist.method.at("blind_spot");
    EXPECT_TRUE(j.at("estimate").is_null());
    EXPECT_EQ(j.at("why"), "one calibration domain: there is nothing to leave out");
}

TEST(RankLodo, RankingNpzHoldsLodoShareForNumpy) {
    if (test::run_command("/usr/bin/python3 -c 'import numpy'").exit_code != 0)
        GTEST_SKIP() << "python3-numpy is not installed; skipping the numpy read-back";
    const RankInput in = three_domains();
    const RankDecision r = rank_experts(in, resolve_rank_method(keep(3)));
    test::TempDir dir;
    write_rank_outputs(in, r, dir.file("out"), false, 1);
    const auto got = test::run_command(fmt::format(
        "/usr/bin/python3 -c \"import numpy as np; z = np.load('{}'); a = z['lodo_share']; "
        "print(a.dtype, a.shape, list(z['domains'])); print(' '.join('%.6f' % v for v in a.ravel()))\"",
        dir.file("out/ranking.npz")));
    ASSERT_EQ(got.exit_code, 0) << got.err;
    EXPECT_EQ(got.out,
              "float64 (3, 2) ['chat', 'code', 'wiki']\n"
              "0.550000 0.250000 0.550000 0.250000 0.550000 0.200000\n");
}

// The "done when": on the trained fixture (model A, five domains, keep 10), the receipt's
// shares match, within 0.1 point, real rank runs without each domain, each domain's share computed
// from its own imatrix.
TEST(RankLodo, TrainedFixtureMatchesRunsWithoutEachDomain) {
    REQUIRE_FIXTURES();
    const std::string t = test::fixture("trained/imatrix/tiny-qwen3moe-trained-A.");
    const std::string model = test::fixture("trained/models/tiny-qwen3moe-trained-A-Q8_0.gguf");
    const std::vector<std::string> names = {"python", "c", "markdown", "legal", "changelog"};
    const auto options = [&](const std::vector<std::string>& ds) {
        RankOptions o;
        for (const auto& d : ds) o.imatrices.push_back({d, t + d + ".imatrix.gguf"});
        o.model = model;
        o.keep = 10;
        o.hash_inputs = false;
        return o;
    };
    test::TempDir dir;
    const ops::RankResult all = ops::rank({options(names), dir.file("all"), false});
    const auto bytes = test::read_file(all.receipt_path);
    const std::string receipt(bytes.begin(), bytes.end());
    for (size_t d = 0; d < names.size(); ++d) {
        SCOPED_TRACE("without " + names[d]);
        std::smatch m;
        const std::regex row("\\| " + names[d] +
                             " \\| ([0-9.]+) % \\| ([0-9.]+) % \\| ([0-9.]+) \\| ([0-9]+) \\|");
        ASSERT_TRUE(std::regex_search(receipt, m, row)) << receipt;
        std::vector<std::string> rest;
        for (size_t e = 0; e < names.size(); ++e)
            if (e != d) rest.push_back(names[e]);
        const RankOptions o = options(rest);
        const RankDecision w = rank_experts(read_rank_input(resolve_rank_sources(o)), resolve_rank_method(o));
        const RankInput own =
            read_rank_input(resolve_rank_sources(options({names[d]})));  // the domain's own imatrix
        EXPECT_NEAR(std::stod(m[1]), 100 * share(own, 0, all.result.keep), 0.1);
        EXPECT_NEAR(std::stod(m[2]), 100 * share(own, 0, w.keep), 0.1);
        EXPECT_GT(std::stod(m[3]), 0);
    }
    // The measurement: changelog keeps 71.4 % seen and 59.4 % unseen, the largest drop.
    EXPECT_NE(receipt.find("(worst: changelog)"), std::string::npos);
}

}  // namespace
}  // namespace gguf_reap
