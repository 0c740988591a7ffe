// Width rules: which expert FFN widths K a model can be cut to (reference §5), on hand-made models for
// every rule and refusal, and on the real llama.cpp fixture.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "format/ggml_types.h"
#include "gguf_builder.h"
#include "gguf_reap/error.h"
#include "gguf_reap/width.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "model/width_rules.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::TensorSpec;

constexpr int64_t kE = 4;

std::vector<Kv> kvs(const std::string& arch, int64_t n_ff, std::optional<uint32_t> shared_count = 1,
                    bool width_key = true) {
    std::vector<Kv> v{Kv::make_string("general.architecture", arch), Kv::make_u32(arch + ".block_count", 3),
                      Kv::make_u32(arch + ".expert_count", kE), Kv::make_u32(arch + ".expert_used_count", 2)};
    if (shared_count) v.push_back(Kv::make_u32(arch + ".expert_shared_count", *shared_count));
    if (width_key)
        v.push_back(Kv::make_u32(arch + ".expert_feed_forward_length", static_cast<uint32_t>(n_ff)));
    return v;
}

// Two MoE blocks (1, 2) of `type` experts with width n_ff; shared experts `w` wide when w > 0.
std::vector<TensorSpec> tensors(int64_t n_ff, int32_t type, int64_t w) {
    std::vector<TensorSpec> t{{"token_embd.weight", {32, 16}, test::kF32}};
    for (int b = 1; b <= 2; ++b) {
        for (auto& s : test::moe_block(b, kE, 32, n_ff, type)) t.push_back(s);
        if (w > 0) {
            const std::string p = "blk." + std::to_string(b) + ".";
            t.push_back({p + "ffn_up_shexp.weight", {32, w}, type});
            t.push_back({p + "ffn_down_shexp.weight", {w, 32}, type});
        }
    }
    return t;
}

class WidthTest : public ::testing::Test {
  protected:
    WidthRules rules(const std::vector<Kv>& k, const std::vector<TensorSpec>& t) {
        test::write_gguf(path(), k, t);
        const ShardSet m = ShardSet::open(path());
        return width_rules(m, build_moe_layout(m));
    }
    // The error width_rules throws, with the directory removed; "" when none.
    template <class E>
    std::string error_of(const std::vector<Kv>& k, const std::vector<TensorSpec>& t) {
        try {
            rules(k, t);
        } catch (const E& e) {
            std::string what = e.what();
            for (size_t at; (at = what.find(dir_.path().string() + "/")) != std::string::npos;)
                what.erase(at, dir_.path().string().size() + 1);
            return what;
        }
        return "";
    }
    static std::string check_error(const WidthRules& r, int64_t k) {
        try {
            check_width(r, k, "m.gguf");
        } catch (const UsageError& e) {
            return e.what();
        }
        return "";
    }
    std::string path() const { return dir_.file("m.gguf"); }
    test::TempDir dir_;
};

TEST_F(WidthTest, DeepseekF16SharedWidthMustBeDivisible) {
    // n_ff 64, two shared experts: W = 128, so K must divide 128 (F16 rows allow any K).
    const WidthRules r = rules(kvs("deepseek2", 64, 2), tensors(64, test::kF16, 128));
    EXPECT_EQ(r.native_width, 64);
    EXPECT_EQ(r.block_size, 1);
    EXPECT_EQ(r.width_key, "deepseek2.expert_feed_forward_length");
    EXPECT_TRUE(r.width_key_present);
    EXPECT_TRUE(r.shared_derived);
    EXPECT_EQ(r.shared_width, 128);
    EXPECT_EQ(r.shared_count_key, "deepseek2.expert_shared_count");
    EXPECT_EQ(r.legal, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));
    EXPECT_EQ(check_error(r, 32), "");
    EXPECT_EQ(
        check_error(r, 48),
        "K = 48 is not a legal expert width for m.gguf: the loader sizes the shared experts as "
        "deepseek2.expert_feed_forward_length × deepseek2.expert_shared_count, so "
        "deepseek2.expert_shared_count must become W / K = 128 / 48, which is not a whole number; legal "
        "widths are {1, 2, 4, 8, 16, 32, 64}");
}

TEST_F(WidthTest, QuantizedDownNeedsWholeBlocks) {
    const WidthRules r = rules(kvs("deepseek2", 128, 1), tensors(128, test::kQ8_0, 128));
    EXPECT_EQ(r.block_size, 32);
    EXPECT_EQ(r.legal, (std::vector<int64_t>{32, 64, 128}));
    EXPECT_EQ(check_error(r, 40),
              "K = 40 is not a legal expert width for m.gguf: rows of ffn_down_exps hold whole blocks of 32 "
              "elements, so K must be a multiple of 32; legal widths are {32, 64, 128}");
    EXPECT_EQ(check_error(r, 96).rfind("K = 96 is not a legal expert width for m.gguf: the loader sizes", 0),
              0u);
}

