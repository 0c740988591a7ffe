// The MoE layout: which tensors of which blocks are indexed by expert, along which axis, and how many
// bytes one expert occupies in each (reference §5). Hand-made models cover every tensor role; the
// fixtures cover real llama.cpp files, unsplit and split; one named test per malformed layout.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gguf_builder.h"
#include "gguf_reap/error.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "model/tensor_table.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::TensorSpec;

constexpr int64_t kE = 4;
constexpr uint64_t kQ8Row32 = 34;  // bytes of a Q8_0 row of 32 elements

std::vector<Kv> moe_kvs(const std::string& arch = "deepseek2", int64_t experts = kE) {
    return {Kv::make_string("general.architecture", arch),
            Kv::make_u32(arch + ".block_count", 3),
            Kv::make_u32(arch + ".expert_count", static_cast<uint32_t>(experts)),
            Kv::make_u32(arch + ".expert_used_count", 2),
            Kv::make_u32(arch + ".expert_shared_count", 1),
            Kv::make_u32(arch + ".leading_dense_block_count", 1)};
}

// token_embd, a dense blk.0, MoE blk.1 and blk.2 (5 expert-indexed tensors each plus a shared expert
// that pruning leaves alone), output.
std::vector<TensorSpec> moe_tensors() {
    std::vector<TensorSpec> t{{"token_embd.weight", {32, 16}, test::kQ8_0},
                              {"blk.0.ffn_up.weight", {32, 32}, test::kQ8_0}};
    for (int b = 1; b <= 2; ++b) {
        for (auto& s : test::moe_block(b, kE)) t.push_back(s);
        t.push_back({"blk." + std::to_string(b) + ".ffn_up_shexp.weight", {32, 32}, test::kQ8_0});
        t.push_back({"blk." + std::to_string(b) + ".ffn_gate_inp_shexp.weight", {32}, test::kF32});
    }
    t.push_back({"output.weight", {32, 16}, test::kQ8_0});
    return t;
}

class MoeLayoutTest : public ::testing::Test {
  protected:
    test::BuiltGguf write(const std::vector<Kv>& kvs, const std::vector<TensorSpec>& t) {
        return test::write_gguf(dir_.file("m.gguf"), kvs, t);
    }
    MoeLayout layout() { return build_moe_layout(ShardSet::open(dir_.file("m.gguf"))); }
    // build_moe_layout's InputError with the directory removed; "" on success.
    std::string error_of() {
        try {
            layout();
        } catch (const InputError& e) {
            std::string what = e.what();
            const std::string dir = dir_.path().string() + "/";
            if (what.rfind(dir, 0) == 0) what.erase(0, dir.size());
            return what;
        }
        return "";
    }
    // Index of tensor `name` in `t`.
    static size_t index_of(const std::vector<TensorSpec>& t, const std::string& name) {
        for (size_t i = 0; i < t.size(); ++i)
            if (t[i].name == name) return i;
        ADD_FAILURE() << name;
        return 0;
    }

    test::TempDir dir_;
};

// ---- good layouts -------------------------------------------------------------------------------

