// `inspect` and the figures behind it: tensor classes, bits per weight, decode bytes per token (checked
// against arithmetic done by hand), and `gguf-reap inspect --json` on every fixture against
// ../shared/fixtures/expected.json. Also the fixture imatrix files read through ImatrixFile: entries,
// metadata, per-expert counts and values as llama.cpp wrote them.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/ggml_types.h"
#include "format/gguf.h"
#include "format/imatrix.h"
#include "gguf_builder.h"
#include "gguf_reap/inspect.h"
#include "model/shard_set.h"
#include "model/tensor_table.h"
#include "ops/inspect/inspect_model.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using nlohmann::json;
using test::expected_json;
using test::fixture;
using test::TensorSpec;

// ---- summary figures on a hand-made model -------------------------------------------------------

TEST(TensorClass, StripsBlockAndWeight) {
    EXPECT_EQ(tensor_class("blk.3.ffn_down_exps.weight"), "ffn_down_exps");
    EXPECT_EQ(tensor_class("blk.12.exp_probs_b.bias"), "exp_probs_b.bias");
    EXPECT_EQ(tensor_class("output_norm.weight"), "output_norm");
    EXPECT_EQ(tensor_class("token_embd.weight"), "token_embd");
    EXPECT_EQ(tensor_class("rope_freqs"), "rope_freqs");
    EXPECT_EQ(tensor_class(".weight"), ".weight") << "nothing left to name";
}

std::vector<Kv> moe_kvs() {
    return {Kv::make_string("general.architecture", "deepseek2"), Kv::make_u32("deepseek2.block_count", 2),
            Kv::make_u32("deepseek2.expert_count", 8), Kv::make_u32("deepseek2.expert_used_count", 2)};
}

// token_embd Q8_0 [32, 100], blk.0 dense, blk.1 MoE with 8 experts of Q8_0 [32, 32] slabs.
std::vector<TensorSpec> small_model(bool with_output) {
    std::vector<TensorSpec> t{{"token_embd.weight", {32, 100}, test::kQ8_0},
                              {"blk.0.attn_norm.weight", {32}, test::kF32},
                              {"blk.0.ffn_up.weight", {32, 64}, test::kQ8_0},
                              {"blk.1.attn_norm.weight", {32}, test::kF32}};
    for (auto& s : test::moe_block(1, 8)) t.push_back(s);
    t.push_back({"blk.1.ffn_up_shexp.weight", {32, 32}, test::kQ8_0});
    if (with_output) t.push_back({"output.weight", {32, 100}, test::kF16});
    return t;
}

TEST(ModelSummary, DecodeBytesUntiedEmbeddings) {
    test::TempDir d;
    test::write_gguf(d.file("m.gguf"), moe_kvs(), small_model(true));
    const ModelSummary s = summarize_model(ShardSet::open(d.file("m.gguf")));
    // A Q8_0 row of 32 is one 34-byte block.
    // dense:   one token_embd row 34 + attn_norm 128 ×2 + ffn_up 64 rows × 34 + shexp 32 × 34
    //          + output F16 32 × 100 × 2                                 = 34 + 256 + 2176 + 1088 + 6400
    // router:  ffn_gate_inp F32 32 × 8 × 4 + exp_probs_b 8 × 4            = 1024 + 32
    // experts: 2 used × (gate + up + down slabs of 32 rows × 34)          = 2 × 3 × 1088
    EXPECT_FALSE(s.tied_embeddings);
    EXPECT_EQ(s.decode.dense_bytes, 34u + 256 + 2176 + 1088 + 6400);
    EXPECT_EQ(s.decode.router_bytes, 1024u + 32);
    EXPECT_EQ(s.decode.expert_bytes, 2u * 3 * 1088);
    EXPECT_EQ(s.decode.total(), 9954u + 1056 + 6528);
    EXPECT_EQ(s.expert_bytes, 1024u + 32 + 3 * 8 * 1088) << "every expert-indexed tensor, router included";
    EXPECT_EQ(s.tensor_count, 11u);
    EXPECT_EQ(s.parameters, 3200u + 32 + 2048 + 32 + 256 + 8 + 3 * 8192 + 1024 + 3200);
}

