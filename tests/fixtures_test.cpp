// Every model and shard in ../shared/fixtures (made by llama.cpp's own tools) parsed, with the values
// its expected.json records checked.
#include <gtest/gtest.h>

#include "format/ggml_types.h"
#include "format/gguf.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::expected_json;
using test::fixture;

TEST(Fixtures, ModelsMatchExpectedJson) {
    REQUIRE_FIXTURES();
    for (const auto& [rel, exp] : expected_json()["models"].items()) {
        SCOPED_TRACE(rel);
        ShardSet m = ShardSet::open(fixture(rel));
        EXPECT_FALSE(m.is_split());
        const Header& h = m.metadata();
        EXPECT_EQ(m.total_bytes(), exp["file_size"].get<uint64_t>());
        EXPECT_EQ(h.tensors.size(), exp["tensor_count"].get<size_t>());
        EXPECT_EQ(h.kvs.size(), exp["kv_count"].get<size_t>());
        EXPECT_EQ(h.alignment, exp["alignment"].get<uint32_t>());
        EXPECT_EQ(m.architecture(), exp["arch"].get<std::string>());
        EXPECT_EQ(*m.arch_uint("expert_count"), exp["expert_count"].get<uint64_t>());
        const auto& tensors = exp["tensors"];
        ASSERT_EQ(tensors.size(), m.tensors().size());
        for (size_t i = 0; i < tensors.size(); ++i) {
            const TensorInfo& t = m.info(m.tensors()[i]);
            EXPECT_EQ(t.name, tensors[i]["name"].get<std::string>());
            EXPECT_EQ(ggml_type_display(t.type), tensors[i]["type"].get<std::string>());
            EXPECT_EQ(m.tensors()[i].abs_offset, tensors[i]["offset"].get<uint64_t>());
            EXPECT_EQ(t.nbytes, tensors[i]["nbytes"].get<uint64_t>());
            const auto ne = tensors[i]["ne"].get<std::vector<int64_t>>();
            for (size_t d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], d < ne.size() ? ne[d] : 1) << t.name;
        }
        MoeLayout L = build_moe_layout(m);
        std::vector<int> blocks;
        for (const auto& b : L.blocks) blocks.push_back(b.block);
        EXPECT_EQ(blocks, exp["moe_layers"].get<std::vector<int>>());
        for (const auto& b : L.blocks)
            EXPECT_EQ(b.tensors.size(), 5u) << "gate/up/down exps, router, exp_probs_b";
    }
}

TEST(Fixtures, ShardsOpenFromAnyShard) {
    REQUIRE_FIXTURES();
    const auto& sh = expected_json()["shards"];
    for (const auto& [rel, exp] : sh["files"].items()) {
        SCOPED_TRACE(rel);
        ShardSet m = ShardSet::open(fixture(rel));
        EXPECT_TRUE(m.is_split());
        ASSERT_EQ(m.shards().size(), 3u);
        EXPECT_EQ(m.tensors().size(), 70u);
        EXPECT_EQ(m.architecture(), "deepseek2");
    }
    ShardSet m = ShardSet::open(fixture("shards/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf"));
    for (const auto& [rel, exp] : sh["files"].items()) {
        const Shard* s = nullptr;
        for (const auto& x : m.shards())
            if (x.path == fixture(rel)) s = &x;
        ASSERT_NE(s, nullptr) << rel;
        EXPECT_EQ(s->file->size(), exp["file_size"].get<uint64_t>());
        EXPECT_EQ(s->header.tensors.size(), exp["tensor_count"].get<size_t>());
        EXPECT_EQ(s->header.kvs.size(), exp["kv_count"].get<size_t>());
        for (const auto& [name, sha] : exp["tensor_data_sha256"].items()) {
            const TensorRef* r = m.find_tensor(name);
            ASSERT_NE(r, nullptr) << name;
            EXPECT_EQ(test::sha256_file_range(m.shards()[r->shard].path, r->abs_offset, r->nbytes),
                      sha.get<std::string>())
                << name;
        }
    }
}

}  // namespace
}  // namespace gguf_reap
