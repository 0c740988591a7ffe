// The keeplist schema: what rank writes, splice and audit read. Round trips, the imatrix-only source,
// drop-form specs, and each malformation refused with its message.
#include <gtest/gtest.h>

#include "gguf_reap/error.h"
#include "gguf_reap/keeplist.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

std::string input_error(const std::string& text) {
    try {
        KeepList::parse(text, "k.json");
    } catch (const InputError& e) {
        return e.what();
    }
    return "(no error)";
}

KeepList sample() {
    KeepList k;
    KeepListSource s;
    s.architecture = "deepseek2";
    s.expert_count = 4;
    s.expert_used_count = 2;
    s.tensor_count = 70;
    s.shards = {{"m-00001-of-00002.gguf", 100}, {"m-00002-of-00002.gguf", 50}};
    k.source = s;
    k.n_keep = 3;
    k.method = {{"criterion", "energy"}};
    KeepBlock b;
    b.block = 1;
    b.keep = {0, 2, 3};
    b.prune = {1};
    b.dead = {1};
    b.dead_reasons = {{1, "never routed"}};
    b.protected_experts = {{2, "super-expert"}};
    k.blocks.push_back(b);
    return k;
}

TEST(Keeplist, RoundTripsEveryField) {
    const KeepList k = sample();
    const std::string text = k.to_json().dump(1);
    const KeepList back = KeepList::parse(text, "k.json");
    EXPECT_EQ(back.to_json().dump(1), text);
    ASSERT_TRUE(back.source.has_value());
    EXPECT_EQ(back.source->shards.size(), 2u);
    EXPECT_EQ(back.source->shards[1].second, 50u);
    EXPECT_EQ(back.blocks[0].dead_reasons[0].reason, "never routed");
    EXPECT_EQ(back.blocks[0].protected_experts[0].expert, 2);
    EXPECT_EQ(back.method["criterion"], "energy");
}

TEST(Keeplist, ImatrixOnlySourceKeepsOnlyTheExpertCount) {
    KeepList k = sample();
    k.source->from_imatrix_only = true;
    const auto j = k.to_json();
    EXPECT_EQ(j["source"].dump(), R"({"expert_count":4,"derived_from":"imatrix"})");
    const KeepList back = KeepList::parse(j.dump(), "k.json");
    EXPECT_TRUE(back.source->from_imatrix_only);
    EXPECT_EQ(back.source->architecture, "");
    EXPECT_EQ(back.source->expert_count, 4u);
}

TEST(Keeplist, SaveIsAtomicAndLoads) {
    test::TempDir d;
    sample().save(d.file("k.json"));
    EXPECT_EQ(KeepList::load(d.file("k.json")).to_json(), sample().to_json());
}

TEST(Keeplist, MissingVersion) {
    EXPECT_EQ(input_error(R"({"blocks": []})"), "k.json: version: missing \"version\"");
}

TEST(Keeplist, UnsupportedVersion) {
    EXPECT_EQ(input_error(R"({"version": 2, "blocks": []})"),
              "k.json: version: keeplist version 2 is not supported (this gguf-reap reads version 1)");
}

TEST(Keeplist, NotJson) {
    EXPECT_EQ(input_error("{\"version\": 1,"), "k.json: json at offset 14 (0xe): not valid JSON");
}

TEST(Keeplist, NegativeExpertId) {
    EXPECT_EQ(input_error(R"({"version": 1, "blocks": [{"block": 1, "keep": ["a"]}]})"),
              "k.json: blocks[0].keep[0]: expert id must be an integer, found \"a\"");
}

TEST(Keeplist, SourceWithoutArchitecture) {
    EXPECT_EQ(input_error(R"({"version": 1, "source": {"expert_count": 4}, "blocks": []})"),
              "k.json: source: missing \"architecture\"");
}

TEST(Keeplist, TooDeep) {
    std::string deep(100, '[');
    EXPECT_EQ(input_error(deep), "k.json: json at offset 64 (0x40): nested deeper than 64 levels");
}

TEST(Keeplist, DropFormSpecsResolveAgainstTheModel) {
    REQUIRE_FIXTURES();
    KeepList k = KeepList::load(test::fixture("prune_specs/tiny-deepseek2.drop-live.json"));
    EXPECT_TRUE(k.drop_form);
    ShardSet m = ShardSet::open(test::fixture("models/tiny-deepseek2-Q8_0.gguf"));
    validate_keeplist(k, build_moe_layout(m), "drop-live.json");
    EXPECT_EQ(k.n_keep, 13u);
    EXPECT_EQ(k.blocks[1].prune, (std::vector<int64_t>{1, 2, 6}));
    EXPECT_EQ(k.blocks[1].keep.size(), 13u);
}

TEST(Keeplist, ValidationNamesTheProblem) {
    REQUIRE_FIXTURES();
    ShardSet m = ShardSet::open(test::fixture("models/tiny-deepseek2-Q8_0.gguf"));
    const MoeLayout L = build_moe_layout(m);
    auto usage = [&](const std::string& text) {
        KeepList k = KeepList::parse(text, "k.json");
        try {
            validate_keeplist(k, L, "k.json");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    EXPECT_EQ(usage(R"({"drop": {"1": [0], "2": [0]}})"),
              "k.json: block 3 of the model has experts but is missing from the keeplist");
    EXPECT_EQ(usage(R"({"drop": {"1": [0], "2": [0], "3": [16]}})"),
              "k.json: block 3: dropped id 16 is out of range (the model has experts 0..15)");
    EXPECT_EQ(usage(R"({"drop": {"1": [0], "2": [0], "3": [1, 2]}})"),
              "k.json: block 3 keeps 14 experts but block 1 keeps 15: llama.cpp's expert_count is one number "
              "for every "
              "block");
    EXPECT_EQ(
        usage(R"({"version": 1, "source": {"expert_count": 8, "derived_from": "imatrix"}, "blocks": []})"),
        "k.json: source.expert_count: ranked on a model with 8 experts per block, but the model has 16: a "
        "keeplist applies only to a model with the same architecture, expert layout and tensor names "
        "(another model, or an already pruned one?)");
}

}  // namespace
}  // namespace gguf_reap
