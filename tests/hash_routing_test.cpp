// deepseek4's token → expert tables (services/hash_routing.h): kept ids renumbered, pruned ids redirected to
// the kept expert with the most similar router row that the token's row does not already name.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gguf_builder.h"
#include "gguf_reap/error.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "services/hash_routing.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

constexpr int64_t kE = 4;

class HashRouting : public ::testing::Test {
  protected:
    // One MoE block of 4 experts (2 used) whose router rows are e0 = x, e1 = y, e2 ≈ x, e3 ≈ y, and a
    // table of 3 tokens.
    std::string write(const std::vector<int32_t>& table) {
        const std::vector<Kv> kvs{
            Kv::make_string("general.architecture", "deepseek4"), Kv::make_u32("deepseek4.block_count", 1),
            Kv::make_u32("deepseek4.expert_count", kE), Kv::make_u32("deepseek4.expert_used_count", 2)};
        std::vector<test::TensorSpec> specs{{"token_embd.weight", {32, 3}, test::kF32}};
        for (auto& s : test::moe_block(0, kE)) specs.push_back(s);
        specs.push_back({"blk.0.ffn_gate_tid2eid.weight", {2, 3}, kGgmlI32});
        test::BuiltGguf g = test::build_gguf(kvs, specs);
        auto data = [&](const std::string& name) {
            for (const auto& t : g.tensors)
                if (t.name == name) return g.bytes.data() + g.data_start + t.offset;
            ADD_FAILURE() << name;
            return g.bytes.data();
        };
        std::vector<float> router(32 * kE, 0.0f);
        router[0 * 32 + 0] = 1;                             // e0 = x
        router[1 * 32 + 1] = 1;                             // e1 = y
        router[2 * 32 + 0] = 1, router[2 * 32 + 1] = 0.1f;  // e2 ≈ x
        router[3 * 32 + 1] = 1, router[3 * 32 + 2] = 0.2f;  // e3 ≈ y
        std::memcpy(data("blk.0.ffn_gate_inp.weight"), router.data(), 4 * router.size());
        std::memcpy(data("blk.0.ffn_gate_tid2eid.weight"), table.data(), 4 * table.size());
        const std::string path = dir_.file("m.gguf");
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(g.bytes.data()),
                   static_cast<std::streamsize>(g.bytes.size()));
        return path;
    }
    HashRewrite rewrite(const std::vector<int32_t>& table, const std::vector<int64_t>& keep) {
        const ShardSet m = ShardSet::open(write(table));
        const MoeLayout l = build_moe_layout(m);
        EXPECT_TRUE(l.blocks.at(0).hash_table.has_value());
        return rewrite_hash_table(m, l.blocks.at(0), keep);
    }
    static std::vector<int32_t> ids(const HashRewrite& h) {
        std::vector<int32_t> v(h.bytes.size() / 4);
        std::memcpy(v.data(), h.bytes.data(), h.bytes.size());
        return v;
    }
    test::TempDir dir_;
};

TEST_F(HashRouting, KeptIdsRenumberedPrunedOnesGoToTheMostSimilarFreeKeptExpert) {
    // Keep {1, 3}: 1 → 0, 3 → 1. Token 0 [0, 1]: 1 stays (0), 0 is most like... e2 and e0 are pruned; e0's
    // nearest kept is e1 or e3 (both orthogonal to x: a tie, so the lower id, 1 → new 0), taken, so 3 → 1.
    // Token 1 [2, 3]: 3 → 1; 2 → nearest kept (tie again: e1) → 0. Token 2 [3, 1]: both kept → [1, 0].
    const HashRewrite h = rewrite({0, 1, 2, 3, 3, 1}, {1, 3});
    EXPECT_EQ(ids(h), (std::vector<int32_t>{1, 0, 0, 1, 1, 0}));
    EXPECT_EQ(h.entries, 6u);
    EXPECT_EQ(h.redirected, 2u);
}

TEST_F(HashRouting, SimilarityDecides) {
    // Keep {0, 1}. Token 1 [2, 3]: e2 ≈ e0 → 0, e3 ≈ e1 → 1. Token 2 [2, 0]: 0 stays in slot 1; e2's first
    // choice (0) is taken, so slot 0 gets 1.
    const HashRewrite h = rewrite({0, 1, 2, 3, 2, 0}, {0, 1});
    EXPECT_EQ(ids(h), (std::vector<int32_t>{0, 1, 0, 1, 1, 0}));
    EXPECT_EQ(h.redirected, 3u);
    // Every row names distinct ids below the kept count.
    const auto v = ids(h);
    for (size_t t = 0; t < 3; ++t) {
        EXPECT_LT(v[2 * t], 2);
        EXPECT_LT(v[2 * t + 1], 2);
        EXPECT_NE(v[2 * t], v[2 * t + 1]);
    }
}

TEST_F(HashRouting, AnIdOutsideTheExpertsIsBadInput) {
    try {
        rewrite({0, 1, 7, 3, 2, 0}, {0, 1});
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("tensor 'blk.0.ffn_gate_tid2eid.weight' token 1 slot 0"),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("expert id 7 is outside 0..3"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace gguf_reap
