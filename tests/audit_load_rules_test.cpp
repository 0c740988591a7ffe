// Structural audit's load-time rules (ops/audit/audit_load_rules.cpp): every condition under which
// llama.cpp's loader refuses a model with experts is a finding naming the key or the tensor, without
// --source.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf_builder.h"
#include "gguf_reap/audit.h"
#include "ops/audit/audit_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::TensorSpec;

std::vector<Kv> kvs(const std::string& arch, uint32_t experts, uint32_t used, uint32_t width = 32) {
    return {Kv::make_string("general.architecture", arch), Kv::make_u32(arch + ".block_count", 2),
            Kv::make_u32(arch + ".expert_count", experts), Kv::make_u32(arch + ".expert_used_count", used),
            Kv::make_u32(arch + ".expert_feed_forward_length", width)};
}

std::vector<TensorSpec> tensors(int64_t E = 8) {
    std::vector<TensorSpec> t{{"token_embd.weight", {32, 16}, test::kF32}};
    for (int b = 0; b < 2; ++b)
        for (auto& s : test::moe_block(b, E)) t.push_back(s);
    return t;
}

class AuditLoadRules : public ::testing::Test {
  protected:
    // The load-rule findings' lines, with the directory removed.
    std::vector<std::string> findings(const std::vector<Kv>& k, const std::vector<TensorSpec>& t) {
        test::write_gguf(dir_.file("m.gguf"), k, t);
        AuditOptions o;
        o.output = dir_.file("m.gguf");
        o.drop_cache = false;
        const AuditReport r = run_audit(o);
        std::vector<std::string> lines;
        for (const Finding& f : r.findings) {
            EXPECT_EQ(f.kind, FindingKind::kLoadRule) << f.line();
            std::string l = f.line();
            const std::string dir = dir_.path().string() + "/";
            if (l.rfind(dir, 0) == 0) l.erase(0, dir.size());
            lines.push_back(l.substr(0, l.find(" at offset")) + l.substr(l.find("): ") + 1));
        }
        return lines;
    }
    test::TempDir dir_;
};

TEST_F(AuditLoadRules, AConsistentModelHasNone) {
    EXPECT_EQ(findings(kvs("qwen3moe", 8, 2), tensors()), std::vector<std::string>{});
}

TEST_F(AuditLoadRules, ExpertCountDisagreeingWithEveryTensorIsOneFindingOnTheKey) {
    EXPECT_EQ(findings(kvs("qwen3moe", 6, 2), tensors()),
              std::vector<std::string>{"m.gguf: kv 'qwen3moe.expert_count': is 6, but every expert-indexed "
                                       "tensor holds 8 experts (e.g. 'blk.0.ffn_gate_inp.weight' has shape "
                                       "{32, 8})"});
}

TEST_F(AuditLoadRules, OneTensorWithAnotherExpertCountIsNamed) {
    auto t = tensors();
    for (auto& s : t)
        if (s.name == "blk.1.ffn_up_exps.weight") s.ne = {32, 32, 7};
    EXPECT_EQ(
        findings(kvs("qwen3moe", 8, 2), t),
        std::vector<std::string>{"m.gguf: tensor 'blk.1.ffn_up_exps.weight': has shape {32, 32, 7}: its "
                                 "expert axis ne[2] is 7, but qwen3moe.expert_count = 8"});
}

TEST_F(AuditLoadRules, UsedCountAndGroups) {
    EXPECT_EQ(findings(kvs("qwen3moe", 8, 9), tensors()),
              std::vector<std::string>{"m.gguf: kv 'qwen3moe.expert_used_count': is 9, more than "
                                       "qwen3moe.expert_count = 8: llama.cpp requires expert_used_count <= "
                                       "expert_count"});
    auto k = kvs("deepseek2", 8, 2);
    k.push_back(Kv::make_u32("deepseek2.expert_group_count", 3));
    k.push_back(Kv::make_u32("deepseek2.expert_group_used_count", 3));
    EXPECT_EQ(
        findings(k, tensors()),
        (std::vector<std::string>{
            "m.gguf: kv 'deepseek2.expert_group_count': is 3: 8 experts do not split into 3 equal groups",
            "m.gguf: kv 'deepseek2.expert_group_used_count': is 3: llama.cpp requires 0 < "
            "expert_group_used_count < expert_group_count = 3"}));
}

