// plan-width: channel ranking (score descending, ties by id ascending, float32 sums in domain order),
// the plan .npz and receipt, never-routed experts, both imatrix formats, and every refusal, on
// hand-built imatrices whose values are chosen so that each rule decides the outcome.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/npz.h"
#include "gguf_builder.h"
#include "gguf_reap/error.h"
#include "gguf_reap/plan_width.h"
#include "gguf_reap/width.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::TensorSpec;

struct Entry {
    std::vector<float> values;  // [E][W]
    std::vector<float> counts;  // [E]
};

// A GGUF imatrix holding one ffn_down_exps entry per block (tensors sorted by name, as llama-imatrix).
void write_gguf_imatrix(const std::string& path, const std::map<int, Entry>& blocks, int64_t W, int64_t E) {
    std::map<std::string, const std::vector<float>*> data;
    std::vector<TensorSpec> specs;
    std::map<std::string, std::pair<std::string, bool>> order;
    for (const auto& [b, e] : blocks) {
        const std::string n = "blk." + std::to_string(b) + ".ffn_down_exps.weight";
        data[n + ".in_sum2"] = &e.values;
        data[n + ".counts"] = &e.counts;
    }
    for (const auto& [name, v] : data) {
        const bool sums = name.size() > 8 && name.substr(name.size() - 8) == ".in_sum2";
        specs.push_back({name, sums ? std::vector<int64_t>{W, E} : std::vector<int64_t>{1, E}, test::kF32});
    }
    const std::vector<Kv> kvs{
        Kv::make_string("general.type", "imatrix"), Kv::make_string_array("imatrix.datasets", {"test"}),
        Kv::make_u32("imatrix.chunk_count", 1), Kv::make_u32("imatrix.chunk_size", 512)};
    test::BuiltGguf g = test::build_gguf(kvs, specs);
    size_t i = 0;
    for (const auto& [name, v] : data) {
        std::memcpy(g.bytes.data() + g.data_start + g.tensors[i].offset, v->data(), v->size() * 4);
        ++i;
    }
    test::write_file(path, g.bytes);
}

// A legacy .dat imatrix (current writer layout): per block entry, ncall and mean × ncall values.
void write_dat_imatrix(const std::string& path, const std::map<int, std::vector<float>>& blocks,
                       int32_t ncall) {
    test::Bytes b;
    b.i32(static_cast<int32_t>(blocks.size()));
    for (const auto& [blk, v] : blocks) {
        const std::string n = "blk." + std::to_string(blk) + ".ffn_down_exps.weight";
        b.i32(static_cast<int32_t>(n.size()))
            .raw(n.data(), n.size())
            .i32(ncall)
            .i32(static_cast<int32_t>(v.size()));
        for (float x : v) b.f32(x);
    }
    test::write_file(path, b.data());
}

class PlanWidthTest : public ::testing::Test {
  protected:
    PlanWidthRequest opts(int64_t k, std::vector<std::pair<std::string, std::string>> domains) {
        PlanWidthRequest o;
        for (auto& [n, p] : domains) o.imatrices.push_back({n, p});
        o.k = k;
        o.out = dir_.file("plan.npz");
        o.tool_version = "gguf-reap test";
        return o;
    }
    std::string usage_error(const PlanWidthRequest& o) {
        try {
            ops::plan_width(o);
        } catch (const UsageError& e) {
            std::string what = test::shown(e);
            for (size_t at; (at = what.find(dir_.path().string() + "/")) != std::string::npos;)
                what.erase(at, dir_.path().string().size() + 1);
            return what;
        }
        return "";
    }
    std::vector<int64_t> channels_row(size_t pair) {
        const auto a = read_npz(dir_.file("plan.npz"));
        const NpyArray& ch = a.at("channels");
        const std::vector<int64_t> all = ch.to_int64();
        const size_t k = static_cast<size_t>(ch.shape[1]);
        return {all.begin() + static_cast<std::ptrdiff_t>(pair * k),
                all.begin() + static_cast<std::ptrdiff_t>((pair + 1) * k)};
    }
    test::TempDir dir_;
};

