// rank's resolve step (ops/rank/rank_plan.h) alone: a request in, a plan or a refusal out, and no file
// read. Every path below names a file that does not exist, so a resolve that opened one would fail
// with "does not exist" instead of the answer checked.
#include <gtest/gtest.h>

#include <string>

#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "ops/rank/rank_keep.h"
#include "ops/rank/rank_plan.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

constexpr const char* kNowhere = "/nonexistent/gguf-reap-rank-plan-test";

std::string at(const char* file) {
    return std::string(kNowhere) + "/" + file;
}

// Two imatrix domains and a rule: a request resolve accepts.
RankOptions request() {
    RankOptions o;
    o.imatrices = {{"chat", at("chat.imatrix.gguf")}, {"code", at("code.imatrix.gguf")}};
    o.keep = 6;
    return o;
}

std::string refusal(const RankOptions& o) {
    return test::error_of<UsageError>([&] { resolve_rank(o); });
}

TEST(RankPlan, ResolvesAnImatrixRequestWithoutReadingAFile) {
    RankOptions o = request();
    o.model = at("model.gguf");
    o.calibration = at("calibrate.json");
    o.neuron_plan = at("plan.npz");
    o.criterion = Criterion::kWeightedEnergy;
    o.consensus = Consensus::kMaxMin;
    o.keep.reset();
    o.prune = 3;
    o.protect = {{1, 2}};
    o.super_share = 0.4;
    o.super_channel_ratio = 50;
    o.hash_inputs = false;
    o.strict = true;
    o.threads = 3;
    o.export_format = PlanFormat::kHipfire;
    const RankPlan p = resolve_rank(o);

    const RankSources& s = p.sources;
    EXPECT_EQ(s.model, at("model.gguf"));
    EXPECT_FALSE(s.budget_model);
    EXPECT_FALSE(s.scores.has_value());
    ASSERT_TRUE(s.imatrices.has_value());
    ASSERT_EQ(s.imatrices->files.size(), 2u);
    EXPECT_EQ(s.imatrices->files[1].name, "code");
    EXPECT_EQ(s.imatrices->files[1].path, at("code.imatrix.gguf"));
    EXPECT_EQ(s.imatrices->neuron_plan, at("plan.npz"));
    EXPECT_EQ(s.imatrices->calibration, at("calibrate.json"));
    EXPECT_EQ(s.imatrices->criterion, Criterion::kWeightedEnergy);
    EXPECT_EQ(s.imatrices->consensus, Consensus::kMaxMin);
    EXPECT_TRUE(s.imatrices->column_norms);  // weighted-energy reads the model's down projections
    EXPECT_TRUE(s.imatrices->strict);
    EXPECT_EQ(s.from_plan, "");
    EXPECT_FALSE(s.hash);
    EXPECT_EQ(s.threads, 3);

    const RankMethod& m = p.method;
    EXPECT_EQ(m.criterion, Criterion::kWeightedEnergy);
    EXPECT_EQ(m.consensus, Consensus::kMaxMin);
    EXPECT_EQ(m.rule, RankRule::Kind::kPrune);
    EXPECT_EQ(m.count, 3);
    EXPECT_FALSE(m.fit.has_value());
    ASSERT_EQ(m.protect.size(), 1u);
    EXPECT_EQ(m.protect[0].block, 1);
    EXPECT_EQ(m.protect[0].expert, 2);
    EXPECT_EQ(m.super_share, 0.4);
    EXPECT_EQ(m.super_channel_ratio, 50);
    EXPECT_EQ(m.threads, 3);
    EXPECT_EQ(p.export_format, PlanFormat::kHipfire);
}

TEST(RankPlan, EnergyNeedsNoColumnNormsAndNoModel) {
    const RankPlan p = resolve_rank(request());
    ASSERT_TRUE(p.sources.imatrices.has_value());
    EXPECT_FALSE(p.sources.imatrices->column_norms);
    EXPECT_EQ(p.sources.model, "");
    EXPECT_TRUE(p.sources.hash);
    EXPECT_EQ(p.method.rule, RankRule::Kind::kKeep);
    EXPECT_EQ(p.method.count, 6);
}

TEST(RankPlan, ResolvesScoreFilesAndTheirReading) {
    RankOptions o;
    o.criterion = Criterion::kExternal;
    o.score_files = {parse_domain_spec(at("chat.json"))};
    o.score_field = "ean_mean";
    o.score_aggregate = "mean";
    o.ratio = 0.25;
    const RankPlan p = resolve_rank(o);
    EXPECT_FALSE(p.sources.imatrices.has_value());
    ASSERT_TRUE(p.sources.scores.has_value());
    ASSERT_EQ(p.sources.scores->files.size(), 1u);
    EXPECT_EQ(p.sources.scores->files[0].name, "chat");
    EXPECT_EQ(p.sources.scores->field, "ean_mean");
    EXPECT_FALSE(p.sources.scores->sum_means);
    EXPECT_EQ(p.method.rule, RankRule::Kind::kRatio);
    EXPECT_EQ(p.method.ratio, 0.25);
    o.score_aggregate = "sum";
    EXPECT_TRUE(resolve_rank(o).sources.scores->sum_means);
}