TEST_F(MoeLayoutTest, DeepseekStyleBlocks) {
    const auto tensors = moe_tensors();
    const auto g = write(moe_kvs(), tensors);
    const MoeLayout L = layout();
    EXPECT_EQ(L.arch, "deepseek2");
    EXPECT_EQ(L.expert_count, 4u);
    EXPECT_EQ(L.expert_used_count, 2u);
    EXPECT_EQ(L.expert_shared_count, 1u);
    EXPECT_EQ(L.leading_dense_block_count, 1u);
    EXPECT_EQ(L.block_count, 3u);
    ASSERT_EQ(L.blocks.size(), 2u);
    uint64_t all_bytes = 0;
    for (int b = 1; b <= 2; ++b) {
        const MoeBlock* blk = L.find_block(b);
        ASSERT_NE(blk, nullptr);
        ASSERT_EQ(blk->tensors.size(), 5u);
        const std::string p = "blk." + std::to_string(b) + ".";
        // In model order: router, selection bias, gate, up, down.
        const char* labels[] = {"router", "exp_probs_b", "gate_exps", "up_exps", "down_exps"};
        const int axes[] = {1, 0, 2, 2, 2};
        const uint64_t slabs[] = {4 * 32, 4, kQ8Row32 * 32, kQ8Row32 * 32, kQ8Row32 * 32};
        const char* names[] = {"ffn_gate_inp.weight", "exp_probs_b.bias", "ffn_gate_exps.weight",
                               "ffn_up_exps.weight", "ffn_down_exps.weight"};
        for (size_t i = 0; i < 5; ++i) {
            const ExpertTensor& et = blk->tensors[i];
            EXPECT_EQ(et.name, p + names[i]);
            EXPECT_STREQ(expert_kind_label(*et.kind), labels[i]) << et.name;
            EXPECT_EQ(et.axis(), axes[i]) << et.name;
            EXPECT_EQ(et.slab, slabs[i]) << et.name;
            EXPECT_EQ(et.tensor, index_of(tensors, et.name));
            EXPECT_TRUE(L.is_expert_tensor(et.tensor));
            EXPECT_EQ(et.slab * kE, g.tensors[et.tensor].nbytes) << "slabs tile the tensor exactly";
            all_bytes += g.tensors[et.tensor].nbytes;
        }
        EXPECT_EQ(blk->slab_bytes, 3 * kQ8Row32 * 32) << "gate + up + down";
        EXPECT_EQ(blk->slab_bytes_all, 3 * kQ8Row32 * 32 + 4 * 32 + 4);
    }
    EXPECT_EQ(L.expert_tensor_bytes, all_bytes);
    EXPECT_EQ(L.find_block(0), nullptr) << "the dense block";
    EXPECT_FALSE(L.is_expert_tensor(index_of(tensors, "blk.1.ffn_up_shexp.weight"))) << "shared experts stay";
    EXPECT_FALSE(L.is_expert_tensor(index_of(tensors, "blk.1.ffn_gate_inp_shexp.weight")));
}

TEST_F(MoeLayoutTest, GptOssStyleBiasesScalesAndFusedGateUp) {
    // Router bias [E] (axis 0), per-expert biases [n, E] (axis 1), per-expert scales [E] (axis 0) and a
    // fused gate_up [n_embd, 2 n_ff, E] weight (axis 2).
    const std::vector<TensorSpec> t{
        {"blk.0.ffn_gate_inp.weight", {32, kE}, test::kF32},
        {"blk.0.ffn_gate_inp.bias", {kE}, test::kF32},
        {"blk.0.ffn_gate_up_exps.weight", {32, 64, kE}, test::kQ8_0},
        {"blk.0.ffn_up_exps.bias", {32, kE}, test::kF32},
        {"blk.0.ffn_down_exps.weight", {32, 32, kE}, test::kQ8_0},
        {"blk.0.ffn_down_exps.bias", {32, kE}, test::kF16},
        {"blk.0.ffn_down_exps.scale", {kE}, test::kF32},
        {"blk.0.ffn_down_exps.input_scale", {kE}, test::kF32},
    };
    write(moe_kvs("gpt-oss"), t);
    const MoeLayout L = layout();
    ASSERT_EQ(L.blocks.size(), 1u);
    const auto& ts = L.blocks[0].tensors;
    ASSERT_EQ(ts.size(), 8u);
    struct Want {
        const char* label;
        Projection projection;
        int axis;
        uint64_t slab;
    };
    const Want want[] = {{"router", Projection::kNone, 1, 128},
                         {"router_bias", Projection::kNone, 0, 4},
                         {"gate_up_exps", Projection::kGateUp, 2, kQ8Row32 * 64},
                         {"exps_bias", Projection::kUp, 1, 128},
                         {"down_exps", Projection::kDown, 2, kQ8Row32 * 32},
                         {"exps_bias", Projection::kDown, 1, 64},
                         {"exps_scale", Projection::kDown, 0, 4},
                         {"exps_scale", Projection::kDown, 0, 4}};
    for (size_t i = 0; i < 8; ++i) {
        EXPECT_STREQ(expert_kind_label(*ts[i].kind), want[i].label) << ts[i].name;
        EXPECT_EQ(ts[i].kind->projection, want[i].projection)
            << ts[i].name << ": each bias knows its projection";
        EXPECT_EQ(ts[i].axis(), want[i].axis) << ts[i].name;
        EXPECT_EQ(ts[i].slab, want[i].slab) << ts[i].name;
    }
    EXPECT_EQ(L.blocks[0].slab_bytes, kQ8Row32 * 64 + kQ8Row32 * 32);
    EXPECT_TRUE(ts[1].kind->read_per_token()) << "a router bias is read for every token";
    EXPECT_FALSE(ts[3].kind->read_per_token()) << "an expert bias only for routed tokens";
    // The up bias [n_ff, E] is cut to K elements by a width cut, as its weight's rows are.
    EXPECT_EQ(ts[3].kind->width_axis, 0);
    EXPECT_EQ(ts[3].kind->width_factor, 1);
    EXPECT_EQ(ts[5].kind->width_axis, -1) << "the down bias is n_embd long: no channel axis";
}

