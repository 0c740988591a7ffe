// Width cuts of quantized models at quant-block granularity (splice --neuron-plan with a plan of whole
// aligned groups, docs/splice.md "Width pruning"): generated models whose ffn_down_exps is Q8_0, Q4_K,
// MXFP4 or IQ2_XXS, cut by block-aligned plans. Every kept quant block is compared raw with its source
// block, and for Q8_0 and Q4_K the kept columns are dequantised by this test's own code and compared
// with the source's columns. audit passes the outputs and names a damaged block; an unaligned plan is
// refused with a pointer to `plan-width --granularity block`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/dequant.h"
#include "format/ggml_types.h"
#include "format/npz.h"
#include "model/shard_set.h"
#include "test_util.h"
#include "width_test_support.h"

namespace gguf_reap {
namespace {

using test::has;
using test::make_plan;
using test::moe_blocks;
using test::Plan;
using test::TempDir;
using test::tensor_bytes;

// ---- this test's dequantisers (ggml-quants.c, dequantize_row_q8_0 / dequantize_row_q4_K) ----------

uint16_t u16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// Q8_0: 34-byte blocks of 32: f16 d, then 32 int8 q; x = d·q.
std::vector<float> dequant_q8_0(const uint8_t* row, int64_t n) {
    std::vector<float> y;
    for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = row + b * 34;
        const float d = half_to_float(u16(blk));
        for (int i = 0; i < 32; ++i) y.push_back(d * static_cast<float>(static_cast<int8_t>(blk[2 + i])));
    }
    return y;
}

// Q4_K: 144-byte blocks of 256: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles.
std::vector<float> dequant_q4_k(const uint8_t* row, int64_t n) {
    std::vector<float> y;
    for (int64_t b = 0; b < n / 256; ++b) {
        const uint8_t* blk = row + b * 144;
        const float d = half_to_float(u16(blk)), dmin = half_to_float(u16(blk + 2));
        const uint8_t* sc = blk + 4;
        const uint8_t* q = blk + 16;
        auto scale_min = [sc](int j, uint8_t& s, uint8_t& m) {
            if (j < 4) {
                s = sc[j] & 63;
                m = sc[j + 4] & 63;
            } else {
                s = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4));
                m = static_cast<uint8_t>((sc[j + 4] >> 4) | ((sc[j] >> 6) << 4));
            }
        };
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
            uint8_t s1, m1, s2, m2;
            scale_min(is, s1, m1);
            scale_min(is + 1, s2, m2);
            for (int l = 0; l < 32; ++l) y.push_back(d * s1 * (q[l] & 0xF) - dmin * m1);
            for (int l = 0; l < 32; ++l) y.push_back(d * s2 * (q[l] >> 4) - dmin * m2);
        }
    }
    return y;
}

// ---- the cases (plans: width_test_support.h, with group > 1) ------------------------------------

struct Case {
    std::string gen_args;
    int64_t k;
    int64_t group;  // the plan's alignment: the lcm of the cut tensors' block sizes
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << "gen model " << c.gen_args << ", K = " << c.k;
}

class SpliceWidthBlocks : public ::testing::TestWithParam<Case> {};