TEST(PlanWidthRanking, ScoreDescendingTiesByChannelId) {
    const float s[] = {1, 3, 3, 0, 3, 2};
    EXPECT_EQ(top_channels(s, 6, 3), (std::vector<int32_t>{1, 2, 4}));
    EXPECT_EQ(top_channels(s, 6, 5), (std::vector<int32_t>{1, 2, 4, 5, 0}));
    const float zeros[] = {0, 0, 0, 0};
    EXPECT_EQ(top_channels(zeros, 4, 2), (std::vector<int32_t>{0, 1}));
}

TEST(PlanWidthRanking, BlockGroupsBySummedScoreTiesByGroupIndex) {
    // Groups of 2: {0,1} = 4, {2,3} = 5, {4,5} = 5, {6,7} = 1. The best two: 1 and 2 (5 each); with a
    // tie at the cut, the lower group wins: the best one is group 1.
    const float s[] = {3, 1, 0, 5, 4, 1, 1, 0};
    EXPECT_EQ(top_channel_groups(s, 8, 4, 2), (std::vector<int32_t>{2, 3, 4, 5}));
    EXPECT_EQ(top_channel_groups(s, 8, 2, 2), (std::vector<int32_t>{2, 3}));
    EXPECT_EQ(top_channel_groups(s, 8, 6, 2), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
    // Channel 3 alone (5) would be the best single channel; granularity 1 ranks channels.
    EXPECT_EQ(top_channel_groups(s, 8, 2, 1), (std::vector<int32_t>{3, 4}));
    const float zeros[] = {0, 0, 0, 0};
    EXPECT_EQ(top_channel_groups(zeros, 4, 2, 2), (std::vector<int32_t>{0, 1}));
}

TEST(PlanWidthRanking, ReceiptPathBesideThePlan) {
    EXPECT_EQ(default_receipt_path("out/plan.npz"), "out/plan.json");
    EXPECT_EQ(default_receipt_path("plan"), "plan.json");
    EXPECT_EQ(default_receipt_path(".npz"), ".npz.json");
}

TEST_F(PlanWidthTest, PlanHoldsTopChannelsInRankOrderWithReceipt) {
    // E = 2, W = 4, blocks 1 and 3. Expert 1 of block 3 was never routed (count 0, zero energy).
    write_gguf_imatrix(
        dir_.file("a.gguf"),
        {{1, {{1, 4, 2, 3, /**/ 5, 5, 0, 1}, {10, 10}}}, {3, {{0, 2, 8, 6, /**/ 0, 0, 0, 0}, {7, 0}}}}, 4, 2);
    const PlanWidthResult r = ops::plan_width(opts(2, {{"chat", dir_.file("a.gguf")}}));
    EXPECT_EQ(r.k, 2);
    EXPECT_EQ(r.native_width, 4);
    EXPECT_EQ(r.expert_count, 2);
    EXPECT_EQ(r.blocks, (std::vector<int>{1, 3}));

    const auto a = read_npz(dir_.file("plan.npz"));
    EXPECT_EQ(a.at("channels").descr, "<u2");
    EXPECT_EQ(a.at("channels").shape, (std::vector<int64_t>{4, 2}));
    EXPECT_EQ(a.at("channels").to_int64(), (std::vector<int64_t>{1, 3, 0, 1, 2, 3, 0, 1}));
    EXPECT_EQ(a.at("k").to_int64(), (std::vector<int64_t>{2}));
    EXPECT_EQ(a.at("block").to_int64(), (std::vector<int64_t>{1, 1, 3, 3}));
    EXPECT_EQ(a.at("expert").to_int64(), (std::vector<int64_t>{0, 1, 0, 1}));
    std::vector<double> kept(4);
    std::memcpy(kept.data(), a.at("energy_retained").data.data(), 32);
    EXPECT_DOUBLE_EQ(kept[0], 7.0 / 10);
    EXPECT_DOUBLE_EQ(kept[1], 10.0 / 11);
    EXPECT_DOUBLE_EQ(kept[2], 14.0 / 16);
    EXPECT_TRUE(std::isnan(kept[3]));
    EXPECT_EQ(r.unrouted, (std::vector<uint8_t>{0, 0, 0, 1}));

    // The shared reader takes the plan (rows sorted ascending: the output order of a width splice).
    const NeuronPlan p = read_neuron_plan(dir_.file("plan.npz"), {1, 3}, 2, 4);
    EXPECT_EQ(std::vector<int32_t>(p.row(1, 0), p.row(1, 0) + 2), (std::vector<int32_t>{2, 3}));

    std::ifstream in(dir_.file("plan.json"));
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j["tool"], "gguf-reap test");
    EXPECT_EQ(j["k"], 2);
    EXPECT_EQ(j["native_width"], 4);
    EXPECT_EQ(j["plan"]["sha256"], test::sha256_file_range(dir_.file("plan.npz"), 0,
                                                           test::read_file(dir_.file("plan.npz")).size()));
    EXPECT_EQ(j["inputs"][0]["sha256"],
              test::sha256_file_range(dir_.file("a.gguf"), 0, test::read_file(dir_.file("a.gguf")).size()));
    EXPECT_EQ(j["inputs"][0]["format"], "gguf");
    EXPECT_TRUE(j["model"].is_null());
    EXPECT_EQ(j["unrouted_pairs"], 1);
    EXPECT_EQ(j["blocks"][1]["block"], 3);
    EXPECT_EQ(j["blocks"][1]["unrouted_experts"], nlohmann::json::array({1}));
    EXPECT_DOUBLE_EQ(j["blocks"][0]["energy_retained"]["min"].get<double>(), 0.7);
    EXPECT_DOUBLE_EQ(j["blocks"][0]["energy_retained"]["median"].get<double>(), (0.7 + 10.0 / 11) / 2);
    EXPECT_DOUBLE_EQ(j["blocks"][1]["energy_retained"]["max"].get<double>(), 14.0 / 16);
}