TEST_F(MoeLayoutTest, AFusedGateUpBiasIsRefused) {
    // No llama.cpp loader creates one (gpt-oss, the architecture with expert biases, takes no fused
    // gate_up), so the table has no layout for it: refused rather than copied unsliced.
    write(moe_kvs("gpt-oss"), {{"blk.0.ffn_gate_inp.weight", {32, kE}, test::kF32},
                               {"blk.0.ffn_gate_up_exps.weight", {32, 64, kE}, test::kQ8_0},
                               {"blk.0.ffn_gate_up_exps.bias", {64, kE}, test::kF32},
                               {"blk.0.ffn_down_exps.weight", {32, 32, kE}, test::kQ8_0}});
    const std::string msg = error_of();
    EXPECT_NE(msg.find("tensor 'blk.0.ffn_gate_up_exps.bias'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("looks expert-indexed but matches no tensor layout gguf-reap knows"),
              std::string::npos)
        << msg;
}

TEST_F(MoeLayoutTest, DenseModelHasNoBlocks) {
    write({Kv::make_string("general.architecture", "llama")},
          {{"blk.0.ffn_up.weight", {32, 32}, test::kQ8_0}});
    EXPECT_TRUE(layout().blocks.empty());
    // expert_count 0 is a dense model as well (llama.cpp: MoE iff expert_count > 0), even with a stray
    // expert-looking tensor.
    auto kvs = moe_kvs("llama", 0);
    kvs[3] = Kv::make_u32("llama.expert_used_count", 0);
    write(kvs, {{"blk.0.ffn_up_exps.weight", {32, 32, 3}, test::kQ8_0}});
    EXPECT_TRUE(layout().blocks.empty());
}

TEST(MoeLayoutFixtures, SlabsMatchExpectedTensorSizes) {
    REQUIRE_FIXTURES();
    for (const auto& [rel, exp] : test::expected_json()["models"].items()) {
        SCOPED_TRACE(rel);
        const MoeLayout L = build_moe_layout(ShardSet::open(test::fixture(rel)));
        EXPECT_EQ(L.expert_count, 16u);
        EXPECT_EQ(L.expert_used_count, 4u);
        EXPECT_EQ(L.leading_dense_block_count, 1u);
        ASSERT_EQ(L.blocks.size(), 3u);
        for (const auto& b : L.blocks) {
            uint64_t weights = 0;
            for (const auto& et : b.tensors)
                for (const auto& t : exp["tensors"])
                    if (t["name"] == et.name) {
                        EXPECT_EQ(et.slab * 16, t["nbytes"].get<uint64_t>()) << et.name;
                        if (et.axis() == 2) weights += t["nbytes"].get<uint64_t>() / 16;
                    }
            EXPECT_EQ(b.slab_bytes, weights) << "block " << b.block;
        }
    }
    // Q4_K_M mixes Q6_K and Q4_K ffn_down_exps across blocks: slabs are per block, not per model.
    const MoeLayout q4 = build_moe_layout(ShardSet::open(test::fixture("models/tiny-deepseek2-Q4_K_M.gguf")));
    std::set<uint64_t> slabs;
    for (const auto& b : q4.blocks) slabs.insert(b.slab_bytes);
    EXPECT_EQ(slabs.size(), 2u);
}

TEST(MoeLayoutFixtures, SplitModelSameLayoutAsUnsplit) {
    REQUIRE_FIXTURES();
    const ShardSet whole = ShardSet::open(test::fixture("models/tiny-deepseek2-IQ2_XXS.gguf"));
    const ShardSet split = ShardSet::open(test::fixture("shards/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf"));
    const MoeLayout a = build_moe_layout(whole), b = build_moe_layout(split);
    ASSERT_EQ(a.blocks.size(), b.blocks.size());
    std::set<size_t> shards_used;
    for (size_t i = 0; i < a.blocks.size(); ++i) {
        ASSERT_EQ(a.blocks[i].tensors.size(), b.blocks[i].tensors.size());
        for (size_t j = 0; j < a.blocks[i].tensors.size(); ++j) {
            const ExpertTensor &x = a.blocks[i].tensors[j], &y = b.blocks[i].tensors[j];
            EXPECT_EQ(x.name, y.name);
            EXPECT_EQ(x.slab, y.slab);
            EXPECT_EQ(split.info(split.tensors()[y.tensor]).name, y.name)
                << "global index into the shard set";
            shards_used.insert(split.tensors()[y.tensor].shard);
        }
    }
    // gguf-split put token_embd, output and blk.0 in shard 1; the MoE blocks span shards 2 and 3.
    EXPECT_EQ(shards_used, (std::set<size_t>{1, 2}));
}

// ---- one named test per malformed layout --------------------------------------------------------

TEST_F(MoeLayoutTest, ExpsWithWrongExpertCount) {
    auto t = moe_tensors();
    t[index_of(t, "blk.2.ffn_up_exps.weight")].ne = {32, 32, 3};
    const auto g = write(moe_kvs(), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.2.ffn_up_exps.weight' at offset {0} (0x{0:x}): has shape "
                          "{{32, 32, 3, 1}} but up_exps tensors must have ne[2] = expert_count = 4 as "
                          "their outermost dimension",
                          g.info_offsets[index_of(t, "blk.2.ffn_up_exps.weight")]));
}

