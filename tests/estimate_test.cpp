// estimate: every figure checked against values computed here from the generated model's shapes (the
// generator's options), not from the code under test; KV cache per token for MLA and standard attention.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/npz.h"
#include "gguf_builder.h"
#include "gguf_reap/error.h"
#include "gguf_reap/estimate.h"
#include "gguf_reap/version.h"
#include "model/shard_set.h"
#include "services/model_figures.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::TempDir;

// The model: 3 blocks (blk.0 dense, blk.1..2 MoE), 8 experts, 2 used, 1 shared, embd 64, ff 128,
// expert ff 32, vocab 256, 4 heads. gate/up experts Q8_0 (a 64-element row is 2 blocks of 34 bytes),
// everything else F16 except the F32 router and norms.
std::string gen_args(int expert_ff = 32, const char* type_down = "F16") {
    return fmt::format(
        "model --skeleton --blocks 3 --dense-blocks 1 --experts 8 --used 2 --shared 1 --embd 64 --ff 128 "
        "--expert-ff {} "
        "--vocab 256 --heads 4 --type-exps Q8_0 --type-down {} --type-attn F16 --type-embd F16 "
        "--type-output F16 --type-shexp F16 --type-dense F16",
        expert_ff, type_down);
}

// Shape arithmetic for that model with `n` experts per block and expert width `k`.
struct Hand {
    uint64_t n = 8, k = 32;
    static constexpr uint64_t kEmbd = 64, kFf = 128, kVocab = 256, kMoeBlocks = 2, kUsed = 2;
    static constexpr uint64_t kQ8Row64 = 68;  // Q8_0 row of 64 elements
    uint64_t norm() const { return kEmbd * 4; }
    uint64_t attn() const { return 4 * kEmbd * kEmbd * 2; }
    uint64_t block_common() const { return 2 * norm() + attn(); }
    uint64_t dense_ffn() const { return 3 * kEmbd * kFf * 2; }
    uint64_t router() const { return kEmbd * n * 4; }
    uint64_t gate_slab() const { return kQ8Row64 * k; }  // gate and up alike
    uint64_t down_slab() const { return k * kEmbd * 2; }
    uint64_t shexp() const { return 3 * kEmbd * 32 * 2; }  // shared width stays 32
    uint64_t embd_table() const { return kEmbd * kVocab * 2; }
    uint64_t moe_block() const {
        return block_common() + router() + n * (2 * gate_slab() + down_slab()) + shexp();
    }
    uint64_t tensor_bytes() const {
        return embd_table() + block_common() + dense_ffn() + kMoeBlocks * moe_block() + norm() + embd_table();
    }
    uint64_t parameters() const {
        const uint64_t common = 2 * kEmbd + 4 * kEmbd * kEmbd;
        const uint64_t moe = common + kEmbd * n + n * (2 * kEmbd * k + k * kEmbd) + 3 * kEmbd * 32;
        return kEmbd * kVocab + common + 3 * kEmbd * kFf + kMoeBlocks * moe + kEmbd + kEmbd * kVocab;
    }
    uint64_t active_parameters() const {
        const uint64_t common = 2 * kEmbd + 4 * kEmbd * kEmbd;
        const uint64_t moe = common + kEmbd * n + kUsed * (2 * kEmbd * k + k * kEmbd) + 3 * kEmbd * 32;
        return kEmbd + common + 3 * kEmbd * kFf + kMoeBlocks * moe + kEmbd + kEmbd * kVocab;
    }
    uint64_t decode_dense() const {
        // One token_embd row (F16), every non-expert tensor whole, the output projection whole.
        return kEmbd * 2 + 3 * block_common() + dense_ffn() + kMoeBlocks * shexp() + norm() + embd_table();
    }
    uint64_t decode_router() const { return kMoeBlocks * router(); }
    uint64_t decode_experts() const { return kMoeBlocks * kUsed * (2 * gate_slab() + down_slab()); }
    uint64_t replicated() const { return 3 * 2 * norm() + norm() + kMoeBlocks * router(); }
    uint64_t residency(uint64_t tp) const {
        return (tensor_bytes() - replicated() + tp - 1) / tp + replicated();
    }
};

// Standard attention of the generated model: 4 KV heads (head_count_kv = heads) of 64 / 4 = 16.
constexpr uint64_t kKvPerToken = 3 * 4 * (16 + 16) * 2;