TEST_F(PlanWidthTest, SumIsFloat32InDomainOrder) {
    // Channel 1 gets 2^24 + 1 + 1: in float32 taken in order A, B, C each +1 rounds away (ties to even),
    // leaving a tie with channel 0 (2^24) that the lower id wins. In order C, B, A the two 1s add first
    // and channel 1 wins. A double sum would pick channel 1 both times.
    const float big = 16777216.0f;
    write_gguf_imatrix(dir_.file("a.gguf"), {{1, {{big, big}, {1}}}}, 2, 1);
    write_gguf_imatrix(dir_.file("b.gguf"), {{1, {{0, 1}, {1}}}}, 2, 1);
    write_gguf_imatrix(dir_.file("c.gguf"), {{1, {{0, 1}, {1}}}}, 2, 1);
    ops::plan_width(
        opts(1, {{"a", dir_.file("a.gguf")}, {"b", dir_.file("b.gguf")}, {"c", dir_.file("c.gguf")}}));
    EXPECT_EQ(channels_row(0), (std::vector<int64_t>{0}));
    PlanWidthRequest o =
        opts(1, {{"c", dir_.file("c.gguf")}, {"b", dir_.file("b.gguf")}, {"a", dir_.file("a.gguf")}});
    o.force = true;
    ops::plan_width(o);
    EXPECT_EQ(channels_row(0), (std::vector<int64_t>{1}));
}

TEST_F(PlanWidthTest, LegacyDatWithExpertCountFromGgufAndDeadExperts) {
    // The .dat's expert 0 is never routed (every value = ncall = 3): it adds nothing, so the GGUF
    // domain alone decides expert 0; expert 1's .dat values decide its order.
    write_gguf_imatrix(dir_.file("a.gguf"), {{1, {{1, 2, 3, /**/ 0, 0, 0}, {5, 0}}}}, 3, 2);
    write_dat_imatrix(dir_.file("b.dat"), {{1, {3, 3, 3, /**/ 9, 1, 4}}}, 3);
    const PlanWidthResult r =
        ops::plan_width(opts(2, {{"a", dir_.file("a.gguf")}, {"b", dir_.file("b.dat")}}));
    EXPECT_EQ(channels_row(0), (std::vector<int64_t>{2, 1}));
    EXPECT_EQ(channels_row(1), (std::vector<int64_t>{0, 2}));
    ASSERT_EQ(r.notes.size(), 1u);
    EXPECT_EQ(r.notes[0],
              "b: blk.1.ffn_down_exps.weight marks expert(s) 0 as never routed; they add no energy");
}