TEST_F(WidthTest, OutOfRange) {
    const WidthRules r = rules(kvs("deepseek2", 64, 1), tensors(64, test::kQ8_0, 64));
    EXPECT_EQ(check_error(r, 0),
              "K = 0 is not a legal expert width for m.gguf: an expert keeps at least one channel; legal "
              "widths are {32, 64}");
    EXPECT_EQ(check_error(r, 128),
              "K = 128 is not a legal expert width for m.gguf: it exceeds the native expert width 64; legal "
              "widths are {32, 64}");
    EXPECT_EQ(check_error(r, 64), "");
}

TEST_F(WidthTest, QwenWithoutWidthKeyNotDerived) {
    // qwen3moe may rely on the loader fallback (no expert_feed_forward_length); its shared width is not
    // derived from the expert width, so every width up to n_ff is legal for F16.
    const WidthRules r = rules(kvs("qwen3moe", 64, std::nullopt, false), tensors(64, test::kF16, 96));
    EXPECT_FALSE(r.width_key_present);
    EXPECT_EQ(r.width_key, "qwen3moe.expert_feed_forward_length");
    EXPECT_FALSE(r.shared_derived);
    EXPECT_EQ(r.shared_width, 96);
    EXPECT_EQ(r.shared_count_key, "");
    EXPECT_EQ(r.legal.size(), 64u);
    EXPECT_EQ(check_error(r, 65),
              "K = 65 is not a legal expert width for m.gguf: it exceeds the native expert width 64; legal "
              "widths are {1, 2, 3, 4, …, 63, 64} (64 values: every width up to 64)");
    EXPECT_EQ(check_error(r, 37), "");
}

TEST_F(WidthTest, LongListOfBlockMultiples) {
    const WidthRules r = rules(kvs("qwen3moe", 1024, std::nullopt), tensors(1024, test::kQ8_0, 0));
    EXPECT_EQ(r.legal.size(), 32u);
    EXPECT_EQ(check_error(r, 33),
              "K = 33 is not a legal expert width for m.gguf: rows of ffn_down_exps hold whole blocks of 32 "
              "elements, so K must be a multiple of 32; legal widths are {32, 64, 96, 128, …, 992, 1024} (32 "
              "values: every multiple of 32 up to 1024)");
}

TEST_F(WidthTest, GptOssBiasesCount) {
    std::vector<TensorSpec> t = tensors(64, test::kF16, 0);
    for (int b = 1; b <= 2; ++b) {
        const std::string p = "blk." + std::to_string(b) + ".";
        t.push_back({p + "ffn_gate_exps.bias", {64, kE}, test::kF32});
        t.push_back({p + "ffn_up_exps.bias", {64, kE}, test::kF32});
        t.push_back({p + "ffn_down_exps.bias", {32, kE}, test::kF32});
    }
    const WidthRules r = rules(kvs("gpt-oss", 64, std::nullopt), t);
    EXPECT_FALSE(r.shared_derived);
    EXPECT_EQ(r.native_width, 64);
    EXPECT_EQ(r.legal.size(), 64u);

    t.back() = {"blk.2.ffn_down_exps.bias", {32, kE}, test::kF32};
    t[t.size() - 2] = {"blk.2.ffn_up_exps.bias", {48, kE}, test::kF32};
    const std::string err = error_of<InputError>(kvs("gpt-oss", 64, std::nullopt), t);
    EXPECT_NE(err.find("tensor 'blk.2.ffn_up_exps.bias'"), std::string::npos) << err;
    EXPECT_NE(
        err.find("has 48 elements per expert, but ffn_down_exps of block 2 says the expert FFN width is 64 "
                 "(expected 64)"),
        std::string::npos)
        << err;
}

TEST_F(WidthTest, FusedGateUpMustHoldTwiceTheWidth) {
    std::vector<TensorSpec> t = tensors(64, test::kF16, 64);
    for (auto& s : t)
        if (s.name == "blk.1.ffn_gate_exps.weight")
            s = {"blk.1.ffn_gate_up_exps.weight", {32, 128, kE}, test::kF16};
    EXPECT_EQ(rules(kvs("deepseek2", 64), t).native_width, 64);
    for (auto& s : t)
        if (s.name == "blk.1.ffn_gate_up_exps.weight") s.ne = {32, 64, kE};
    const std::string err = error_of<InputError>(kvs("deepseek2", 64), t);
    EXPECT_NE(err.find("tensor 'blk.1.ffn_gate_up_exps.weight'"), std::string::npos) << err;
    EXPECT_NE(
        err.find("has 64 rows per expert (gate then up), but ffn_down_exps of block 1 says the expert FFN "
                 "width is 64 (expected 128)"),
        std::string::npos)
        << err;
}