TEST(ModelSummary, MtpBlocksAreNotReadByDecoding) {
    // The same model plus blk.2, an MTP (nextn) block with its own routed experts: block_count 3,
    // nextn_predict_layers 1. Decoding one token never reads blk.2.
    std::vector<Kv> kvs{Kv::make_string("general.architecture", "deepseek2"),
                        Kv::make_u32("deepseek2.block_count", 3), Kv::make_u32("deepseek2.expert_count", 8),
                        Kv::make_u32("deepseek2.expert_used_count", 2),
                        Kv::make_u32("deepseek2.nextn_predict_layers", 1)};
    std::vector<TensorSpec> t = small_model(true);
    t.push_back({"blk.2.attn_norm.weight", {32}, test::kF32});
    for (auto& spec : test::moe_block(2, 8)) t.push_back(spec);
    test::TempDir d;
    test::write_gguf(d.file("m.gguf"), kvs, t);
    const ModelSummary s = summarize_model(ShardSet::open(d.file("m.gguf")));
    EXPECT_EQ(s.decode.dense_bytes, 34u + 256 + 2176 + 1088 + 6400) << "as without blk.2";
    EXPECT_EQ(s.decode.router_bytes, 1024u + 32);
    EXPECT_EQ(s.decode.expert_bytes, 2u * 3 * 1088);
    // blk.2: attn_norm 128 + router 1024 + probs bias 32 + 3 × 8 expert slabs of 1088
    EXPECT_EQ(s.decode.nextn_bytes, 128u + 1024 + 32 + 3 * 8 * 1088);
}

TEST(ModelSummary, TiedEmbeddingsReadWhole) {
    test::TempDir d;
    test::write_gguf(d.file("m.gguf"), moe_kvs(), small_model(false));
    const ModelSummary s = summarize_model(ShardSet::open(d.file("m.gguf")));
    // Without output.weight, token_embd is also the output projection: all 100 rows every token.
    EXPECT_TRUE(s.tied_embeddings);
    EXPECT_EQ(s.decode.dense_bytes, 3400u + 256 + 2176 + 1088);
}

TEST(ModelSummary, RowsByClassAndTypeWithBitsPerWeight) {
    test::TempDir d;
    test::write_gguf(d.file("m.gguf"), moe_kvs(), small_model(true));
    const ModelSummary s = summarize_model(ShardSet::open(d.file("m.gguf")));
    std::map<std::string, ClassTypeRow> by_class;
    for (const auto& r : s.rows) by_class[r.tensor_class + "/" + ggml_type_display(r.type)] = r;
    ASSERT_EQ(by_class.count("attn_norm/F32"), 1u);
    EXPECT_EQ(by_class["attn_norm/F32"].tensors, 2u) << "blk.0 and blk.1 share a class";
    EXPECT_DOUBLE_EQ(by_class["attn_norm/F32"].bpw(), 32.0);
    EXPECT_DOUBLE_EQ(by_class["ffn_gate_exps/Q8_0"].bpw(), 8.5) << "34 bytes per 32 weights";
    EXPECT_DOUBLE_EQ(by_class["output/F16"].bpw(), 16.0);
    EXPECT_EQ(by_class["exp_probs_b.bias/F32"].bytes, 32u);
    for (size_t i = 1; i < s.rows.size(); ++i)
        EXPECT_GE(s.rows[i - 1].bytes, s.rows[i].bytes) << "largest first";
}

// ---- the fixtures -------------------------------------------------------------------------------