TEST_F(MoeLayoutTest, ExpsWithTrailingDimension) {
    // Experts in ne[2] but a ne[3] > 1 behind them: slab e would not be contiguous.
    auto t = moe_tensors();
    t[index_of(t, "blk.1.ffn_down_exps.weight")].ne = {32, 32, 4, 2};
    const auto g = write(moe_kvs(), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.1.ffn_down_exps.weight' at offset {0} (0x{0:x}): has "
                          "shape {{32, 32, 4, 2}} but down_exps tensors must have ne[2] = expert_count = 4 "
                          "as their outermost dimension",
                          g.info_offsets[index_of(t, "blk.1.ffn_down_exps.weight")]));
}

TEST_F(MoeLayoutTest, UnknownExpsTensor) {
    auto t = moe_tensors();
    t.push_back({"blk.2.ffn_norm_exps.weight", {32, kE}, test::kF32});
    const auto g = write(moe_kvs(), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.2.ffn_norm_exps.weight' at offset {0} (0x{0:x}): looks "
                          "expert-indexed but matches no tensor layout gguf-reap knows; refusing rather "
                          "than copying it unsliced",
                          g.info_offsets.back()));
}

TEST_F(MoeLayoutTest, UnknownExpsSuffix) {
    auto t = moe_tensors();
    t.push_back({"blk.1.ffn_gate_exps.qweight", {32, 32, kE}, test::kQ8_0});
    const auto g = write(moe_kvs(), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.1.ffn_gate_exps.qweight' at offset {0} (0x{0:x}): looks "
                          "expert-indexed but matches no tensor layout gguf-reap knows; refusing rather "
                          "than copying it unsliced",
                          g.info_offsets.back()));
}