TEST_F(WidthTest, BlocksDisagree) {
    std::vector<TensorSpec> t = tensors(64, test::kF16, 0);
    for (auto& s : t) {
        if (s.name == "blk.2.ffn_down_exps.weight") s.ne = {32, 32, kE};
        if (s.name == "blk.2.ffn_gate_exps.weight" || s.name == "blk.2.ffn_up_exps.weight")
            s.ne = {32, 32, kE};
    }
    const std::string err = error_of<InputError>(kvs("qwen3moe", 64, std::nullopt, false), t);
    EXPECT_NE(err.find("m.gguf: tensor 'blk.2.ffn_down_exps.weight' at offset"), std::string::npos) << err;
    EXPECT_NE(
        err.find("rows of 32 elements, but the expert FFN width of block 1 is 64: every MoE block must have "
                 "the same width"),
        std::string::npos)
        << err;
}

TEST_F(WidthTest, WidthKeyDisagreesWithTensors) {
    const std::string err = error_of<InputError>(kvs("deepseek2", 96), tensors(64, test::kF16, 64));
    EXPECT_NE(err.find("kv 'deepseek2.expert_feed_forward_length'"), std::string::npos) << err;
    EXPECT_NE(err.find("says 96 but ffn_down_exps rows are 64 wide"), std::string::npos) << err;
}

TEST_F(WidthTest, SharedWidthDisagreesWithCount) {
    const std::string err = error_of<InputError>(kvs("deepseek2", 64, 1), tensors(64, test::kF16, 128));
    EXPECT_NE(err.find("tensor 'blk.1.ffn_down_shexp.weight'"), std::string::npos) << err;
    EXPECT_NE(err.find("shared experts are 128 wide, but the loader sizes them as "
                       "deepseek2.expert_feed_forward_length = 64 × deepseek2.expert_shared_count = 1 = 64"),
              std::string::npos)
        << err;
}

TEST_F(WidthTest, RefusesDenseWidthKeyArchitectures) {
    // jamba and nomic-bert-moe size their dense FFN blocks and their experts with one key.
    auto ff = [](std::vector<Kv> v, const std::string& arch) {
        v.push_back(Kv::make_u32(arch + ".feed_forward_length", 64));
        return v;
    };
    EXPECT_EQ(
        error_of<UsageError>(ff(kvs("jamba", 64, std::nullopt, false), "jamba"), tensors(64, test::kF16, 0)),
        "m.gguf: architecture 'jamba' takes the expert FFN width from jamba.feed_forward_length, the key "
        "its dense feed-forward layers share; gguf-reap cannot change the expert width alone");
    EXPECT_EQ(error_of<UsageError>(ff(kvs("nomic-bert-moe", 64, std::nullopt, false), "nomic-bert-moe"),
                                   tensors(64, test::kF16, 0))
                  .substr(0, 55),
              "m.gguf: architecture 'nomic-bert-moe' takes the expert ");
}

TEST_F(WidthTest, FeedForwardLengthArchitecturesCutThatKey) {
    // llama (Mixtral), olmoe, granite*, minimax-01/m2, ... read the experts' width from
    // feed_forward_length, which no dense FFN shares: a cut rewrites it.
    for (const std::string arch : {"llama", "olmoe", "minimax-m2"}) {
        auto k = kvs(arch, 64, std::nullopt, false);
        k.push_back(Kv::make_u32(arch + ".feed_forward_length", 64));
        const WidthRules r = rules(k, tensors(64, test::kF16, 0));
        EXPECT_EQ(r.width_key, arch + ".feed_forward_length");
        EXPECT_TRUE(r.width_key_present);
        EXPECT_FALSE(r.shared_derived);
        const auto set = width_kvs(r, 16);
        ASSERT_EQ(set.size(), 1u);
        EXPECT_EQ(set[0].key, arch + ".feed_forward_length");
        EXPECT_EQ(set[0].value, 16u);
    }
    // Without the key the loader would build 0-wide experts: such a source is refused, naming the key.
    EXPECT_EQ(error_of<UsageError>(kvs("llama", 64, std::nullopt, false), tensors(64, test::kF16, 0)),
              "m.gguf: has no llama.feed_forward_length, the key llama.cpp reads the expert FFN width of "
              "architecture 'llama' from");
    // A per-layer array is not rewritten.
    auto k = kvs("olmoe", 64, std::nullopt, false);
    k.push_back(Kv::make_u32_array("olmoe.feed_forward_length", {64, 64, 64}));
    EXPECT_EQ(error_of<UsageError>(k, tensors(64, test::kF16, 0)),
              "m.gguf: olmoe.feed_forward_length is a per-layer array; gguf-reap cuts the expert width only "
              "where it is one value");
}