// Decode bytes per token of tiny-deepseek2-Q8_0, by hand from the README's shapes. Q8_0 stores 32
// weights in 34 bytes, so a row of 256 is 272 bytes, of 512 is 544, of 64 is 68; F32 norms of 256 are
// 1024 bytes.
TEST(InspectFixtures, DecodeBytesPerTokenByHandQ8_0) {
    REQUIRE_FIXTURES();
    // Attention and norms, per block (×4): attn_norm, attn_q_a_norm, attn_kv_a_norm, ffn_norm 4 × 1024;
    // attn_q_a {256,256} 256 × 272; attn_q_b {256,384} 384 × 272; attn_kv_a_mqa {256,288} 288 × 272;
    // attn_k_b {64,256,4} 1024 × 68; attn_v_b {256,64,4} 256 × 272; attn_output {256,256} 256 × 272.
    const uint64_t per_block =
        4 * 1024 + 256 * 272 + 384 * 272 + 288 * 272 + 1024 * 68 + 256 * 272 + 256 * 272;
    ASSERT_EQ(per_block, 465408u);
    // blk.0 dense FFN: gate, up {256,512} 512 × 272 each; down {512,256} 256 × 544.
    const uint64_t dense_ffn = 2 * 512 * 272 + 256 * 544;
    // Shared expert per MoE block (×3): gate/up/down_shexp {256,256} 3 × 256 × 272.
    const uint64_t shexp = 3 * 256 * 272;
    // output {256,4096} 4096 × 272, output_norm 1024, one token_embd row 272 (output is not tied).
    const uint64_t dense = 4 * per_block + dense_ffn + 3 * shexp + 4096 * 272 + 1024 + 272;
    // Router per MoE block: ffn_gate_inp F32 {256,16} 16384 + exp_probs_b F32 {16} 64.
    const uint64_t router = 3 * (16384 + 64);
    // Experts: 4 used of 16, each a gate, up and down slab of 256 rows × 272, in 3 blocks.
    const uint64_t experts = 3 * 4 * 3 * 256 * 272;
    ASSERT_EQ(dense + router + experts, 6577616u);

    const ModelSummary s = summarize_model(ShardSet::open(fixture("models/tiny-deepseek2-Q8_0.gguf")));
    EXPECT_EQ(s.decode.dense_bytes, dense);
    EXPECT_EQ(s.decode.router_bytes, router);
    EXPECT_EQ(s.decode.expert_bytes, experts);

    const test::RunResult r = test::run_cli("inspect --json " + fixture("models/tiny-deepseek2-Q8_0.gguf"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["decode_bytes_per_token"]["dense"], dense);
    EXPECT_EQ(j["decode_bytes_per_token"]["router"], router);
    EXPECT_EQ(j["decode_bytes_per_token"]["experts"], experts);
    EXPECT_EQ(j["decode_bytes_per_token"]["total"], 6577616u);
    EXPECT_EQ(j["decode_bytes_per_token"]["tied_embeddings"], false);
}

// Compares one `inspect --json --tensors` model document with an expected.json model entry.
void expect_model_json(const json& j, const json& exp) {
    EXPECT_EQ(j["kind"], "model");
    for (const char* k :
         {"arch", "file_size", "tensor_count", "kv_count", "alignment", "tensor_type_histogram", "n_layers",
          "moe_layers", "leading_dense_block_count", "expert_count", "expert_used_count",
          "expert_shared_count", "expert_feed_forward_length", "embedding_length", "vocab_size"})
        EXPECT_EQ(j[k], exp[k]) << k;
    ASSERT_EQ(j["kv"].size(), exp["kv"].size());
    for (const auto& [key, value] : exp["kv"].items()) EXPECT_EQ(j["kv"][key], value) << key;
    ASSERT_EQ(j["tensors"].size(), exp["tensors"].size());
    for (size_t i = 0; i < exp["tensors"].size(); ++i)
        for (const char* k : {"name", "type", "ne", "offset", "nbytes"})
            EXPECT_EQ(j["tensors"][i][k], exp["tensors"][i][k]) << exp["tensors"][i]["name"] << " " << k;
    EXPECT_EQ(j["moe"]["experts"], exp["expert_count"]);
    EXPECT_EQ(j["moe"]["used"], exp["expert_used_count"]);
    EXPECT_EQ(j["moe"]["blocks"], exp["moe_layers"].size());
}

TEST(InspectFixtures, ModelJsonAgreesWithExpected) {
    REQUIRE_FIXTURES();
    for (const auto& [rel, exp] : expected_json()["models"].items()) {
        SCOPED_TRACE(rel);
        const test::RunResult r = test::run_cli("inspect --json --tensors " + fixture(rel));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.err, "");
        const json j = json::parse(r.out);
        expect_model_json(j, exp);
        EXPECT_EQ(j["shards"].size(), 1u);
        for (const auto& t : j["tensors"]) EXPECT_EQ(t["shard"], 0);
    }
}