TEST_F(PlanWidthTest, LegacyDatWithoutABlockIsNotedAndScoredFromTheOthers) {
    // The 2024-25 .dat writer skipped every entry with a never-routed expert: b.dat has no block 2, so
    // a.gguf alone scores it (rank says the same, in the same words: services/imatrix_domains.cpp).
    write_gguf_imatrix(dir_.file("a.gguf"), {{1, {{1, 2, 3, 4}, {1}}}, {2, {{4, 3, 2, 1}, {1}}}}, 4, 1);
    write_dat_imatrix(dir_.file("b.dat"), {{1, {9, 0, 0, 0}}}, 1);
    const PlanWidthResult r =
        ops::plan_width(opts(1, {{"a", dir_.file("a.gguf")}, {"b", dir_.file("b.dat")}}));
    EXPECT_EQ(channels_row(0), (std::vector<int64_t>{0}));  // block 1: b's 9 outweighs a's 4
    EXPECT_EQ(channels_row(1), (std::vector<int64_t>{0}));  // block 2: a's alone
    ASSERT_EQ(r.notes.size(), 1u);
    EXPECT_EQ(r.notes[0],
              "b: no entry for block(s) 2: the 2024-25 .dat writer skipped every entry in which some expert "
              "was never routed, so these blocks hold a dead expert that this file cannot name; they are "
              "ranked from the other domains");
}

TEST_F(PlanWidthTest, LegacyAloneNeedsTheExpertCount) {
    write_dat_imatrix(dir_.file("b.dat"), {{1, {1, 2, 3, 4}}}, 1);
    EXPECT_EQ(
        usage_error(opts(1, {{"b", dir_.file("b.dat")}})),
        "b.dat: the legacy .dat format does not store the expert count of blk.1.ffn_down_exps.weight: give "
        "--model (or a GGUF imatrix of the same model)");
}

TEST_F(PlanWidthTest, KOutsideTheWidthWithoutModel) {
    write_gguf_imatrix(dir_.file("a.gguf"), {{1, {{1, 2, 3, 4}, {1}}}}, 4, 1);
    EXPECT_EQ(
        usage_error(opts(5, {{"a", dir_.file("a.gguf")}})),
        "K = 5 is not a legal expert width for a.gguf: it exceeds the imatrix's expert width 4; legal widths "
        "are 1 to 4 (without --model only this range is checked; give --model to apply the block-size and "
        "shared-expert rules)");
    EXPECT_EQ(usage_error(opts(0, {{"a", dir_.file("a.gguf")}})).substr(0, 80),
              "K = 0 is not a legal expert width for a.gguf: an expert keeps at least one chann");
}

TEST_F(PlanWidthTest, ExistingOutputsNeedForce) {
    write_gguf_imatrix(dir_.file("a.gguf"), {{1, {{1, 2, 3, 4}, {1}}}}, 4, 1);
    test::write_file(dir_.file("plan.json"), {'{', '}'});
    PlanWidthRequest o = opts(2, {{"a", dir_.file("a.gguf")}});
    EXPECT_EQ(usage_error(o), "plan.json exists; use --force to overwrite it");
    EXPECT_FALSE(std::filesystem::exists(dir_.file("plan.npz")));
    o.force = true;
    EXPECT_EQ(usage_error(o), "");
    EXPECT_GT(test::read_file(dir_.file("plan.json")).size(), 100u);
    o.out = dir_.file("a.gguf");
    o.receipt = dir_.file("r.json");
    EXPECT_EQ(usage_error(o), "a.gguf is an input (a.gguf): refusing to write over it");
}

TEST_F(PlanWidthTest, BadValuesAreNamed) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    write_gguf_imatrix(dir_.file("a.gguf"), {{1, {{1, 2, /**/ nan, 4}, {1, 1}}}}, 2, 2);
    try {
        ops::plan_width(opts(1, {{"a", dir_.file("a.gguf")}}));
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_EQ(e.field(), "entry 'blk.1.ffn_down_exps.weight' expert 1");
        EXPECT_EQ(e.detail(), "holds NaN values");
    }
    write_gguf_imatrix(dir_.file("b.gguf"), {{1, {{1, -2}, {1}}}}, 2, 1);
    try {
        ops::plan_width(opts(1, {{"b", dir_.file("b.gguf")}}));
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_EQ(e.detail(), "holds negative or infinite values (sums of squares cannot be)");
    }
}