TEST_F(MoeLayoutTest, UnknownRouterSuffix) {
    auto t = moe_tensors();
    t.push_back({"blk.1.ffn_gate_inp.scale", {kE}, test::kF32});
    const auto g = write(moe_kvs(), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.1.ffn_gate_inp.scale' at offset {0} (0x{0:x}): looks "
                          "expert-indexed but matches no tensor layout gguf-reap knows; refusing rather "
                          "than copying it unsliced",
                          g.info_offsets.back()));
}

TEST_F(MoeLayoutTest, RouterWithWrongShape) {
    auto t = moe_tensors();
    t[index_of(t, "blk.1.ffn_gate_inp.weight")].ne = {32, 5};
    const auto g = write(moe_kvs(), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.1.ffn_gate_inp.weight' at offset {0} (0x{0:x}): has shape "
                          "{{32, 5, 1, 1}} but router tensors must have ne[1] = expert_count = 4 as their "
                          "outermost dimension",
                          g.info_offsets[index_of(t, "blk.1.ffn_gate_inp.weight")]));
}

TEST_F(MoeLayoutTest, SelectionBiasWithWrongShape) {
    auto t = moe_tensors();
    t[index_of(t, "blk.2.exp_probs_b.bias")].ne = {kE, 2};
    const auto g = write(moe_kvs(), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.2.exp_probs_b.bias' at offset {0} (0x{0:x}): has shape "
                          "{{4, 2, 1, 1}} but exp_probs_b tensors must have ne[0] = expert_count = 4 as "
                          "their outermost dimension",
                          g.info_offsets[index_of(t, "blk.2.exp_probs_b.bias")]));
}

TEST_F(MoeLayoutTest, LookAlikesOfTheArchitectureAreOrdinaryTensors) {
    // gemma4's ffn_gate_inp.scale is the router's [n_embd] input scale, arctic's ffn_norm_exps an
    // [n_embd] norm: copied whole. Under any other architecture the same names are refused.
    for (const auto& [arch, name] : {std::pair<std::string, std::string>{"gemma4", "ffn_gate_inp.scale"},
                                     {"arctic", "ffn_norm_exps.weight"}}) {
        auto t = moe_tensors();
        for (int b = 1; b <= 2; ++b) t.push_back({"blk." + std::to_string(b) + "." + name, {32}, test::kF32});
        write(moe_kvs(arch), t);
        const MoeLayout l = layout();
        ASSERT_EQ(l.blocks.size(), 2u) << arch;
        for (const auto& b : l.blocks) EXPECT_EQ(b.tensors.size(), 5u) << arch;
        write(moe_kvs("deepseek2"), t);
        EXPECT_NE(error_of().find("blk.1." + name), std::string::npos) << arch;
    }
}

TEST_F(MoeLayoutTest, SelectionBiasWithoutSuffix) {
    // hy_v3's loader names the selection bias "blk.N.exp_probs_b", with no suffix.
    auto t = moe_tensors();
    for (int b = 1; b <= 2; ++b) t.push_back({"blk." + std::to_string(b) + ".exp_probs_b", {kE}, test::kF32});
    write(moe_kvs("hy_v3"), t);
    const MoeLayout l = layout();
    ASSERT_EQ(l.blocks.size(), 2u);
    EXPECT_EQ(l.blocks[0].tensors.size(), 6u);
    EXPECT_EQ(block_tensor_name(1, expert_kind(ExpertRole::kProbsBias)), "blk.1.exp_probs_b.bias");
}