TEST(InspectFixtures, SplitModelJsonAgreesWithExpected) {
    REQUIRE_FIXTURES();
    const json& sh = expected_json()["shards"];
    const json& source = expected_json()["models"][sh["source"].get<std::string>()];
    for (const auto& [rel, exp_shard] : sh["files"].items()) {
        SCOPED_TRACE(rel);
        const test::RunResult r = test::run_cli("inspect --json --tensors " + fixture(rel));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const json j = json::parse(r.out);
        // The model is the unsplit source's; its file size is the three shards together.
        uint64_t total = 0;
        for (const auto& [name, f] : sh["files"].items()) total += f["file_size"].get<uint64_t>();
        EXPECT_EQ(j["file_size"], total);
        EXPECT_EQ(j["arch"], source["arch"]);
        EXPECT_EQ(j["tensor_count"], source["tensor_count"]);
        EXPECT_EQ(j["moe_layers"], source["moe_layers"]);
        EXPECT_EQ(j["expert_count"], source["expert_count"]);
        EXPECT_EQ(j["tensor_type_histogram"], source["tensor_type_histogram"]);
        ASSERT_EQ(j["shards"].size(), 3u);
        size_t si = 0;
        for (const auto& [name, f] : sh["files"].items()) {
            const json& s = j["shards"][si];
            EXPECT_EQ(s["path"], fixture(name));
            EXPECT_EQ(s["file_size"], f["file_size"]);
            EXPECT_EQ(s["tensor_count"], f["tensor_count"]);
            EXPECT_EQ(s["kv_count"], f["kv_count"]);
            EXPECT_EQ(s["split_kv"], f["split_kv"]);
            // Every tensor the JSON puts in this shard is one expected.json lists there, in order.
            std::vector<std::string> names;
            for (const auto& t : j["tensors"])
                if (t["shard"] == si) names.push_back(t["name"]);
            EXPECT_EQ(names, f["tensors"].get<std::vector<std::string>>());
            ++si;
        }
        // KVs are shard 1's: the source's plus the three split keys.
        EXPECT_EQ(j["kv_count"], source["kv_count"].get<size_t>() + 3);
        for (const auto& [key, value] : source["kv"].items()) EXPECT_EQ(j["kv"][key], value) << key;
    }
}

TEST(InspectFixtures, ImatrixJsonAgreesWithExpected) {
    REQUIRE_FIXTURES();
    for (const auto& [rel, exp] : expected_json()["imatrix"].items()) {
        SCOPED_TRACE(rel);
        const test::RunResult r = test::run_cli("inspect --json " + fixture(rel));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const json j = json::parse(r.out);
        EXPECT_EQ(j["kind"], "imatrix");
        EXPECT_EQ(j["format"], exp["format"]);
        EXPECT_EQ(j["file_size"], exp["file_size"]);
        EXPECT_EQ(j["entry_count"], exp["entries"].size());
        EXPECT_EQ(j["expert_entry_count"], 9) << "gate/up/down exps of blocks 1..3";
        if (exp["format"] == "gguf") {
            EXPECT_EQ(j["datasets"], exp["kv"]["imatrix.datasets"]);
            EXPECT_EQ(j["chunk_count"], exp["kv"]["imatrix.chunk_count"]);
            EXPECT_EQ(j["chunk_size"], exp["kv"]["imatrix.chunk_size"]);
        } else {
            EXPECT_EQ(j["datasets"], json::array({exp["dataset"]}));
            EXPECT_EQ(j["chunk_count"], exp["last_chunk"]);
            EXPECT_EQ(j["chunk_size"], nullptr) << "a .dat file does not record it";
        }
    }
}