class EstimateGenerated : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir();
        auto r = test::run_gen(fmt::format("{} -o {}", gen_args(), dir_->file("m.gguf")));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        // Keep experts 4..7 of block 1 and 0..3 of block 2.
        std::ofstream(dir_->file("keep.json")) << R"({"drop": {"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}})";
        write_plan(dir_->file("plan16.npz"), 16);
        write_plan(dir_->file("plan12.npz"), 12);
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    // A plan for both MoE blocks × 8 experts keeping channels k-1 .. 0 (rank order, best first).
    static void write_plan(const std::string& path, int k) {
        std::vector<uint16_t> ch;
        for (int pair = 0; pair < 2 * 8; ++pair)
            for (int c = k - 1; c >= 0; --c) ch.push_back(static_cast<uint16_t>(c));
        write_npz(path, {{"channels", NpyArray::u16({16, k}, ch)}, {"k", NpyArray::i64({1}, {k})}});
    }
    static std::string file(const std::string& name) { return dir_->file(name); }
    static EstimateResult run(EstimateRequest in) {
        ShardSet m = ShardSet::open(file("m.gguf"));
        in.tool_version = std::string(GGUF_REAP_TOOL);
        return estimate_model(m, in);
    }
    static TempDir* dir_;
};
TempDir* EstimateGenerated::dir_ = nullptr;

void expect_figures(const ModelFigures& f, const Hand& h) {
    EXPECT_EQ(f.expert_count, h.n);
    EXPECT_EQ(f.expert_width, h.k);
    EXPECT_EQ(f.tensor_bytes, h.tensor_bytes());
    EXPECT_EQ(f.parameters, h.parameters());
    EXPECT_EQ(f.active_parameters, h.active_parameters());
    EXPECT_EQ(f.decode_dense, h.decode_dense());
    EXPECT_EQ(f.decode_router, h.decode_router());
    EXPECT_EQ(f.decode_experts, h.decode_experts());
    EXPECT_EQ(f.replicated_bytes, h.replicated());
    EXPECT_EQ(f.nextn_bytes, 0u);
    for (uint64_t tp : {1, 2, 3, 4, 8}) EXPECT_EQ(f.residency(tp), h.residency(tp)) << "tp " << tp;
}

TEST_F(EstimateGenerated, BeforeFiguresMatchShapeArithmetic) {
    const EstimateResult e = run({});
    expect_figures(e.before, Hand{});
    EXPECT_EQ(e.before.file_bytes, std::filesystem::file_size(file("m.gguf")));
    EXPECT_TRUE(e.before.file_bytes_exact);
    EXPECT_FALSE(e.after.has_value());
    EXPECT_EQ(e.moe_blocks, 2u);
    EXPECT_EQ(e.tp, (std::vector<uint64_t>{1, 2, 4, 8}));
}