// The role table names each role once per vocabulary: no two roles share a name or a region, no two
// kinds of another role or projection share a label, and every kind of the tensor table has a label
// (inspect), a role name (the generator's tests) and a region (audit's findings).
TEST(TensorTable, EveryRoleHasItsNamesOnce) {
    std::set<std::string> names, regions, kind_labels;
    size_t roles = 0;
    for (const ExpertRole r : {ExpertRole::kWeight, ExpertRole::kBias, ExpertRole::kScale,
                               ExpertRole::kRouter, ExpertRole::kRouterBias, ExpertRole::kProbsBias}) {
        ++roles;
        names.insert(expert_role_name(r));
        regions.insert(expert_role_region(r));
    }
    EXPECT_EQ(names.size(), roles);
    EXPECT_EQ(regions.size(), roles);
    for (const ExpertTensorKind& k : expert_tensor_kinds()) {
        EXPECT_STRNE(expert_kind_label(k), "?") << k.base << "." << k.suffix;
        EXPECT_STRNE(expert_role_name(k.role), "?") << k.base << "." << k.suffix;
        kind_labels.insert(expert_kind_label(k));
    }
    // Weights by projection (4), then one label per other role (5).
    EXPECT_EQ(kind_labels.size(), 9u);
    EXPECT_STREQ(expert_role_region(ExpertRole::kRouter), "router row");
    EXPECT_STREQ(expert_role_region(ExpertRole::kWeight), "kept slab");
    EXPECT_STREQ(expert_kind_label(expert_kind(ExpertRole::kWeight, Projection::kGateUp)), "gate_up_exps");
}

TEST(ArchitectureTable, SortedUniqueAndEveryLoaderNamed) {
    const auto archs = architectures();
    EXPECT_GE(archs.size(), 59u);
    for (size_t i = 0; i < archs.size(); ++i) {
        EXPECT_EQ(arch_info(archs[i].name), &archs[i]) << archs[i].name;
        if (i > 0) {
            EXPECT_LT(archs[i - 1].name, archs[i].name);
        }
        EXPECT_TRUE(archs[i].loader.starts_with("src/models/")) << archs[i].name;
        // An architecture that can never hold experts has no width to cut.
        if (archs[i].status == ArchStatus::kNoExperts) {
            EXPECT_EQ(archs[i].width_key, ExpertWidthKey::kUnknown) << archs[i].name;
        }
    }
    EXPECT_EQ(arch_info("mystery"), nullptr);
    EXPECT_TRUE(arch_info("deepseek4")->has(ArchFlag::kHashRouting));
    EXPECT_TRUE(arch_info("deepseek2")->has(ArchFlag::kNextn));
    EXPECT_FALSE(arch_info("qwen3moe")->has(ArchFlag::kNextn));
}

TEST_F(MoeLayoutTest, Deepseek4HashTablesBelongToTheirBlock) {
    // Splice rewrites their values (hash_routing_test.cpp); the layout only places and shape-checks them.
    auto t = moe_tensors();
    t.push_back({"blk.1.ffn_gate_tid2eid.weight", {2, 16}, test::kI32});
    write(moe_kvs("deepseek4"), t);
    const MoeLayout l = layout();
    ASSERT_EQ(l.blocks.size(), 2u);
    EXPECT_EQ(l.blocks[0].hash_table, std::optional<size_t>(t.size() - 1));
    EXPECT_FALSE(l.blocks[1].hash_table.has_value());
    // Not [expert_used_count, n_vocab] I32, or outside an MoE block: refused, naming the tensor.
    t.back() = {"blk.1.ffn_gate_tid2eid.weight", {3, 16}, test::kI32};
    auto g = write(moe_kvs("deepseek4"), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.1.ffn_gate_tid2eid.weight' at offset {0} (0x{0:x}): has shape "
                          "{{3, 16, 1, 1}} and type I32, but a token → expert table is I32 "
                          "[expert_used_count = 2, n_vocab] inside a block",
                          g.info_offsets.back()));
    t.back() = {"blk.0.ffn_gate_tid2eid.weight", {2, 16}, test::kI32};
    g = write(moe_kvs("deepseek4"), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.0.ffn_gate_tid2eid.weight' at offset {0} (0x{0:x}): a token → "
                          "expert table in block 0, which has no routed experts",
                          g.info_offsets.back()));
}