// ---- fixture imatrix files through ImatrixFile --------------------------------------------------

TEST(FixtureImatrix, GgufEntriesCountsAndValues) {
    REQUIRE_FIXTURES();
    size_t files = 0;
    for (const auto& [rel, exp] : expected_json()["imatrix"].items()) {
        if (exp["format"] != "gguf") continue;
        SCOPED_TRACE(rel);
        ++files;
        const ImatrixFile im = ImatrixFile::open(fixture(rel));
        EXPECT_EQ(im.kind(), ImatrixKind::kGguf);
        EXPECT_EQ(detect_imatrix(fixture(rel)), ImatrixKind::kGguf);
        EXPECT_EQ(im.file().size(), exp["file_size"].get<uint64_t>());
        EXPECT_EQ(im.datasets(), exp["kv"]["imatrix.datasets"].get<std::vector<std::string>>());
        EXPECT_EQ(im.chunk_count(), exp["kv"]["imatrix.chunk_count"].get<uint64_t>());
        EXPECT_EQ(im.chunk_size(), exp["kv"]["imatrix.chunk_size"].get<uint64_t>());
        const Header h = parse_gguf_header(*InputFile::open(fixture(rel)));
        EXPECT_EQ(h.tensors.size(), exp["gguf_tensor_count"].get<size_t>());
        EXPECT_EQ(h.find("general.type")->as_string(), exp["kv"]["general.type"].get<std::string>());

        std::vector<std::string> names;
        for (const auto& e : im.entries()) names.push_back(e.name);
        EXPECT_EQ(names, exp["entries"].get<std::vector<std::string>>());
        for (const auto& [name, cols] : exp["n_cols"].items()) {
            const ImatrixEntry* e = im.find(name);
            ASSERT_NE(e, nullptr) << name;
            EXPECT_EQ(e->ne0, cols.get<int64_t>()) << name;
            EXPECT_EQ(e->nval, e->ne0 * e->n_mat) << name;
        }
        for (const auto& [name, counts] : exp["per_expert_counts"].items()) {
            const ImatrixEntry* e = im.find(name);
            ASSERT_NE(e, nullptr) << name;
            EXPECT_EQ(e->n_mat, 16) << name;
            const std::vector<float> got = im.read_counts(*e);
            std::vector<double> as_double(got.begin(), got.end());
            EXPECT_EQ(as_double, counts.get<std::vector<double>>()) << name;
        }
        for (const auto& [name, count] : exp["dense_counts"].items()) {
            const ImatrixEntry* e = im.find(name);
            ASSERT_NE(e, nullptr) << name;
            EXPECT_EQ(e->n_mat, 1) << name;
            EXPECT_EQ(im.read_counts(*e), std::vector<float>{count.get<float>()}) << name;
        }
        // Values: per expert, the mean over channels and the largest channel of in_sum2 / count
        // (expected.json rounds to 6 decimals; null where an expert was never routed).
        for (const auto& [name, means] : exp["mean_sq_act_per_expert"].items()) {
            const ImatrixEntry* e = im.find(name);
            ASSERT_NE(e, nullptr) << name;
            const std::vector<float> sums = im.read_values(*e);
            const std::vector<float> counts = im.read_counts(*e);
            const json& maxes = exp["max_channel_mean_sq_per_expert"][name];
            for (int64_t x = 0; x < e->n_mat; ++x) {
                const size_t xi = static_cast<size_t>(x);
                if (counts[xi] == 0) {
                    EXPECT_TRUE(means[xi].is_null()) << name << " expert " << x;
                    continue;
                }
                double total = 0, top = 0;
                for (int64_t c = 0; c < e->ne0; ++c) {
                    const double v = sums[static_cast<size_t>(x * e->ne0 + c)] / counts[xi];
                    total += v;
                    top = std::max(top, v);
                }
                EXPECT_NEAR(total / static_cast<double>(e->ne0), means[xi].get<double>(), 1e-6)
                    << name << " " << x;
                EXPECT_NEAR(top, maxes[xi].get<double>(), 1e-6 + 1e-6 * top) << name << " " << x;
            }
        }
    }
    EXPECT_EQ(files, 6u);
}

