// Other tools' keep plans (gguf_reap/plan_interchange.h): files written by hand from each format's
// definition (hipfire's crates/hipfire-reap/src/plan.rs and scripts/reap/build_keepall_sidecar.py; the
// keep map of 0xSero's published reap_plan.json as hipfire's build_reap_keepmap.py reads it), their
// refusals, export, and the round trip through rank --from-plan / --export on the fixtures.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "gguf_reap/error.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/plan_interchange.h"
#include "gguf_reap/rank.h"
#include "ops/rank/rank_keep.h"
#include "ops/rank/rank_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

std::string input_error(const std::string& text) {
    try {
        parse_external_plan(text, "p.json");
    } catch (const InputError& e) {
        return e.what();
    }
    return "";
}

TEST(PlanInterchange, HipfireAsItsWriterWritesIt) {
    // json.dump of build_keepall_sidecar.py's dict: version, original_experts, num_layers, keep.per_layer.
    const ExternalPlan p = parse_external_plan(
        R"({"version": 1, "original_experts": 8, "num_layers": 2, "keep": {"per_layer": [[0, 2, 3, 5, 6, 7], [7, 0, 1, 2, 4, 5]]}, "model_arch": "qwen35"})",
        "p.json");
    EXPECT_EQ(p.format, PlanFormat::kHipfire);
    EXPECT_EQ(p.original_experts, 8u);
    EXPECT_EQ(p.num_layers, 2u);
    EXPECT_EQ(p.n_keep, 6u);
    EXPECT_EQ(p.keep.at(0), (std::vector<int64_t>{0, 2, 3, 5, 6, 7}));
    EXPECT_EQ(p.keep.at(1), (std::vector<int64_t>{0, 1, 2, 4, 5, 7}));  // slot order sorted
}