TEST(RankPlan, FitAndFromPlanNameWhatTheReadStepOpens) {
    RankOptions o = request();
    o.keep.reset();
    o.model = at("model.gguf");
    o.fit = parse_budget("size=1GB");
    RankPlan p = resolve_rank(o);
    EXPECT_TRUE(p.sources.budget_model);
    EXPECT_EQ(p.method.rule, RankRule::Kind::kFit);
    ASSERT_TRUE(p.method.fit.has_value());
    EXPECT_EQ(p.method.fit->bytes, 1000000000u);

    o.fit.reset();
    o.from_plan = at("reap_plan.json");
    p = resolve_rank(o);
    EXPECT_EQ(p.sources.from_plan, at("reap_plan.json"));
    EXPECT_FALSE(p.sources.budget_model);
    EXPECT_EQ(p.method.rule, RankRule::Kind::kPlan);
}

// Each refusal that needs no file, worded as the CLI shows it.
TEST(RankPlan, RefusesWhatNoInputCouldMakeRight) {
    RankOptions o = request();
    o.criterion = Criterion::kExternal;
    EXPECT_EQ(refusal(o),
              "--criterion external needs score files: --scores NAME=FILE (JSON, see docs/rank.md)");
    o.score_files = {{"chat", at("chat.json")}};
    EXPECT_EQ(refusal(o),
              "--criterion external ranks by --scores files; --imatrix cannot be combined with it");
    o.imatrices.clear();
    o.neuron_plan = at("plan.npz");
    EXPECT_EQ(refusal(o),
              "--neuron-plan restricts imatrix energies; it does not apply to --criterion external");
    o.neuron_plan.clear();
    o.consensus = Consensus::kPooled;
    EXPECT_EQ(
        refusal(o),
        "--consensus pooled needs raw counts and sums; external scores are already per-block results: use "
        "min-rank, mean-rank or sum");
    o.consensus = Consensus::kMinRank;
    o.score_aggregate = "median";
    EXPECT_EQ(refusal(o), "--score-aggregate is 'sum' or 'mean', not 'median'");

    o = request();
    o.score_files = {{"chat", at("chat.json")}};
    EXPECT_EQ(refusal(o), "--scores files are only read with --criterion external");
    o = request();
    o.imatrices.clear();
    EXPECT_EQ(refusal(o), "give at least one --imatrix NAME=FILE");
    o = request();
    o.criterion = Criterion::kWeightedEnergy;
    EXPECT_EQ(refusal(o),
              "--criterion weighted-energy needs --model: it weights each channel by the squared norm of the "
              "matching ffn_down_exps column");
    o = request();
    o.imatrices[1].name = "chat";
    EXPECT_EQ(refusal(o), "domain 'chat' is given twice: name each input with NAME=FILE");

    o = request();
    o.keep.reset();
    o.fit = parse_budget("size=1GB");
    EXPECT_EQ(refusal(o), "--fit size=1GB needs --model: the sizes come from the model's tensors");
    o = request();
    o.keep.reset();
    EXPECT_EQ(refusal(o), "give exactly one of --keep N, --prune N, --ratio R or --fit BUDGET");
    o.keep = 4;
    o.prune = 4;
    EXPECT_EQ(refusal(o), "give exactly one of --keep N, --prune N, --ratio R or --fit BUDGET");
    o = request();
    o.from_plan = at("reap_plan.json");
    EXPECT_EQ(refusal(o),
              "--from-plan decides which experts are kept: give no --keep, --prune, --ratio or --fit");
    o = request();
    o.keep.reset();
    o.ratio = 1.5;
    EXPECT_EQ(refusal(o), "--ratio 1.5 must be a fraction of experts to prune, 0 < R < 1");
    o = request();
    o.export_format = PlanFormat::kHipfire;
    EXPECT_EQ(refusal(o), "--export hipfire needs --model: hipfire's plan has a row for every layer of it");
    o.export_format = PlanFormat::kKeepmap;
    EXPECT_EQ(refusal(o), "(no error)");
}

// When two things are wrong, the sources are judged before the method, and the method before the export.
TEST(RankPlan, RefusesInTheOrderOfThePlan) {
    RankOptions o = request();
    o.imatrices.clear();
    o.keep.reset();
    o.export_format = PlanFormat::kHipfire;
    EXPECT_EQ(refusal(o), "give at least one --imatrix NAME=FILE");
    o = request();
    o.keep.reset();
    o.export_format = PlanFormat::kHipfire;
    EXPECT_EQ(refusal(o), "give exactly one of --keep N, --prune N, --ratio R or --fit BUDGET");
}

// The two halves alone: what ops::imatrix_sanity and ops::dead_expert_counts read needs no rule, and
// a decision made on inputs built by hand needs no input files.
TEST(RankPlan, SourcesNeedNoRuleAndTheMethodNoFiles) {
    RankOptions o = request();
    o.keep.reset();
    EXPECT_EQ(resolve_rank_sources(o).imatrices->files.size(), 2u);
    RankOptions m;
    m.keep = 2;
    EXPECT_EQ(resolve_rank_method(m).count, 2);
}

}  // namespace
}  // namespace gguf_reap