TEST(FixtureImatrix, LegacyDatEntries) {
    REQUIRE_FIXTURES();
    size_t files = 0;
    for (const auto& [rel, exp] : expected_json()["imatrix"].items()) {
        if (exp["format"] != "dat") continue;
        SCOPED_TRACE(rel);
        ++files;
        EXPECT_EQ(detect_imatrix(fixture(rel)), ImatrixKind::kLegacy);
        const ImatrixFile im = ImatrixFile::open(fixture(rel));
        EXPECT_EQ(im.kind(), ImatrixKind::kLegacy);
        EXPECT_EQ(im.chunk_count(), exp["last_chunk"].get<uint64_t>());
        EXPECT_EQ(im.chunk_size(), std::nullopt);
        EXPECT_EQ(im.datasets(), std::vector<std::string>{exp["dataset"].get<std::string>()});
        std::vector<std::string> names;
        for (const auto& e : im.entries()) names.push_back(e.name);
        EXPECT_EQ(names, exp["entries"].get<std::vector<std::string>>());
        for (const auto& e : im.entries()) {
            EXPECT_EQ(e.ncall, exp["ncall"][e.name].get<int32_t>()) << e.name;
            EXPECT_EQ(e.nval, exp["nval"][e.name].get<int64_t>()) << e.name;
            EXPECT_EQ(im.read_counts(e), std::vector<float>{static_cast<float>(e.ncall)}) << e.name;
            EXPECT_EQ(im.read_values(e).size(), static_cast<size_t>(e.nval)) << e.name;
        }
    }
    EXPECT_EQ(files, 6u);
}

TEST(FixtureImatrix, LegacyDatIsItsGgufTwinScaled) {
    // llama.cpp's current .dat writer stores in_sum2 / count × ncall per matrix, and ncall for a matrix
    // never routed to (so that it reads back as exactly 1).
    REQUIRE_FIXTURES();
    const ImatrixFile dat = ImatrixFile::open(fixture("imatrix/tiny-deepseek2.chat.imatrix.dat"));
    const ImatrixFile gguf = ImatrixFile::open(fixture("imatrix/tiny-deepseek2.chat.imatrix.gguf"));
    const double max_rel = expected_json()["imatrix"]["imatrix/tiny-deepseek2.chat.imatrix.dat"]
                                          ["consistent_with_gguf_twin"]["max_rel_err"];
    for (const auto& e : dat.entries()) {
        const ImatrixEntry* g = gguf.find(e.name);
        ASSERT_NE(g, nullptr) << e.name;
        ASSERT_EQ(g->nval, e.nval) << e.name;
        const auto stored = dat.read_values(e), sums = gguf.read_values(*g), counts = gguf.read_counts(*g);
        for (int64_t i = 0; i < e.nval; ++i) {
            const float count = counts[static_cast<size_t>(i / g->ne0)];
            const double want = count == 0 ? e.ncall : sums[static_cast<size_t>(i)] / count * e.ncall;
            const double got = stored[static_cast<size_t>(i)];
            ASSERT_LE(std::fabs(got - want), 2 * max_rel * std::fabs(want) + 1e-30)
                << e.name << "[" << i << "]";
        }
    }
}

}  // namespace
}  // namespace gguf_reap