TEST_F(EstimateGenerated, KeeplistFiguresAndExactFileSizeAgreeWithSpliceDryRun) {
    EstimateRequest in;
    in.keeplist_path = file("keep.json");
    const EstimateResult e = run(in);
    ASSERT_TRUE(e.after.has_value());
    expect_figures(*e.after, Hand{4, 32});
    EXPECT_TRUE(e.after->file_bytes_exact);

    auto r = test::run_cli(fmt::format("splice {} --keeplist {} -o {} --dry-run --json", file("m.gguf"),
                                       file("keep.json"), file("out")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(e.after->file_bytes, j["bytes_written"].get<uint64_t>());
}

// The after-size is splice's: `splice --dry-run --json` with the same inputs writes exactly that many bytes.
uint64_t spliced_bytes(const std::string& args) {
    auto r = test::run_cli(fmt::format("splice {} --dry-run --json", args));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return 0;
    return nlohmann::json::parse(r.out)["bytes_written"].get<uint64_t>();
}

TEST_F(EstimateGenerated, NeuronPlanNarrowsExpertTensors) {
    EstimateRequest in;
    in.neuron_plan_path = file("plan16.npz");
    const EstimateResult e = run(in);
    ASSERT_TRUE(e.after.has_value());
    expect_figures(*e.after, Hand{8, 16});
    EXPECT_FALSE(e.after_requantised);
    EXPECT_TRUE(e.after->file_bytes_exact);
    EXPECT_EQ(e.after->file_bytes, spliced_bytes(fmt::format("{} --neuron-plan {} -o {}", file("m.gguf"),
                                                             file("plan16.npz"), file("o"))));
}

TEST_F(EstimateGenerated, KeeplistAndPlanTogether) {
    EstimateRequest in;
    in.keeplist_path = file("keep.json");
    in.neuron_plan_path = file("plan16.npz");
    const EstimateResult e = run(in);
    ASSERT_TRUE(e.after.has_value());
    expect_figures(*e.after, Hand{4, 16});
    EXPECT_TRUE(e.after->file_bytes_exact);
    EXPECT_EQ(e.after->file_bytes,
              spliced_bytes(fmt::format("{} --keeplist {} --neuron-plan {} -o {}", file("m.gguf"),
                                        file("keep.json"), file("plan16.npz"), file("o"))));
}

TEST_F(EstimateGenerated, PlanOnAQuantizedDownProjectionIsEstimatedAsRequantised) {
    // Expert ff 64 with a Q8_0 ffn_down_exps: K = 32 is legal (a whole Q8_0 block, and divides W = 64),
    // but splice would refuse the cut. The estimate keeps the types: down rows become one 34-byte block.
    auto r = test::run_gen(fmt::format("{} -o {}", gen_args(64, "Q8_0"), file("q.gguf")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<uint16_t> ch;
    for (int pair = 0; pair < 16; ++pair)
        for (int c = 0; c < 32; ++c) ch.push_back(static_cast<uint16_t>(2 * c));
    write_npz(file("q32.npz"), {{"channels", NpyArray::u16({16, 32}, ch)}});
    ShardSet m = ShardSet::open(file("q.gguf"));
    EstimateRequest in;
    in.neuron_plan_path = file("q32.npz");
    const EstimateResult e = estimate_model(m, in);
    ASSERT_TRUE(e.after.has_value());
    EXPECT_TRUE(e.after_requantised);
    EXPECT_FALSE(e.after->file_bytes_exact);
    EXPECT_GT(e.after->file_bytes_slack, 0u);
    // Per MoE block and expert: gate and up lose 32 of 64 rows of 68 bytes; down keeps 64 rows of one
    // Q8_0 block (34 bytes) instead of two.
    const uint64_t lost = 2 * 8 * (2 * 32 * 68 + 64 * 34);
    EXPECT_EQ(e.after->tensor_bytes, e.before.tensor_bytes - lost);
    EXPECT_EQ(e.after->expert_width, 32u);
    // The file: the source's bytes less the lost ones, plus splice's provenance keys (version, source
    // expert count, keeplist sha256, two kept-id arrays of 8, plan sha256, source width), to within
    // the header's padding (32 bytes).
    uint64_t prov = 0;
    for (const Kv& kv : {Kv::make_string("gguf_reap.version", std::string(GGUF_REAP_TOOL)),
                         Kv::make_u32("gguf_reap.source_expert_count", 8),
                         Kv::make_string("gguf_reap.keeplist_sha256", std::string(64, 'a')),
                         Kv::make_string("gguf_reap.neuron_plan_sha256", std::string(64, 'a')),
                         Kv::make_u32("gguf_reap.source_expert_feed_forward_length", 64)})
        prov += test::encoded_kv_size(kv);
    for (const char* key : {"gguf_reap.kept.1", "gguf_reap.kept.2"})
        prov += 8 + std::strlen(key) + 4 + 12 + 8 * 4;
    // general.name says what the build is, and the source becomes its base model (docs/splice.md).
    if (const Kv* name = m.find_kv("general.name")) {
        const std::string was = *name->as_string();
        prov += std::string(" (8 of 8 routed experts, expert FFN 32 of 64)").size();
        prov += test::encoded_kv_size(Kv::make_u32("general.base_model.count", 1)) +
                test::encoded_kv_size(Kv::make_string("general.base_model.0.name", was));
    }
    const uint64_t expect = e.before.file_bytes - lost + prov;
    EXPECT_LE(e.after->file_bytes, expect + 32);
    EXPECT_GE(e.after->file_bytes + 32, expect);
    EXPECT_GE(e.after->file_bytes_slack, 32u);
}

TEST_F(EstimateGenerated, BlockAlignedPlanOnAQuantizedDownProjectionIsExact) {
    // Whole Q8_0 blocks (channels 32..63 of every expert): splice cuts it byte-exactly, so the figure is
    // splice's own.
    auto r = test::run_gen(fmt::format("{} -o {}", gen_args(64, "Q8_0"), file("q.gguf")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<uint16_t> ch;
    for (int pair = 0; pair < 16; ++pair)
        for (int c = 0; c < 32; ++c) ch.push_back(static_cast<uint16_t>(32 + c));
    write_npz(file("b32.npz"), {{"channels", NpyArray::u16({16, 32}, ch)}});
    ShardSet m = ShardSet::open(file("q.gguf"));
    EstimateRequest in;
    in.neuron_plan_path = file("b32.npz");
    const EstimateResult e = estimate_model(m, in);
    ASSERT_TRUE(e.after.has_value());
    EXPECT_FALSE(e.after_requantised);
    EXPECT_TRUE(e.after->file_bytes_exact);
    EXPECT_EQ(e.after->file_bytes, spliced_bytes(fmt::format("{} --neuron-plan {} -o {}", file("q.gguf"),
                                                             file("b32.npz"), file("o"))));
}

TEST_F(EstimateGenerated, StandardAttentionKvPerTokenAndPerRank) {
    const EstimateResult e = run({});
    EXPECT_EQ(e.kv.kind, KvKind::kStandard);
    EXPECT_EQ(e.kv.attention_layers, 3u);
    EXPECT_EQ(e.kv.stateful_layers, 0u);
    EXPECT_EQ(e.kv.bytes_per_token, kKvPerToken);
    // A rank holds whole KV heads: 4 heads over 3 ranks is 2 on the busiest rank, over 8 ranks 1.
    EXPECT_EQ(e.kv.bytes_per_token_per_rank(2), 3u * 2 * 32 * 2);
    EXPECT_EQ(e.kv.bytes_per_token_per_rank(3), 3u * 2 * 32 * 2);
    EXPECT_EQ(e.kv.bytes_per_token_per_rank(8), 3u * 1 * 32 * 2);
}

TEST_F(EstimateGenerated, FitsPerTensorParallelDegree) {
    const Hand h;
    EstimateRequest in;
    in.deployment.tp = {2, 3};
    in.deployment.ctx = 100;
    in.deployment.overhead = 1000;
    // Exactly 5 bytes more than TP 2 needs.
    in.deployment.gpu_mem = h.residency(2) + 100 * (3 * 2 * 32 * 2) + 1000 + 5;
    const EstimateResult e = run(in);
    ASSERT_EQ(e.tp, (std::vector<uint64_t>{1, 2, 3}));
    ASSERT_EQ(e.fits_before.size(), 3u);
    const FitRow& one = e.fits_before[0];
    EXPECT_EQ(one.weights, h.tensor_bytes());
    EXPECT_EQ(one.kv_cache, 100 * kKvPerToken);
    EXPECT_FALSE(one.fits(e.deployment.gpu_mem));
    EXPECT_EQ(one.headroom(e.deployment.gpu_mem),
              static_cast<int64_t>(in.deployment.gpu_mem) -
                  static_cast<int64_t>(h.tensor_bytes() + 100 * kKvPerToken + 1000));
    const FitRow& two = e.fits_before[1];
    EXPECT_EQ(two.need(), in.deployment.gpu_mem - 5);
    EXPECT_TRUE(two.fits(e.deployment.gpu_mem));
    EXPECT_EQ(two.headroom(e.deployment.gpu_mem), 5);
    EXPECT_EQ(e.fits_before[2].weights, h.residency(3));
}

TEST_F(EstimateGenerated, KeeplistForAnotherModelIsRefused) {
    // Block 3 has experts in a 4-block model, not in this one; expert 9 exists only with more experts.
    std::ofstream(file("other3.json")) << R"({"drop": {"1": [0, 1, 2, 3], "2": [4, 5, 6, 7], "3": [1]}})";
    std::ofstream(file("other9.json")) << R"({"drop": {"1": [0, 9], "2": [0, 1]}})";
    const auto msg = [](const std::string& keeplist) {
        EstimateRequest in;
        in.keeplist_path = keeplist;
        try {
            run(in);
        } catch (const UsageError& e) {
            return test::shown(e);
        }
        return std::string("no error");
    };
    EXPECT_EQ(msg(file("other3.json")),
              file("other3.json") + ": block 3 is in the keeplist but is not an MoE block of the model");
    EXPECT_EQ(msg(file("other9.json")),
              file("other9.json") + ": block 1: dropped id 9 is out of range (the model has experts 0..7)");
}

TEST_F(EstimateGenerated, IllegalPlanWidthIsRefusedWithTheLegalList) {
    EstimateRequest in;
    in.neuron_plan_path = file("plan12.npz");
    try {
        run(in);
        FAIL() << "no error";
    } catch (const UsageError& err) {
        EXPECT_NE(std::string(err.what())
                      .find(fmt::format("K = 12 is not a legal expert width for {}", file("m.gguf"))),
                  std::string::npos)
            << err.what();
        EXPECT_NE(std::string(err.what()).find("legal widths are {1, 2, 4, 8, 16, 32}"), std::string::npos)
            << err.what();
    }
}

TEST(EstimateTp, ParsesLists) {
    EXPECT_EQ(parse_tp_list("2,3,4,8"), (std::vector<uint64_t>{2, 3, 4, 8}));
    EXPECT_EQ(parse_tp_list("1"), (std::vector<uint64_t>{1}));
}

TEST(EstimateTp, RefusesBadItems) {
    const auto msg = [](std::string_view text) {
        try {
            parse_tp_list(text);
        } catch (const UsageError& e) {
            return test::shown(e);
        }
        return std::string("no error");
    };
    EXPECT_EQ(msg("0"),
              "--tp: '0' is not a tensor-parallel degree (a whole number from 1 to 65536; e.g. --tp 2,4,8)");
    EXPECT_EQ(
        msg("abc"),
        "--tp: 'abc' is not a tensor-parallel degree (a whole number from 1 to 65536; e.g. --tp 2,4,8)");
    EXPECT_EQ(msg("2,,4"),
              "--tp: '' is not a tensor-parallel degree (a whole number from 1 to 65536; e.g. --tp 2,4,8)");
    EXPECT_EQ(msg("-2"),
              "--tp: '-2' is not a tensor-parallel degree (a whole number from 1 to 65536; e.g. --tp 2,4,8)");
    EXPECT_EQ(
        msg("65537"),
        "--tp: '65537' is not a tensor-parallel degree (a whole number from 1 to 65536; e.g. --tp 2,4,8)");
}

// Hand-built headers for the KV rules: only KVs matter.
Kv u32_array(const std::string& key, const std::vector<uint32_t>& v) {
    return Kv::make_u32_array(key, std::vector<int64_t>(v.begin(), v.end()));
}

KvFigures kv_of(const std::vector<Kv>& kvs) {
    TempDir d;
    const auto g = test::build_gguf(kvs, {{"token_embd.weight", {8, 4}, test::kF32}});
    test::write_file(d.file("h.gguf"), g.bytes);
    return kv_cache_figures(ShardSet::open(d.file("h.gguf")));
}

TEST(EstimateKv, MlaLikeKimiK2) {
    // (kv_lora_rank 512 + rope 64) × 61 layers × 2 bytes; the MTP block has no cache in decode.
    const KvFigures kv =
        kv_of({Kv::make_string("general.architecture", "deepseek2"),
               Kv::make_u32("deepseek2.block_count", 62), Kv::make_u32("deepseek2.nextn_predict_layers", 1),
               Kv::make_u32("deepseek2.attention.head_count", 64),
               Kv::make_u32("deepseek2.attention.head_count_kv", 1),
               Kv::make_u32("deepseek2.attention.kv_lora_rank", 512),
               Kv::make_u32("deepseek2.rope.dimension_count", 64)});
    EXPECT_EQ(kv.kind, KvKind::kMla);
    EXPECT_EQ(kv.attention_layers, 61u);
    EXPECT_EQ(kv.bytes_per_token, (512u + 64) * 61 * 2);
    EXPECT_EQ(kv.bytes_per_token_per_rank(8), kv.bytes_per_token);
}

TEST(EstimateKv, PerLayerHeadCountKvWithLayersWithoutAttention) {
    const KvFigures kv = kv_of(
        {Kv::make_string("general.architecture", "x"), Kv::make_u32("x.block_count", 4),
         Kv::make_u32("x.nextn_predict_layers", 1), Kv::make_u32("x.embedding_length", 256),
         Kv::make_u32("x.attention.head_count", 8), u32_array("x.attention.head_count_kv", {8, 0, 2, 2}),
         Kv::make_u32("x.attention.key_length", 64), Kv::make_u32("x.attention.value_length", 32)});
    EXPECT_EQ(kv.kind, KvKind::kStandard);
    EXPECT_EQ(kv.attention_layers, 2u);
    EXPECT_EQ(kv.stateful_layers, 1u);
    EXPECT_EQ(kv.bytes_per_token, (8u + 2) * (64 + 32) * 2);
    EXPECT_EQ(kv.bytes_per_token_per_rank(4), (2u + 1) * (64 + 32) * 2);
}

TEST(EstimateKv, MtpBlocksOnlyWhereTheLoaderReadsThem) {
    // nextn_predict_layers counts MTP blocks only where the architecture table's flag says the loader reads
    // it (deepseek2 does, qwen3moe does not): a stray key in a qwen3moe file leaves every block decoding.
    const auto kv = [](const std::string& arch) {
        return kv_of({Kv::make_string("general.architecture", arch), Kv::make_u32(arch + ".block_count", 4),
                      Kv::make_u32(arch + ".nextn_predict_layers", 1),
                      Kv::make_u32(arch + ".embedding_length", 256),
                      Kv::make_u32(arch + ".attention.head_count", 4),
                      Kv::make_u32(arch + ".attention.head_count_kv", 4),
                      Kv::make_u32(arch + ".attention.key_length", 64),
                      Kv::make_u32(arch + ".attention.value_length", 64)});
    };
    EXPECT_EQ(kv("deepseek2").attention_layers, 3u);
    EXPECT_EQ(kv("qwen3moe").attention_layers, 4u);
    EXPECT_EQ(kv("qwen3moe").bytes_per_token, 4u * 4 * (64 + 64) * 2);
}

TEST(EstimateKv, HybridFullAttentionInterval) {
    // qwen3next: full attention on blocks 3 and 7, recurrent layers elsewhere.
    const KvFigures kv =
        kv_of({Kv::make_string("general.architecture", "qwen3next"), Kv::make_u32("qwen3next.block_count", 8),
               Kv::make_u32("qwen3next.full_attention_interval", 4),
               Kv::make_u32("qwen3next.attention.head_count", 16),
               Kv::make_u32("qwen3next.attention.head_count_kv", 2),
               Kv::make_u32("qwen3next.attention.key_length", 256),
               Kv::make_u32("qwen3next.attention.value_length", 256)});
    EXPECT_EQ(kv.attention_layers, 2u);
    EXPECT_EQ(kv.stateful_layers, 6u);
    EXPECT_EQ(kv.bytes_per_token, 2u * 2 * 512 * 2);
}

TEST(EstimateKv, HeadCountKvArrayOfTheWrongLength) {
    try {
        kv_of({Kv::make_string("general.architecture", "x"), Kv::make_u32("x.block_count", 4),
               Kv::make_u32("x.attention.head_count", 8), u32_array("x.attention.head_count_kv", {8, 0})});
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_EQ(e.field(), "x.attention.head_count_kv");
        EXPECT_EQ(e.detail(), "array of 2 values, but block_count is 4");
    }
}

TEST(EstimateKv, ImplausibleValuesAreRefused) {
    try {
        kv_of({Kv::make_string("general.architecture", "x"), Kv::make_u32("x.block_count", 4),
               Kv::make_u32("x.attention.kv_lora_rank", 1u << 30)});
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_EQ(e.field(), "x.attention.kv_lora_rank");
        EXPECT_EQ(e.detail(), "1073741824 is more than 16777216: not a plausible value");
    }
    try {
        kv_of(
            {Kv::make_string("general.architecture", "x"), Kv::make_u64("x.block_count", uint64_t{1} << 40)});
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_EQ(e.field(), "x.block_count");
        EXPECT_EQ(e.detail(), "1099511627776 is more than 65536: not a plausible value");
    }
}

TEST(EstimateFixtures, MlaFixtureKvAndSizes) {
    REQUIRE_FIXTURES();
    const std::string rel = "models/tiny-deepseek2-Q8_0.gguf";
    ShardSet m = ShardSet::open(test::fixture(rel));
    const EstimateResult e = estimate_model(m, {});
    // kv_lora_rank 256 + rope 32, 4 blocks, F16.
    EXPECT_EQ(e.kv.kind, KvKind::kMla);
    EXPECT_EQ(e.kv.bytes_per_token, (256u + 32) * 4 * 2);
    const auto& x = test::expected_json()["models"][rel];
    EXPECT_EQ(e.before.file_bytes, x["file_size"].get<uint64_t>());
    uint64_t bytes = 0, params = 0;
    for (const auto& t : x["tensors"]) {
        bytes += t["nbytes"].get<uint64_t>();
        uint64_t n = 1;
        for (const auto& d : t["ne"]) n *= d.get<uint64_t>();
        params += n;
    }
    EXPECT_EQ(e.before.tensor_bytes, bytes);
    EXPECT_EQ(e.before.parameters, params);
}

}  // namespace
}  // namespace gguf_reap