TEST_F(WidthTest, SharedWidthKeyIsWrittenWhereTheLoaderWouldDeriveIt) {
    // laguna sizes its shared experts by expert_shared_feed_forward_length, else width × count: a cut
    // writes the own key as W, so any K is legal and the shared tensors keep their shape.
    const WidthRules r = rules(kvs("laguna", 64, 1), tensors(64, test::kF16, 64));
    EXPECT_FALSE(r.shared_derived);
    EXPECT_EQ(r.shared_width_key, "laguna.expert_shared_feed_forward_length");
    EXPECT_EQ(r.legal.size(), 64u);
    const auto set = width_kvs(r, 24);
    ASSERT_EQ(set.size(), 2u);
    EXPECT_EQ(set[0].key, "laguna.expert_feed_forward_length");
    EXPECT_EQ(set[0].value, 24u);
    EXPECT_EQ(set[1].key, "laguna.expert_shared_feed_forward_length");
    EXPECT_EQ(set[1].value, 64u);
    // With the key present nothing is added; a key that disagrees with the tensors is bad input.
    auto k = kvs("laguna", 64, 1);
    k.push_back(Kv::make_u32("laguna.expert_shared_feed_forward_length", 64));
    EXPECT_EQ(rules(k, tensors(64, test::kF16, 64)).shared_width_key, "");
    k.back() = Kv::make_u32("laguna.expert_shared_feed_forward_length", 32);
    const std::string err = error_of<InputError>(k, tensors(64, test::kF16, 64));
    EXPECT_NE(err.find("kv 'laguna.expert_shared_feed_forward_length'"), std::string::npos) << err;
    EXPECT_NE(err.find("says 32 but ffn_down_shexp rows are 64 wide"), std::string::npos) << err;
    // qwen2moe falls back to feed_forward_length, which an expert-width cut leaves alone.
    EXPECT_EQ(rules(kvs("qwen2moe", 64, std::nullopt), tensors(64, test::kF16, 96)).shared_width_key, "");
}

TEST_F(WidthTest, RefusesLlama4AndUnknownArchitectures) {
    EXPECT_EQ(
        error_of<UsageError>(kvs("llama4", 64, std::nullopt), tensors(64, test::kF16, 64)),
        "m.gguf: architecture 'llama4' sizes its shared expert with llama4.expert_feed_forward_length too, "
        "so cutting the routed experts would change the shape llama.cpp expects of the shared expert");
    EXPECT_EQ(error_of<UsageError>(kvs("mystery", 64), tensors(64, test::kF16, 0)),
              "m.gguf: gguf-reap does not know how llama.cpp reads the expert FFN width of architecture "
              "'mystery', so it cannot cut it");
}

TEST_F(WidthTest, RefusesModelWithoutExperts) {
    EXPECT_EQ(error_of<UsageError>({Kv::make_string("general.architecture", "llama")},
                                   {{"token_embd.weight", {32, 16}, test::kF32}}),
              "m.gguf has no routed experts (architecture 'llama'): there is no expert width to cut");
}

TEST_F(WidthTest, RealFixtureQ8) {
    REQUIRE_FIXTURES();
    // tiny-deepseek2: n_ff_exp 256, one shared expert (W = 256), Q8_0 down projections (blocks of 32).
    const ShardSet m = ShardSet::open(test::fixture("models/tiny-deepseek2-Q8_0.gguf"));
    const WidthRules r = width_rules(m, build_moe_layout(m));
    EXPECT_EQ(r.native_width, 256);
    EXPECT_EQ(r.block_size, 32);
    EXPECT_TRUE(r.shared_derived);
    EXPECT_EQ(r.shared_width, 256);
    EXPECT_EQ(r.legal, (std::vector<int64_t>{32, 64, 128, 256}));
    EXPECT_EQ(
        check_error(r, 192),
        "K = 192 is not a legal expert width for m.gguf: the loader sizes the shared experts as "
        "deepseek2.expert_feed_forward_length × deepseek2.expert_shared_count, so "
        "deepseek2.expert_shared_count must become W / K = 256 / 192, which is not a whole number; legal "
        "widths are {32, 64, 128, 256}");
}

