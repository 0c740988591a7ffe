// splice on generated models: every expert-indexed tensor class (stacked and fused weights, router
// rows and bias, exp_probs_b, gpt-oss biases on ne[1], scales), groups, MTP blocks, K-quants, a
// non-default alignment and split sources. Each output slab is compared with the source slab it must
// be, located from the tensor's shape and type alone (not from the plan or MoeLayout's slab).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gguf_reap/error.h"
#include "splice_test_support.h"

namespace gguf_reap {
namespace {

using test::TempDir;

void gen(const std::string& args) {
    auto r = test::run_gen(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
}

// Bytes of one expert along `axis`, from shape and type.
uint64_t slab_bytes(const TensorInfo& t, int axis) {
    uint64_t n =
        axis == 0 ? static_cast<uint64_t>(ggml_type(t.type)->type_size) : *ggml_row_size(t.type, t.ne[0]);
    for (int d = 1; d < axis; ++d) n *= static_cast<uint64_t>(t.ne[d]);
    return n;
}

std::vector<uint8_t> read_range(const ShardSet& m, const TensorRef& r, uint64_t off, uint64_t n) {
    std::vector<uint8_t> v(n);
    m.shards()[r.shard].file->read(r.abs_offset + off, v.data(), n);
    return v;
}

// Expected roles by tensor-name suffix, and their expert axis.
int expert_axis(const std::string& name) {
    auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
    if (has("_exps.weight")) return 2;
    if (has("_exps.bias") || has("ffn_gate_inp.weight")) return 1;
    if (has("_exps.scale") || has("ffn_gate_inp.bias") || has("exp_probs_b")) return 0;
    return -1;
}

// Checks out against src for the kept ids `keep[block]`; returns the number of sliced tensors.
size_t check_output(const ShardSet& src, const ShardSet& out, const std::map<int, std::vector<int64_t>>& keep,
                    uint64_t experts) {
    size_t sliced = 0;
    EXPECT_EQ(out.tensors().size(), src.tensors().size());
    for (size_t i = 0; i < src.tensors().size(); ++i) {
        const TensorInfo& s = src.info(src.tensors()[i]);
        const TensorInfo& o = out.info(out.tensors()[i]);
        EXPECT_EQ(o.name, s.name);
        EXPECT_EQ(o.type, s.type);
        const int axis = s.name.rfind("blk.", 0) == 0 ? expert_axis(s.name) : -1;
        if (axis < 0) {
            EXPECT_EQ(o.ne, s.ne) << s.name;
            EXPECT_EQ(test::tensor_sha(out, out.tensors()[i]), test::tensor_sha(src, src.tensors()[i]))
                << s.name;
            continue;
        }
        ++sliced;
        const int block = std::stoi(s.name.substr(4));
        const auto& ids = keep.at(block);
        EXPECT_EQ(s.ne[axis], static_cast<int64_t>(experts)) << s.name;
        auto want = s.ne;
        want[axis] = static_cast<int64_t>(ids.size());
        EXPECT_EQ(o.ne, want) << s.name;
        const uint64_t slab = slab_bytes(s, axis);
        EXPECT_EQ(o.nbytes, slab * ids.size()) << s.name;
        if (o.nbytes != slab * ids.size()) continue;
        for (size_t k = 0; k < ids.size(); ++k)
            EXPECT_TRUE(read_range(out, out.tensors()[i], k * slab, slab) ==
                        read_range(src, src.tensors()[i], static_cast<uint64_t>(ids[k]) * slab, slab))
                << s.name << " output expert " << k << " must be source expert " << ids[k];
    }
    return sliced;
}

std::string drop_json(const std::map<int, std::vector<int64_t>>& drop) {
    nlohmann::json j;
    for (const auto& [b, ids] : drop) j["drop"][std::to_string(b)] = ids;
    return j.dump();
}

std::map<int, std::vector<int64_t>> keep_of(const std::map<int, std::vector<int64_t>>& drop,
                                            int64_t experts) {
    std::map<int, std::vector<int64_t>> keep;
    for (const auto& [b, ids] : drop)
        for (int64_t e = 0; e < experts; ++e)
            if (std::find(ids.begin(), ids.end(), e) == ids.end()) keep[b].push_back(e);
    return keep;
}

TEST(SpliceGenerated, EveryExpertTensorClassGroupsMtpAlignment) {
    TempDir dir;
    // 4 blocks (1 dense) + 1 MTP block; 16 experts in 4 groups; fused gate_up; router biases; scales.
    gen(fmt::format(
        "model --skeleton -o {} --blocks 4 --dense-blocks 1 --nextn 1 --experts 16 --used 4 --groups 4 "
        "--group-used 2 --probs-bias --router-bias --scales --fused-gate-up --alignment 64 "
        "--type-exps Q8_0 --type-down Q4_0 --seed 7",
        dir.file("m.gguf")));
    // Two per group kept in every block, incl. the MTP block 4.
    const std::map<int, std::vector<int64_t>> drop = {{1, {1, 2, 4, 7, 9, 10, 13, 15}},
                                                      {2, {0, 1, 6, 7, 8, 11, 12, 13}},
                                                      {3, {2, 3, 5, 6, 10, 11, 14, 15}},
                                                      {4, {0, 3, 4, 5, 8, 9, 12, 14}}};
    const std::string kl = test::write_text(dir.file("k.json"), drop_json(drop));
    auto s = test::splice_api(dir.file("m.gguf"), kl, dir.file("o"));
    ShardSet out = ShardSet::open(dir.file("o.gguf"));
    // Per MoE block: router, router bias, exp_probs_b, gate_up, down, the down scale (a fused gate_up has
    // no per-expert scale in llama.cpp).
    EXPECT_EQ(check_output(*s->opened->model, out, keep_of(drop, 16), 16), 4u * 6u);
    EXPECT_EQ(out.arch_uint("expert_count"), 8u);
    EXPECT_EQ(out.arch_uint("expert_used_count"), 4u);
    EXPECT_EQ(out.arch_uint("expert_group_count"), 4u);
    EXPECT_EQ(out.arch_uint("nextn_predict_layers"), 1u);
    const Header& h = out.metadata();
    EXPECT_EQ(h.alignment, 64u);
    EXPECT_EQ(h.data_start % 64, 0u);
    for (const TensorInfo& t : h.tensors) EXPECT_EQ(t.offset % 64, 0u) << t.name;
}

TEST(SpliceGenerated, KQuantsFromAndToSplitSets) {
    TempDir dir;
    gen(fmt::format(
        "model --skeleton -o {} --blocks 5 --dense-blocks 1 --experts 16 --used 2 --embd 256 --expert-ff 256 "
        "--type-exps Q4_K --type-down Q6_K --exps-bias --alignment 64 --shards 3 --seed 3",
        dir.file("m")));
    std::map<int, std::vector<int64_t>> drop;
    for (int b = 1; b <= 4; ++b) drop[b] = {b, b + 1, 8, 9 + b, 15};  // 5 of 16; runs of various lengths
    const std::string kl = test::write_text(dir.file("k.json"), drop_json(drop));
    for (uint64_t count : {1u, 2u, 3u}) {
        SCOPED_TRACE(count);
        SpliceOptions o;
        o.split_mode = SplitMode::kCount;
        o.split_value = count;
        const std::string prefix = dir.file(fmt::format("o{}", count));
        auto s = test::splice_api(dir.file("m-00002-of-00003.gguf"), kl, prefix, o);
        ShardSet out = ShardSet::open(splice_output_paths(prefix, count).back());
        ASSERT_EQ(out.shards().size(), count);
        EXPECT_EQ(check_output(*s->opened->model, out, keep_of(drop, 16), 16),
                  4u * 7u);  // router, gate, up, down, 3 biases
        EXPECT_EQ(out.arch_uint("expert_count"), 11u);
        // Shard 1 keeps general.alignment = 64; the others carry only split.* and so use 32, each
        // consistent with what it declares.
        for (size_t i = 0; i < out.shards().size(); ++i) {
            const Header& h = out.shards()[i].header;
            EXPECT_EQ(h.alignment, i == 0 ? 64u : 32u);
            EXPECT_EQ(h.find("general.alignment") != nullptr, i == 0);
        }
    }
}

TEST(SpliceGenerated, TiedNoSharedKeepOne) {
    TempDir dir;
    gen(fmt::format(
        "model --skeleton -o {} --blocks 3 --dense-blocks 0 --experts 8 --used 1 --shared 0 --tied --seed 11",
        dir.file("m.gguf")));
    const std::map<int, std::vector<int64_t>> drop = {
        {0, {0, 1, 2, 3, 4, 5, 6}}, {1, {1, 2, 3, 4, 5, 6, 7}}, {2, {0, 1, 2, 4, 5, 6, 7}}};
    const std::string kl = test::write_text(dir.file("k.json"), drop_json(drop));
    auto s = test::splice_api(dir.file("m.gguf"), kl, dir.file("o"));
    ShardSet out = ShardSet::open(dir.file("o.gguf"));
    EXPECT_GT(check_output(*s->opened->model, out, keep_of(drop, 8), 8), 0u);
    EXPECT_EQ(out.arch_uint("expert_count"), 1u);
}

TEST(SpliceGenerated, UnevenGroupsAreRefused) {
    TempDir dir;
    gen(fmt::format(
        "model --skeleton -o {} --blocks 2 --dense-blocks 1 --experts 16 --used 4 --groups 4 --group-used 2",
        dir.file("m.gguf")));
    const std::string kl =
        test::write_text(dir.file("k.json"), R"({"drop": {"1": [0, 4, 5, 8, 12, 13, 14, 15]}})");
    try {
        test::splice_api(dir.file("m.gguf"), kl, dir.file("o"), {}, false);
        FAIL() << "uneven groups accepted";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()),
                  kl + ": block 1: group 0 (experts 0..3) keeps 3 experts, but every group must "
                       "keep 2 so that group-limited routing still works");
    }
}

}  // namespace
}  // namespace gguf_reap