TEST_F(PlanWidthTest, ImatricesOfDifferentShapes) {
    write_gguf_imatrix(dir_.file("a.gguf"), {{1, {{1, 2, 3, 4}, {1}}}}, 4, 1);
    write_gguf_imatrix(dir_.file("b.gguf"), {{1, {{1, 2, 3, 4}, {1, 1}}}}, 2, 2);
    EXPECT_EQ(usage_error(opts(1, {{"a", dir_.file("a.gguf")}, {"b", dir_.file("b.gguf")}})),
              "b.gguf: blk.1.ffn_down_exps.weight has 2 experts, but other entries have 1");
    write_gguf_imatrix(dir_.file("c.gguf"), {{2, {{1, 2, 3, 4}, {1}}}}, 4, 1);
    EXPECT_EQ(usage_error(opts(1, {{"a", dir_.file("a.gguf")}, {"c", dir_.file("c.gguf")}})),
              "a.gguf: has no ffn_down_exps entry for MoE block(s) 2 that other imatrices have");
}

class PlanWidthModelTest : public PlanWidthTest {
  protected:
    // deepseek2, MoE blocks 1 and 2, E = 2, expert width 64 (F16), one shared expert 64 wide.
    void write_model(int64_t E = 2, int32_t type = test::kF16) {
        const std::vector<Kv> kvs{Kv::make_string("general.architecture", "deepseek2"),
                                  Kv::make_u32("deepseek2.block_count", 3),
                                  Kv::make_u32("deepseek2.expert_count", static_cast<uint32_t>(E)),
                                  Kv::make_u32("deepseek2.expert_used_count", 1),
                                  Kv::make_u32("deepseek2.expert_shared_count", 1),
                                  Kv::make_u32("deepseek2.expert_feed_forward_length", 64)};
        std::vector<TensorSpec> t{{"token_embd.weight", {32, 16}, test::kF32}};
        for (int b = 1; b <= 2; ++b) {
            for (auto& s : test::moe_block(b, E, 32, 64, type)) t.push_back(s);
            t.push_back({"blk." + std::to_string(b) + ".ffn_down_shexp.weight", {64, 32}, test::kF16});
        }
        test::write_gguf(dir_.file("m.gguf"), kvs, t);
    }
    void write_imatrix(int64_t E = 2) {
        std::vector<float> v(static_cast<size_t>(64 * E));
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 64);
        write_gguf_imatrix(dir_.file("a.gguf"),
                           {{1, {v, std::vector<float>(E, 1)}}, {2, {v, std::vector<float>(E, 1)}}}, 64, E);
    }
};

TEST_F(PlanWidthModelTest, WidthRulesApply) {
    write_model();
    write_imatrix();
    PlanWidthRequest o = opts(48, {{"a", dir_.file("a.gguf")}});
    o.model = dir_.file("m.gguf");
    EXPECT_EQ(usage_error(o),
              "K = 48 is not a legal expert width for m.gguf: the loader sizes the shared experts as "
              "deepseek2.expert_feed_forward_length × deepseek2.expert_shared_count, so "
              "deepseek2.expert_shared_count must become W / K = 64 / 48, which is not a whole number; legal "
              "widths are {1, 2, 4, 8, 16, 32, 64}");
    o.k = 32;
    const PlanWidthResult r = ops::plan_width(o);
    EXPECT_EQ(r.receipt["model"]["legal_widths"], nlohmann::json::array({1, 2, 4, 8, 16, 32, 64}));
    EXPECT_EQ(r.receipt["model"]["architecture"], "deepseek2");
    // Values (i·37) mod 64 over expert 0's channels: channel c scores (37c) mod 64; the top one is c
    // with 37c ≡ 63 (mod 64), i.e. c = 63·37⁻¹ = 63·45 mod 64 = 19.
    EXPECT_EQ(channels_row(0)[0], 19);
}