TEST_F(MoeLayoutTest, GrovemoeChunkExpertsRefused) {
    auto t = moe_tensors();
    t.push_back({"blk.1.ffn_up_chexps.weight", {32, 16, 2}, test::kF16});
    const auto g = write(moe_kvs("grovemoe"), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.1.ffn_up_chexps.weight' at offset {0} (0x{0:x}): architecture "
                          "'grovemoe' pairs each chunk expert with a group of routed experts "
                          "(experts_per_group); the loader derives the chunk count from expert_count, so "
                          "only whole groups could be removed, with their chunk experts, which gguf-reap "
                          "refuses",
                          g.info_offsets.back()));
}

// MTP blocks, token → expert tables and chunk experts are looked for only where the architecture's
// flags say its loader reads them; an architecture the table does not list is read for all three.
TEST_F(MoeLayoutTest, ArchFlagsSayWhatTheLoaderReads) {
    auto kvs = moe_kvs("deepseek2");
    kvs.push_back(Kv::make_u32("deepseek2.nextn_predict_layers", 1));
    write(kvs, moe_tensors());
    EXPECT_EQ(layout().nextn_predict_layers, 1u);
    EXPECT_TRUE(layout().is_nextn_block(2));
    // qwen3moe's loader reads no nextn_predict_layers: its last block is an ordinary one.
    kvs = moe_kvs("qwen3moe");
    kvs.push_back(Kv::make_u32("qwen3moe.nextn_predict_layers", 1));
    write(kvs, moe_tensors());
    EXPECT_EQ(layout().nextn_predict_layers, 0u);
    EXPECT_FALSE(layout().is_nextn_block(2));
    kvs = moe_kvs("mystery");
    kvs.push_back(Kv::make_u32("mystery.nextn_predict_layers", 1));
    write(kvs, moe_tensors());
    EXPECT_EQ(layout().nextn_predict_layers, 1u);

    // A tid2eid tensor outside deepseek4, even of a shape no table has, is an ordinary tensor there.
    auto t = moe_tensors();
    t.push_back({"blk.1.ffn_gate_tid2eid.weight", {3, 16}, test::kI32});
    write(moe_kvs("qwen3moe"), t);
    EXPECT_EQ(error_of(), "");
    EXPECT_FALSE(layout().blocks[0].hash_table.has_value());
    write(moe_kvs("mystery"), t);
    EXPECT_NE(error_of().find("but a token → expert table is I32"), std::string::npos) << error_of();

    // Chunk experts are grovemoe's (GrovemoeChunkExpertsRefused); in qwen3moe the name is nothing.
    t = moe_tensors();
    t.push_back({"blk.1.ffn_up_chexps.weight", {32, 16, 2}, test::kF16});
    write(moe_kvs("qwen3moe"), t);
    EXPECT_EQ(error_of(), "");
    write(moe_kvs("mystery"), t);
    EXPECT_NE(error_of().find("pairs each chunk expert with a group"), std::string::npos) << error_of();
}