TEST(PlanInBlocks, WholeGroupsBecomeBlockIdsAndAPartialOneIsNamed) {
    // Blocks 1 and 3, two experts, K = 4 of 8 channels, groups of 2.
    NeuronPlan p;
    p.k = 4;
    p.expert_count = 2;
    p.blocks = {1, 3};
    p.channels = {0, 1, 6, 7, /**/ 2, 3, 4, 5, /**/ 4, 5, 6, 7, /**/ 0, 1, 2, 3};
    const auto units = plan_in_blocks(p, 2);
    ASSERT_TRUE(std::holds_alternative<NeuronPlan>(units));
    const NeuronPlan& u = std::get<NeuronPlan>(units);
    EXPECT_EQ(u.k, 2);
    EXPECT_EQ(u.blocks, p.blocks);
    EXPECT_EQ(u.channels, (std::vector<int32_t>{0, 3, 1, 2, 2, 3, 0, 1}));
    // Groups of 4: block 1 expert 0 keeps 2 of channels 0..3.
    const auto partial = plan_in_blocks(p, 4);
    ASSERT_TRUE(std::holds_alternative<PartialBlock>(partial));
    const PartialBlock& b = std::get<PartialBlock>(partial);
    EXPECT_EQ(b.block, 1);
    EXPECT_EQ(b.expert, 0);
    EXPECT_EQ(b.kept, 2);
    EXPECT_EQ(b.group, 0);
    // The first partial place in block, expert, group order: block 3 expert 0 keeps 1 of channels 2..3.
    p.channels = {0, 1, 2, 3, 2, 3, 4, 5, 3, 4, 6, 7, 0, 1, 2, 4};
    const auto later = plan_in_blocks(p, 2);
    ASSERT_TRUE(std::holds_alternative<PartialBlock>(later));
    const PartialBlock& c = std::get<PartialBlock>(later);
    EXPECT_EQ(c.block, 3);
    EXPECT_EQ(c.expert, 0);
    EXPECT_EQ(c.kept, 1);
    EXPECT_EQ(c.group, 1);
}

TEST(PlanInRowBlocks, EachBlockSizeOnceAndThePartialRowTypeNamed) {
    // Rows of F16 (no blocks), Q8_0 and Q4_0 (32 values a block) and Q4_K (256): one plan per block size.
    WidthRules rules;
    rules.row_types = {{kGgmlF16, "t0"}, {kGgmlQ8_0, "t1"}, {kGgmlQ4_0, "t2"}, {kGgmlQ4_K, "t3"}};
    NeuronPlan p;
    p.k = 256;
    p.expert_count = 1;
    p.blocks = {0};
    for (int32_t c = 0; c < 256; ++c) p.channels.push_back(c);
    const auto whole = plan_in_row_blocks(rules, p);
    ASSERT_TRUE((std::holds_alternative<std::map<int64_t, NeuronPlan>>(whole)));
    const auto& plans = std::get<std::map<int64_t, NeuronPlan>>(whole);
    ASSERT_EQ(plans.size(), 2u);
    EXPECT_EQ(plans.at(32).k, 8);
    EXPECT_EQ(plans.at(32).channels, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(plans.at(256).channels, (std::vector<int32_t>{0}));
    // Whole groups of 32 but part of the first group of 256: Q4_K's row type is named.
    p.channels.clear();
    for (int32_t c = 0; c < 32; ++c) p.channels.push_back(c);
    for (int32_t c = 288; c < 512; ++c) p.channels.push_back(c);
    const auto q4k = plan_in_row_blocks(rules, p);
    ASSERT_TRUE(std::holds_alternative<PartialRowBlock>(q4k));
    const PartialRowBlock& a = std::get<PartialRowBlock>(q4k);
    EXPECT_EQ(a.row_type->tensor, "t3");
    EXPECT_EQ(a.block_size, 256);
    EXPECT_EQ(a.at.kept, 32);
    EXPECT_EQ(a.at.group, 0);
    // Part of a group of 32: the first row type of that block size (Q8_0, not Q4_0) is named.
    p.channels.clear();
    for (int32_t c = 1; c < 257; ++c) p.channels.push_back(c);
    const auto q8 = plan_in_row_blocks(rules, p);
    ASSERT_TRUE(std::holds_alternative<PartialRowBlock>(q8));
    EXPECT_EQ(std::get<PartialRowBlock>(q8).row_type->tensor, "t1");
    EXPECT_EQ(std::get<PartialRowBlock>(q8).block_size, 32);
}

}  // namespace
}  // namespace gguf_reap