TEST_F(PlanWidthModelTest, ImatrixOfAnotherModel) {
    write_model(2);
    write_imatrix(4);
    PlanWidthRequest o = opts(32, {{"a", dir_.file("a.gguf")}});
    o.model = dir_.file("m.gguf");
    EXPECT_EQ(usage_error(o),
              "a.gguf: blk.1.ffn_down_exps.weight has 4 experts, but m.gguf has 2: the imatrix was made for "
              "another "
              "model");
}

TEST_F(PlanWidthModelTest, BlockGranularityKeepsWholeQuantBlocks) {
    // Q8_0 experts (blocks of 32): the two groups of each expert are channels 0..31 and 32..63.
    write_model(2, test::kQ8_0);
    // Expert 0: channel 40 alone holds 100, but group 0 holds more in sum (32 × 4 = 128).
    std::vector<float> v(128, 0.0f);
    for (int c = 0; c < 32; ++c) v[static_cast<size_t>(c)] = 4;                           // group 0: 128
    v[40] = 100;                                                                          // group 1: 100
    for (int c = 0; c < 64; ++c) v[static_cast<size_t>(64 + c)] = static_cast<float>(c);  // expert 1
    write_gguf_imatrix(dir_.file("a.gguf"), {{1, {v, {1, 1}}}, {2, {v, {1, 1}}}}, 64, 2);
    PlanWidthRequest o = opts(32, {{"a", dir_.file("a.gguf")}});
    o.granularity = Granularity::kBlock;
    EXPECT_EQ(usage_error(o),
              "--granularity block needs --model: the block size comes from the model's tensor types");
    o.model = dir_.file("m.gguf");
    o.k = 16;
    EXPECT_EQ(usage_error(o),
              "K = 16 is not a legal expert width for m.gguf: rows of ffn_down_exps hold whole blocks of 32 "
              "elements, so K must be a multiple of 32; legal widths are {32, 64}");
    o.k = 32;
    const PlanWidthResult r = ops::plan_width(o);
    EXPECT_EQ(r.group, 32);
    // Expert 0 keeps group 0 (128 of 228); the per-channel plan would keep channel 40 and the 31
    // lowest-numbered of group 0 (100 + 31 × 4 = 224 of 228). Expert 1 keeps group 1 (channels 32..63).
    std::vector<int64_t> g0(32), g1(32);
    for (int c = 0; c < 32; ++c) g0[static_cast<size_t>(c)] = c, g1[static_cast<size_t>(c)] = 32 + c;
    EXPECT_EQ(channels_row(0), g0);
    EXPECT_EQ(channels_row(1), g1);
    EXPECT_DOUBLE_EQ(r.retained[0], 128.0 / 228);
    EXPECT_DOUBLE_EQ(r.retained_channel[0], 224.0 / 228);
    // Expert 1: channels 0..63 score c; group 1 holds 32·32 + (0 + ... + 31) = 1520 of 2016, which is
    // also the per-channel top 32.
    EXPECT_DOUBLE_EQ(r.retained[1], 1520.0 / 2016);
    EXPECT_DOUBLE_EQ(r.retained_channel[1], 1520.0 / 2016);
    const auto& j = r.receipt;
    EXPECT_EQ(j["granularity"]["unit"], "block");
    EXPECT_EQ(j["granularity"]["group"], 32);
    EXPECT_EQ(j["granularity"]["block_size_from"],
              nlohmann::json::array({"blk.1.ffn_down_exps.weight Q8_0 (32)"}));
    EXPECT_DOUBLE_EQ(j["blocks"][0]["energy_retained"]["min"].get<double>(), 128.0 / 228);
    EXPECT_DOUBLE_EQ(j["blocks"][0]["energy_retained_by_channel"]["max"].get<double>(), 224.0 / 228);
    const auto a = read_npz(dir_.file("plan.npz"));
    EXPECT_EQ(a.at("group").to_int64(), (std::vector<int64_t>{32}));
    // splice, audit and estimate read it as any plan.
    const NeuronPlan p = read_neuron_plan(dir_.file("plan.npz"), {1, 2}, 2, 64);
    EXPECT_EQ(std::vector<int32_t>(p.row(0, 0), p.row(0, 0) + 32),
              std::vector<int32_t>(g0.begin(), g0.end()));
}

}  // namespace
}  // namespace gguf_reap