TEST_F(MoeLayoutTest, ExpertsWithoutRouter) {
    auto t = moe_tensors();
    t.erase(t.begin() + static_cast<std::ptrdiff_t>(index_of(t, "blk.2.ffn_gate_inp.weight")));
    const auto g = write(moe_kvs(), t);
    // The error names the block's first expert-indexed tensor.
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.2.exp_probs_b.bias' at offset {0} (0x{0:x}): block 2 has "
                          "expert tensors but no router: an MoE block needs both a router "
                          "(ffn_gate_inp.weight) and expert weights (ffn_*_exps.weight)",
                          g.info_offsets[index_of(t, "blk.2.exp_probs_b.bias")]));
}

TEST_F(MoeLayoutTest, RouterWithoutExperts) {
    auto t = moe_tensors();
    t.push_back({"blk.0.ffn_gate_inp.weight", {32, kE}, test::kF32});
    const auto g = write(moe_kvs(), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.0.ffn_gate_inp.weight' at offset {0} (0x{0:x}): block 0 "
                          "has a router but no expert weights: an MoE block needs both a router "
                          "(ffn_gate_inp.weight) and expert weights (ffn_*_exps.weight)",
                          g.info_offsets.back()));
}

TEST_F(MoeLayoutTest, QuantizedPerExpertVector) {
    // 32 experts so that a Q8_0 vector of one value per expert is legal GGUF; it packs 32 experts into one
    // block and cannot be cut between them.
    std::vector<TensorSpec> t = test::moe_block(1, 32, 32, 32);
    t.push_back({"blk.1.ffn_down_exps.scale", {32}, test::kQ8_0});
    const auto g = write(moe_kvs("deepseek2", 32), t);
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: tensor 'blk.1.ffn_down_exps.scale' at offset {0} (0x{0:x}): "
                          "per-expert vector of type Q8_0 packs several experts into one block; it "
                          "cannot be sliced byte-exactly",
                          g.info_offsets.back()));
}

TEST_F(MoeLayoutTest, MoreExpertsUsedThanExist) {
    auto kvs = moe_kvs();
    kvs[3] = Kv::make_u32("deepseek2.expert_used_count", 5);
    const auto g = write(kvs, moe_tensors());
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: kv 'deepseek2.expert_used_count' at offset {0} (0x{0:x}): 5 experts "
                          "used per token, but the model has only 4 (llama.cpp refuses such a model)",
                          g.kv_offsets[3]));
}

TEST_F(MoeLayoutTest, GroupsThatDoNotDivideExperts) {
    // Group-limited routing splits the experts into equal contiguous groups; 4 into 3 cannot be.
    auto kvs = moe_kvs();
    kvs.push_back(Kv::make_u32("deepseek2.expert_group_count", 3));
    const auto g = write(kvs, moe_tensors());
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: kv 'deepseek2.expert_group_count' at offset {0} (0x{0:x}): 4 experts "
                          "do not split into 3 equal groups (llama.cpp refuses such a model)",
                          g.kv_offsets.back()));
    kvs.back() = Kv::make_u32("deepseek2.expert_group_count", 2);
    write(kvs, moe_tensors());
    EXPECT_EQ(error_of(), "");
    EXPECT_EQ(layout().expert_group_count, 2u);
}

TEST_F(MoeLayoutTest, ExpertCountNotAnInteger) {
    auto kvs = moe_kvs();
    kvs[2] = Kv::make_string("deepseek2.expert_count", "4");
    auto g = write(kvs, moe_tensors());
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: kv 'deepseek2.expert_count' at offset {0} (0x{0:x}): must be a "
                          "non-negative integer, found str \"4\"",
                          g.kv_offsets[2]));
    kvs[2] = Kv::make_i32("deepseek2.expert_count", -4);
    g = write(kvs, moe_tensors());
    EXPECT_EQ(error_of(),
              fmt::format("m.gguf: kv 'deepseek2.expert_count' at offset {0} (0x{0:x}): must be a "
                          "non-negative integer, found i32 -4",
                          g.kv_offsets[2]));
}

}  // namespace
}  // namespace gguf_reap