TEST_P(SpliceWidthBlocks, KeptBlocksAreTheSourceBlocks) {
    const Case& c = GetParam();
    TempDir dir;
    const std::string model = dir.file("src.gguf");
    ASSERT_EQ(test::run_gen(fmt::format("model --skeleton -o {} {}", model, c.gen_args)).exit_code, 0);
    const ShardSet src = ShardSet::open(model);
    const auto blocks = moe_blocks(src);
    const auto E = static_cast<int64_t>(*src.arch_uint("expert_count"));
    const auto n_ff = static_cast<int64_t>(*src.arch_uint("expert_feed_forward_length"));
    const Plan plan = make_plan(dir.file("plan.npz"), blocks, E, n_ff, c.k, 11, c.group);
    // Drop experts 2 and 5 too.
    nlohmann::json drop;
    for (int b : blocks) drop[std::to_string(b)] = {2, 5};
    const std::string kl = nlohmann::json{{"drop", drop}}.dump();
    test::write_file(dir.file("keep.json"), std::vector<uint8_t>(kl.begin(), kl.end()));
    std::vector<int64_t> kept;
    for (int64_t e = 0; e < E; ++e)
        if (e != 2 && e != 5) kept.push_back(e);

    const auto r = test::run_cli(fmt::format("splice {} --keeplist {} --neuron-plan {} -o {}", model,
                                             dir.file("keep.json"), plan.path, dir.file("out")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const ShardSet out = ShardSet::open(dir.file("out.gguf"));
    EXPECT_EQ(out.arch_uint("expert_feed_forward_length"), static_cast<uint64_t>(c.k));
    size_t checked = 0;
    for (int b : blocks) {
        const std::string name = fmt::format("blk.{}.ffn_down_exps.weight", b);
        SCOPED_TRACE(name);
        const TensorRef& sr = *src.find_tensor(name);
        const TensorRef& orf = *out.find_tensor(name);
        const TensorInfo& s = src.info(sr);
        const TensorInfo& o = out.info(orf);
        ASSERT_EQ(s.type, o.type);
        ASSERT_EQ(o.ne[0], c.k);
        ASSERT_EQ(o.ne[1], s.ne[1]);
        ASSERT_EQ(o.ne[2], static_cast<int64_t>(kept.size()));
        const GgmlType& t = *ggml_type(s.type);
        ASSERT_GT(t.block_size, 1);
        const auto a = tensor_bytes(src, sr), z = tensor_bytes(out, orf);
        const uint64_t src_row = *ggml_row_size(s.type, n_ff), out_row = *ggml_row_size(s.type, c.k);
        const auto rows = static_cast<uint64_t>(s.ne[1]);
        for (size_t ei = 0; ei < kept.size(); ++ei) {
            const std::vector<int64_t>& ch = plan.sorted.at({b, kept[ei]});
            for (uint64_t row = 0; row < rows; ++row) {
                const uint8_t* from = a.data() + (static_cast<uint64_t>(kept[ei]) * rows + row) * src_row;
                const uint8_t* to = z.data() + (ei * rows + row) * out_row;
                // Raw: output block j is source block ch[j·B] / B of the same row.
                for (int64_t j = 0; j < c.k / t.block_size; ++j) {
                    const int64_t q = ch[static_cast<size_t>(j * t.block_size)] / t.block_size;
                    ASSERT_EQ(std::memcmp(to + static_cast<uint64_t>(j * t.type_size),
                                          from + static_cast<uint64_t>(q * t.type_size),
                                          static_cast<size_t>(t.type_size)),
                              0)
                        << "expert " << kept[ei] << " row " << row << " block " << q;
                }
                // Elements: dequantised, output column j is source column ch[j].
                std::vector<float> x, y;
                if (s.type == kGgmlQ8_0) x = dequant_q8_0(from, n_ff), y = dequant_q8_0(to, c.k);
                if (s.type == kGgmlQ4_K) x = dequant_q4_k(from, n_ff), y = dequant_q4_k(to, c.k);
                if (x.empty()) continue;
                ASSERT_EQ(y.size(), static_cast<size_t>(c.k));
                for (size_t j = 0; j < y.size(); ++j)
                    ASSERT_EQ(std::memcmp(&y[j], &x[static_cast<size_t>(ch[j])], 4), 0)
                        << "expert " << kept[ei] << " row " << row << " column " << j << " = channel "
                        << ch[j];
                ++checked;
            }
        }
    }
    if (has(c.gen_args, "Q8_0") || has(c.gen_args, "Q4_K")) {
        EXPECT_GT(checked, 0u);
    }

    // audit proves it, and names a damaged kept block by its channels.
    const std::string audit = fmt::format("audit {} --source {} --keeplist {} --neuron-plan {}",
                                          dir.file("out.gguf"), model, dir.file("keep.json"), plan.path);
    const auto ok = test::run_cli(audit);
    EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
    const TensorRef& dr = *out.find_tensor(fmt::format("blk.{}.ffn_down_exps.weight", blocks.front()));
    auto bytes = test::read_file(dir.file("out.gguf"));
    const uint64_t at = dr.abs_offset + dr.nbytes - 1;  // last byte of the last kept expert's last block
    bytes[at] ^= 0x5A;
    test::write_file(dir.file("out.gguf"), bytes);
    const auto bad = test::run_cli(audit + " --json");
    EXPECT_EQ(bad.exit_code, 1) << bad.err;
    const auto j = nlohmann::json::parse(bad.out);
    const int64_t B =
        ggml_type(src.info(*src.find_tensor(fmt::format("blk.{}.ffn_down_exps.weight", blocks.front()))).type)
            ->block_size;
    const int64_t last = plan.sorted.at({blocks.front(), kept.back()}).back();
    bool named = false;
    for (const auto& f : j["findings"])
        named |= has(f.dump(), fmt::format("channels {}..{} (one quant block)", last - B + 1, last)) &&
                 f["offset"] == at;
    EXPECT_TRUE(named) << bad.out;
}

INSTANTIATE_TEST_SUITE_P(
    Models, SpliceWidthBlocks,
    ::testing::Values(
        // deepseek2, one shared expert 64 wide: K must divide 64 and be a multiple of 32.
        Case{"--type-exps Q8_0", 32, 32},
        // K-quants and IQ2_XXS hold 256 values per block: rows of 512, K = 256.
        Case{"--arch qwen3moe --type-exps Q4_K --embd 256 --expert-ff 512 --shared 0", 256, 256},
        Case{"--arch qwen3moe --type-exps F16 --type-down IQ2_XXS --embd 256 --expert-ff 512 --shared 0", 256,
             256},
        // gpt-oss: MXFP4 experts with F32 biases (blocks of 1) cut alongside: lcm 32.
        Case{"--arch gpt-oss --type-exps MXFP4 --exps-bias --shared 0 --router-bias", 32, 32}),
    [](const ::testing::TestParamInfo<Case>& i) { return fmt::format("case{}", i.index); });

TEST(SpliceWidthBlocksRefusal, UnalignedPlanOnAQuantizedDownProjection) {
    TempDir dir;
    const std::string model = dir.file("q.gguf");
    ASSERT_EQ(test::run_gen(fmt::format("model --skeleton -o {} --type-exps Q8_0", model)).exit_code, 0);
    const ShardSet src = ShardSet::open(model);
    // Block-aligned except for block 1 expert 3, which keeps channels 0..30 and 63.
    Plan plan = make_plan(dir.file("plan.npz"), moe_blocks(src), 16, 64, 32, 3, 32);
    std::vector<uint16_t> channels;
    for (const auto& [pair, row] : plan.sorted) {
        std::vector<int64_t> r = row;
        if (pair == std::make_pair(moe_blocks(src).front(), int64_t{3})) {
            std::iota(r.begin(), r.end(), 0);
            r.back() = 63;
        }
        for (int64_t c : r) channels.push_back(static_cast<uint16_t>(c));
    }
    const auto pairs = static_cast<int64_t>(plan.sorted.size());
    write_npz(plan.path, {{"channels", NpyArray::u16({pairs, 32}, channels)}});
    const auto r =
        test::run_cli(fmt::format("splice {} --neuron-plan {} -o {}", model, plan.path, dir.file("out")));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(
        r.err,
        fmt::format("gguf-reap: error: {}: tensor 'blk.1.ffn_down_exps.weight' is Q8_0, whose rows hold "
                    "blocks of 32 values: a width cut keeps whole blocks only, but {} keeps 31 of the 32 "
                    "channels 0..31 of block 1 expert 3: make the plan with `plan-width --granularity "
                    "block --model {}` (or width-splice a BF16/F16 copy and requantise it with "
                    "llama-quantize)\n",
                    model, plan.path, model));
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.gguf")));
    // estimate still gives the figures, for the requantising path.
    const auto e = test::run_cli(fmt::format("estimate {} --neuron-plan {} --json", model, plan.path));
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_EQ(nlohmann::json::parse(e.out)["after_requantised"], true);
}

}  // namespace
}  // namespace gguf_reap