TEST_F(AuditLoadRules, ExpertWidthAndSharedWidth) {
    // The width key says 48, the tensors are 32 wide.
    const auto lines = findings(kvs("qwen3moe", 8, 2, 48), tensors());
    ASSERT_EQ(lines.size(), 6u);
    EXPECT_EQ(lines[0],
              "m.gguf: tensor 'blk.0.ffn_gate_exps.weight': has shape {32, 32, 8}: ne[1] is 32, but "
              "qwen3moe.expert_feed_forward_length = 48 makes it 48");
    // deepseek2 sizes its shared experts as width × expert_shared_count: 32 × 2 = 64, the tensors are 32.
    auto k = kvs("deepseek2", 8, 2);
    k.push_back(Kv::make_u32("deepseek2.expert_shared_count", 2));
    auto t = tensors();
    t.push_back({"blk.1.ffn_down_shexp.weight", {32, 32}, test::kQ8_0});
    EXPECT_EQ(
        findings(k, t),
        std::vector<std::string>{"m.gguf: tensor 'blk.1.ffn_down_shexp.weight': has shape {32, 32}: ne[0] is "
                                 "32, but deepseek2.expert_feed_forward_length = 32 × "
                                 "deepseek2.expert_shared_count = 2 makes the shared experts 64 wide, shape "
                                 "{64, 32}"});
}

TEST_F(AuditLoadRules, Bailingmoe2SharedWidthIsOwnKeyOrRoutedWidthTimesCount) {
    // bailingmoe2 sizes its shared experts as (own key, else the routed width) × expert_shared_count:
    // without the own key, 32 × 2 = 64; the tensors are 32 wide, so llama.cpp refuses the model.
    auto k = kvs("bailingmoe2", 8, 2);
    k.push_back(Kv::make_u32("bailingmoe2.expert_shared_count", 2));
    auto t = tensors();
    t.push_back({"blk.1.ffn_down_shexp.weight", {32, 32}, test::kQ8_0});
    EXPECT_EQ(findings(k, t),
              std::vector<std::string>{
                  "m.gguf: tensor 'blk.1.ffn_down_shexp.weight': has shape {32, 32}: ne[0] is "
                  "32, but bailingmoe2.expert_feed_forward_length = 32 × "
                  "bailingmoe2.expert_shared_count = 2 (bailingmoe2.expert_shared_feed_forward_"
                  "length absent) makes the shared experts 64 wide, shape {64, 32}"});
    // With the own key 16: 16 × 2 = 32 loads.
    k.push_back(Kv::make_u32("bailingmoe2.expert_shared_feed_forward_length", 16));
    EXPECT_EQ(findings(k, t), std::vector<std::string>{});
}

TEST_F(AuditLoadRules, LeadingDenseBlocksAndTheDenseWidth) {
    // deepseek2 with leading_dense_block_count 1: block 0 dense (feed_forward_length 48), block 1 MoE.
    auto k = kvs("deepseek2", 8, 2);
    k.push_back(Kv::make_u32("deepseek2.leading_dense_block_count", 1));
    k.push_back(Kv::make_u32("deepseek2.feed_forward_length", 48));
    k.push_back(Kv::make_u32("deepseek2.expert_shared_count", 1));
    std::vector<TensorSpec> t{{"token_embd.weight", {32, 16}, test::kF32},
                              {"blk.0.ffn_gate.weight", {32, 48}, test::kF32},
                              {"blk.0.ffn_up.weight", {32, 48}, test::kF32},
                              {"blk.0.ffn_down.weight", {48, 32}, test::kF32}};
    for (auto& s : test::moe_block(1, 8)) t.push_back(s);
    t.push_back({"blk.1.ffn_down_shexp.weight", {32, 32}, test::kQ8_0});
    EXPECT_EQ(findings(k, t), std::vector<std::string>{});
    k[5] = Kv::make_u32("deepseek2.leading_dense_block_count", 2);
    EXPECT_EQ(findings(k, t),
              std::vector<std::string>{
                  "m.gguf: tensor 'blk.1.ffn_gate_inp.weight': has shape {32, 8}: block 1 holds "
                  "routed experts, but deepseek2.leading_dense_block_count = 2 makes it a dense "
                  "block (llama.cpp requires blk.1.ffn_down.weight there and no expert tensors)"});
    k[5] = Kv::make_u32("deepseek2.leading_dense_block_count", 1);
    k[6] = Kv::make_u32("deepseek2.feed_forward_length", 64);
    const auto lines = findings(k, t);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[2],
              "m.gguf: tensor 'blk.0.ffn_down.weight': has shape {48, 32}: ne[0] is 48, but "
              "deepseek2.feed_forward_length = 64 makes the dense FFN 64 wide, shape {64, 32}");
}

}  // namespace
}  // namespace gguf_reap