TEST(PlanInterchange, KeepMapOfPublishedPlans) {
    const ExternalPlan p = parse_external_plan(
        R"({"base_model_id": "org/Model", "target_label": "REAP-25", "kept_experts_per_layer": 6,
            "original_experts_per_layer": 8, "hash_routed_layers": [],
            "keep_maps": {"keep_by_layer": {"1": [0, 1, 2, 3, 4, 5], "3": [2, 3, 4, 5, 6, 7]}}})",
        "p.json");
    EXPECT_EQ(p.format, PlanFormat::kKeepmap);
    EXPECT_EQ(p.keep.size(), 2u);
    EXPECT_EQ(p.keep.at(3), (std::vector<int64_t>{2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(p.n_keep, 6u);
}

TEST(PlanInterchange, BadPlansAreNamed) {
    EXPECT_EQ(input_error(R"({"keep": {"per_layer": [[0, 1], [1, 1]]}})"),
              "p.json: keep.per_layer[1][1]: expert 1 is listed twice");
    EXPECT_EQ(input_error(R"({"original_experts": 4, "keep": {"per_layer": [[0, 4]]}})"),
              "p.json: keep.per_layer[0][1]: expert 4 is not below original_experts = 4");
    EXPECT_EQ(input_error(R"({"num_layers": 3, "keep": {"per_layer": [[0], [1]]}})"),
              "p.json: keep.per_layer: has 2 rows but num_layers is 3");
    EXPECT_EQ(input_error(R"({"keep": {"per_layer": [[0, 1], [1]]}})"),
              "p.json: layer 1: keeps 1 experts but layer 0 keeps 2: every layer must keep the same number");
    EXPECT_EQ(input_error(R"({"keep_maps": {"keep_by_layer": {"x": [0]}}})"),
              "p.json: keep_maps.keep_by_layer.\"x\": is not a layer number");
    EXPECT_EQ(input_error(R"({"experts": [0]})"),
              "p.json: json: is neither a hipfire plan (\"keep\": {\"per_layer\": ...}) nor a keep map "
              "(\"keep_maps\": {\"keep_by_layer\": ...})");
    EXPECT_EQ(input_error("{\"keep\": "), "p.json: json at offset 9 (0x9): not valid JSON");
    EXPECT_EQ(input_error(R"({"keep_maps": {"keep_by_layer": {"3": []}}})"),
              "p.json: layer 3: keeps no experts");
}

KeepList two_blocks() {
    KeepList kl;
    kl.n_keep = 2;
    kl.blocks = {{0, {1, 3}, {0, 2}, {}, {}, {}}, {1, {0, 2}, {1, 3}, {}, {}, {}}};
    return kl;
}

TEST(PlanInterchange, ExportBothFormats) {
    const KeepList kl = two_blocks();
    const auto h = nlohmann::json::parse(export_plan(PlanFormat::kHipfire, kl, 2, 4, "m"));
    EXPECT_EQ(
        h,
        nlohmann::json::parse(
            R"({"version": 1, "original_experts": 4, "num_layers": 2, "keep": {"per_layer": [[1, 3], [0, 2]]}})"));
    const auto k = nlohmann::json::parse(export_plan(PlanFormat::kKeepmap, kl, 2, 4, "m"));
    EXPECT_EQ(k, nlohmann::json::parse(
                     R"({"base_model_id": "m", "original_experts_per_layer": 4, "kept_experts_per_layer": 2,
                         "keep_maps": {"keep_by_layer": {"0": [1, 3], "1": [0, 2]}}})"));
    // Both parse back to the keeplist's rows.
    for (PlanFormat f : {PlanFormat::kHipfire, PlanFormat::kKeepmap}) {
        const ExternalPlan p = parse_external_plan(export_plan(f, kl, 2, 4, "m"), "x");
        EXPECT_EQ(p.keep.at(0), kl.blocks[0].keep);
        EXPECT_EQ(p.keep.at(1), kl.blocks[1].keep);
    }
    // hipfire has no way to say "dense layer": a model with 3 layers, 2 of them MoE, is refused.
    try {
        export_plan(PlanFormat::kHipfire, kl, 3, 4, "m");
        FAIL() << "no error";
    } catch (const UsageError& e) {
        EXPECT_EQ(test::shown(e),
                  "--export hipfire: the model has 3 layers but 2 MoE layers; hipfire's reap_plan.json needs "
                  "a row of kept experts for every layer and says nothing of dense ones: use --export "
                  "keepmap");
    }
}

// rank --export F, then rank --from-plan of that file: the same keeplist, and a receipt that says where
// the experts came from.
TEST(PlanInterchangeFixtures, RoundTripThroughRank) {
    REQUIRE_FIXTURES();
    struct Case {
        std::string model;
        std::vector<DomainSpec> domains;
        PlanFormat format;
    };
    const std::string t = test::fixture("trained/imatrix/tiny-qwen3moe-trained-A.");
    const std::string f = test::fixture("imatrix/tiny-deepseek2.");
    const std::vector<Case> cases{{test::fixture("trained/models/tiny-qwen3moe-trained-A-Q8_0.gguf"),
                                   {{"c", t + "c.imatrix.gguf"}, {"legal", t + "legal.imatrix.gguf"}},
                                   PlanFormat::kHipfire},
                                  {test::fixture("models/tiny-deepseek2-Q8_0.gguf"),
                                   {{"chat", f + "chat.imatrix.gguf"}, {"code", f + "code.imatrix.gguf"}},
                                   PlanFormat::kKeepmap}};
    for (const Case& c : cases) {
        SCOPED_TRACE(plan_format_name(c.format));
        test::TempDir dir;
        RankOptions o;
        o.imatrices = c.domains;
        o.model = c.model;
        o.ratio = 0.25;
        o.export_format = c.format;
        const ops::RankResult a = ops::rank({o, dir.file("a"), false});
        ASSERT_EQ(a.exported_path, dir.file("a") + "/reap_plan.json");
        ASSERT_TRUE(std::filesystem::exists(a.exported_path));
        RankOptions i = o;
        i.ratio.reset();
        i.export_format.reset();
        i.from_plan = a.exported_path;
        i.consensus = Consensus::kMeanRank;  // another consensus: the plan, not the ranking, decides
        const ops::RankResult b = ops::rank({i, dir.file("b"), false});
        ASSERT_EQ(a.result.keeplist.blocks.size(), b.result.keeplist.blocks.size());
        for (size_t k = 0; k < a.result.keeplist.blocks.size(); ++k)
            EXPECT_EQ(a.result.keeplist.blocks[k].keep, b.result.keeplist.blocks[k].keep);
        EXPECT_EQ(rank_method_json(b.input, b.result)["from_plan"]["format"], plan_format_name(c.format));
        const auto bytes = test::read_file(b.receipt_path);
        const std::string receipt(bytes.begin(), bytes.end());
        EXPECT_NE(receipt.find("**The kept experts come from another tool's plan**: `" +
                               std::filesystem::path(a.exported_path).filename().string() + "`"),
                  std::string::npos);
        // --from-plan with a keep rule is refused.
        i.keep = 12;
        try {
            rank_experts(read_rank_input(resolve_rank_sources(i)), resolve_rank_method(i));
            FAIL() << "no error";
        } catch (const UsageError& e) {
            EXPECT_EQ(
                test::shown(e),
                "--from-plan decides which experts are kept: give no --keep, --prune, --ratio or --fit");
        }
    }
}

// External scores (the REAP criterion's way in) take a plan too.
TEST(PlanInterchangeFixtures, FromPlanWithExternalScores) {
    REQUIRE_FIXTURES();
    test::TempDir dir;
    const std::string s = test::fixture("trained/scores/tiny-qwen3moe-trained-A.reap.");
    RankOptions o;
    o.criterion = Criterion::kExternal;
    o.score_files = {{"c", s + "c.json"}, {"legal", s + "legal.json"}};
    o.model = test::fixture("trained/models/tiny-qwen3moe-trained-A-Q8_0.gguf");
    o.keep = 10;
    o.export_format = PlanFormat::kHipfire;
    const ops::RankResult a = ops::rank({o, dir.file("a"), false});
    RankOptions i = o;
    i.keep.reset();
    i.export_format.reset();
    i.from_plan = a.exported_path;
    i.consensus = Consensus::kSum;
    const RankInput in = read_rank_input(resolve_rank_sources(i));
    ASSERT_TRUE(in.imported.has_value());
    const RankDecision r = rank_experts(in, resolve_rank_method(i));
    for (size_t k = 0; k < r.keeplist.blocks.size(); ++k)
        EXPECT_EQ(r.keeplist.blocks[k].keep, a.result.keeplist.blocks[k].keep);
}

TEST(PlanInterchangeFixtures, APlanKeepingDeadExpertsIsWarnedAbout) {
    REQUIRE_FIXTURES();
    test::TempDir dir;
    // tiny-deepseek2: experts 3, 7, 12 of blk.1 are dead; this plan keeps 0..11 in every MoE layer.
    nlohmann::json by_layer;
    for (int b : {1, 2, 3}) by_layer[std::to_string(b)] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    const std::string text = nlohmann::json{{"keep_maps", {{"keep_by_layer", by_layer}}}}.dump();
    test::write_file(dir.file("p.json"), std::vector<uint8_t>(text.begin(), text.end()));
    RankOptions o;
    o.imatrices = {{"chat", test::fixture("imatrix/tiny-deepseek2.chat.imatrix.gguf")}};
    o.model = test::fixture("models/tiny-deepseek2-Q8_0.gguf");
    o.from_plan = dir.file("p.json");
    const RankInput in = read_rank_input(resolve_rank_sources(o));
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    EXPECT_NE(
        std::find(r.warnings.begin(), r.warnings.end(), "the plan keeps blk.1 expert 3, which is dead here"),
        r.warnings.end());
    EXPECT_EQ(r.keeplist.blocks[0].keep, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
    // A plan for another model: a layer that is not an MoE block here.
    by_layer["0"] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    const std::string other = nlohmann::json{{"keep_maps", {{"keep_by_layer", by_layer}}}}.dump();
    test::write_file(dir.file("q.json"), std::vector<uint8_t>(other.begin(), other.end()));
    o.from_plan = dir.file("q.json");
    try {
        read_rank_input(resolve_rank_sources(o));
        FAIL() << "no error";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()), dir.file("q.json") +
                                             ": the plan keeps experts of layer 0, which is not an MoE block "
                                             "here: a plan for another model?");
    }
}

}  // namespace
}  // namespace gguf_reap
