// The fixture generator (gguf-reap-gen), run as a binary: models open as llama.cpp would load them,
// with the shapes, types and sizes asked for; imatrices read back equal to their --truth; bad
// arguments fail with exit 2 and a message naming the option.
#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include "gen_test_support.h"
#include "model/tensor_table.h"

namespace gguf_reap {
namespace {

using namespace gen_test;
using nlohmann::json;
using test::run_gen;
using test::TempDir;

// ---- models ----------------------------------------------------------------------------------------

TEST(GenModel, TinyMatchesTruthShapesTypesAndSizes) {
    TempDir d;
    gen(fmt::format("model --skeleton -o {} --truth {}", d.file("m.gguf"), d.file("t.json")));
    const json t = load_json(d.file("t.json"));
    ShardSet m = ShardSet::open(d.file("m.gguf"));
    EXPECT_FALSE(m.is_split());
    EXPECT_EQ(m.architecture(), "deepseek2");
    EXPECT_EQ(*m.arch_uint("block_count"), 4u);
    EXPECT_EQ(*m.arch_uint("expert_count"), 16u);
    EXPECT_EQ(*m.arch_uint("expert_used_count"), 4u);
    EXPECT_EQ(*m.arch_uint("expert_shared_count"), 1u);
    EXPECT_EQ(*m.arch_uint("leading_dense_block_count"), 1u);
    EXPECT_EQ(*m.arch_uint("expert_feed_forward_length"), 64u);
    EXPECT_EQ(*m.arch_uint("expert_gating_func"), 2u);
    EXPECT_EQ(m.find_kv("deepseek2.expert_count")->type, GgufType::kUint32);
    EXPECT_EQ(m.find_kv("deepseek2.attention.layer_norm_rms_epsilon")->type, GgufType::kFloat32);
    EXPECT_EQ(m.find_kv("deepseek2.expert_weights_norm")->as_bool(), true);
    EXPECT_EQ(m.find_kv("general.quantization_version")->as_uint(), 2u);
    EXPECT_EQ(m.find_kv("tokenizer.ggml.model")->as_string(), "gpt2");
    EXPECT_EQ(m.find_kv("tokenizer.ggml.tokens")->count, 512u);
    EXPECT_EQ(m.find_kv("split.count"), nullptr);
    EXPECT_EQ(m.find_kv("general.alignment"), nullptr);
    EXPECT_EQ(m.find_kv("deepseek2.expert_group_count"), nullptr);

    ASSERT_EQ(m.tensors().size(), t["tensor_count"].get<size_t>());
    for (size_t i = 0; i < m.tensors().size(); ++i) {
        const TensorInfo& ti = m.info(m.tensors()[i]);
        const json& tt = t["tensors"][i];
        EXPECT_EQ(ti.name, tt["name"]);
        EXPECT_EQ(ggml_type_display(ti.type), tt["type"]);
        EXPECT_EQ(ti.nbytes, tt["nbytes"].get<uint64_t>());
        const auto ne = tt["ne"].get<std::vector<int64_t>>();
        for (size_t k = 0; k < 4; ++k) EXPECT_EQ(ti.ne[k], k < ne.size() ? ne[k] : 1) << ti.name;
    }
    const TensorInfo& down = m.info(*m.find_tensor("blk.1.ffn_down_exps.weight"));
    EXPECT_EQ(down.ne, (std::array<int64_t, 4>{64, 128, 16, 1}));
    EXPECT_EQ(down.n_dims, 3u);
    EXPECT_EQ(ggml_type_display(down.type), "Q8_0");
    EXPECT_EQ(down.nbytes, 64u / 32 * 34 * 128 * 16);
    EXPECT_EQ(ggml_type_display(m.info(*m.find_tensor("blk.1.ffn_gate_inp.weight")).type), "F32");
    EXPECT_EQ(m.info(*m.find_tensor("blk.1.ffn_gate_shexp.weight")).ne,
              (std::array<int64_t, 4>{128, 64, 1, 1}));
    EXPECT_NE(m.find_tensor("blk.0.ffn_down.weight"), nullptr);
    EXPECT_EQ(m.find_tensor("blk.0.ffn_down_exps.weight"), nullptr);
    EXPECT_NE(m.find_tensor("output.weight"), nullptr);
    EXPECT_EQ(m.find_tensor("blk.1.exp_probs_b.bias"), nullptr);
    EXPECT_EQ(m.tensors().front().abs_offset, m.metadata().data_start);
    EXPECT_EQ(m.total_bytes(), t["file_bytes"].get<uint64_t>());

    const MoeLayout L = build_moe_layout(m);
    ASSERT_EQ(L.blocks.size(), 3u);
    EXPECT_EQ(t["moe_blocks"], json({1, 2, 3}));
    for (const MoeBlock& b : L.blocks) {
        ASSERT_EQ(b.tensors.size(), 4u) << "router, gate, up, down";
        EXPECT_EQ(b.slab_bytes, 3u * (128 / 32 * 34 * 64));
    }
}

TEST(GenModel, LayoutFindsEveryOptionalExpertTensor) {
    TempDir d;
    gen(fmt::format(
        "model --skeleton -o {} --nextn 1 --probs-bias --router-bias --exps-bias --scales --groups 4 "
        "--group-used 2 --blocks 3",
        d.file("m.gguf")));
    ShardSet m = ShardSet::open(d.file("m.gguf"));
    EXPECT_EQ(*m.arch_uint("block_count"), 4u);
    EXPECT_EQ(*m.arch_uint("nextn_predict_layers"), 1u);
    EXPECT_EQ(*m.arch_uint("expert_group_count"), 4u);
    EXPECT_EQ(*m.arch_uint("expert_group_used_count"), 2u);
    const MoeLayout L = build_moe_layout(m);
    EXPECT_EQ(L.nextn_predict_layers, 1u);
    std::vector<int> ids;
    for (const auto& b : L.blocks) ids.push_back(b.block);
    EXPECT_EQ(ids, (std::vector<int>{1, 2, 3})) << "block 3 is the nextn block";
    EXPECT_NE(m.find_tensor("blk.3.nextn.eh_proj.weight"), nullptr);
    for (const MoeBlock& b : L.blocks) {
        // name → (role, projection, expert axis)
        std::map<std::string, std::tuple<std::string, std::string, int>> got;
        for (const auto& et : b.tensors)
            got[et.name.substr(et.name.find('.', 4) + 1)] = {expert_role_name(et.role()),
                                                             projection_name(et.kind->projection), et.axis()};
        const std::map<std::string, std::tuple<std::string, std::string, int>> want = {
            {"ffn_gate_inp.weight", {"router", "", 1}},   {"ffn_gate_inp.bias", {"router_bias", "", 0}},
            {"exp_probs_b.bias", {"exp_probs_b", "", 0}}, {"ffn_gate_exps.weight", {"weight", "gate", 2}},
            {"ffn_up_exps.weight", {"weight", "up", 2}},  {"ffn_down_exps.weight", {"weight", "down", 2}},
            {"ffn_gate_exps.bias", {"bias", "gate", 1}},  {"ffn_up_exps.bias", {"bias", "up", 1}},
            {"ffn_down_exps.bias", {"bias", "down", 1}},  {"ffn_gate_exps.scale", {"scale", "gate", 0}},
            {"ffn_up_exps.scale", {"scale", "up", 0}},    {"ffn_down_exps.scale", {"scale", "down", 0}},
        };
        EXPECT_EQ(got, want) << "block " << b.block;
    }
    EXPECT_EQ(m.info(*m.find_tensor("blk.2.ffn_down_exps.bias")).ne, (std::array<int64_t, 4>{128, 16, 1, 1}));
    EXPECT_EQ(m.info(*m.find_tensor("blk.2.ffn_gate_exps.bias")).ne, (std::array<int64_t, 4>{64, 16, 1, 1}));
}

TEST(GenModel, FusedGateUp) {
    TempDir d;
    gen(fmt::format("model --skeleton -o {} --fused-gate-up --scales --type-exps Q4_0", d.file("m.gguf")));
    ShardSet m = ShardSet::open(d.file("m.gguf"));
    EXPECT_EQ(m.find_tensor("blk.1.ffn_gate_exps.weight"), nullptr);
    EXPECT_EQ(m.find_tensor("blk.1.ffn_up_exps.weight"), nullptr);
    const TensorInfo& gu = m.info(*m.find_tensor("blk.1.ffn_gate_up_exps.weight"));
    EXPECT_EQ(gu.ne, (std::array<int64_t, 4>{128, 128, 16, 1}));
    EXPECT_EQ(ggml_type_display(gu.type), "Q4_0");
    EXPECT_EQ(gu.nbytes, 128u / 32 * 18 * 128 * 16);
    // llama.cpp's generic pass makes per-expert scales for gate, up and down, none for a fused gate_up.
    EXPECT_EQ(m.find_tensor("blk.1.ffn_gate_up_exps.scale"), nullptr);
    EXPECT_NE(m.find_tensor("blk.1.ffn_down_exps.scale"), nullptr);
    // No loader has a fused gate_up with expert biases.
    const auto r =
        run_gen(fmt::format("model --skeleton -o {} --fused-gate-up --exps-bias", d.file("x.gguf")));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(
        r.err.find(
            "--exps-bias with --fused-gate-up: no llama.cpp loader has a fused gate_up with expert biases"),
        std::string::npos)
        << r.err;
    const MoeLayout L = build_moe_layout(m);
    int fused = 0;
    for (const auto& b : L.blocks)
        for (const auto& et : b.tensors)
            if (et.kind->is_weight() && et.kind->projection == Projection::kGateUp) {
                ++fused;
                EXPECT_EQ(et.axis(), 2);
                EXPECT_EQ(et.slab, 128u / 32 * 18 * 128);
            }
    EXPECT_EQ(fused, 3);
}

TEST(GenModel, SplitOpensFromAnyShardWithTheSameTensorBytes) {
    TempDir d;
    gen(fmt::format("model --skeleton -o {} --seed 7", d.file("whole.gguf")));
    gen(fmt::format("model --skeleton -o {} --seed 7 --shards 3", d.file("m")));
    const ShardSet whole = ShardSet::open(d.file("whole.gguf"));
    for (int i = 1; i <= 3; ++i) {
        const std::string path = d.file(fmt::format("m-{:05d}-of-00003.gguf", i));
        SCOPED_TRACE(path);
        ShardSet m = ShardSet::open(path);
        ASSERT_TRUE(m.is_split());
        ASSERT_EQ(m.shards().size(), 3u);
        ASSERT_EQ(m.tensors().size(), whole.tensors().size());
        for (size_t k = 0; k < 3; ++k) {
            const auto& kvs = m.shards()[k].header.kvs;
            ASSERT_GE(kvs.size(), 3u);
            // split.* are the last three KVs, typed u16/u16/i32; only the first shard has model KVs.
            EXPECT_EQ(kvs[kvs.size() - 3].key, "split.no");
            EXPECT_EQ(kvs[kvs.size() - 3].type, GgufType::kUint16);
            EXPECT_EQ(kvs[kvs.size() - 3].as_uint(), k);
            EXPECT_EQ(kvs[kvs.size() - 2].key, "split.count");
            EXPECT_EQ(kvs[kvs.size() - 2].as_uint(), 3u);
            EXPECT_EQ(kvs[kvs.size() - 1].key, "split.tensors.count");
            EXPECT_EQ(kvs[kvs.size() - 1].type, GgufType::kInt32);
            EXPECT_EQ(kvs[kvs.size() - 1].as_uint(), whole.tensors().size());
            if (k > 0) {
                EXPECT_EQ(kvs.size(), 3u);
            }
            EXPECT_FALSE(m.shards()[k].header.tensors.empty());
        }
        EXPECT_GT(m.metadata().kvs.size(), 20u);
        EXPECT_EQ(m.architecture(), "deepseek2");
    }
    // Same tensors, same order, same bytes as the unsplit model; shards balanced by bytes.
    const ShardSet m = ShardSet::open(d.file("m-00001-of-00003.gguf"));
    uint64_t total = 0;
    std::vector<uint64_t> per(3, 0);
    for (size_t i = 0; i < m.tensors().size(); ++i) {
        const TensorInfo& a = m.info(m.tensors()[i]);
        const TensorInfo& b = whole.info(whole.tensors()[i]);
        ASSERT_EQ(a.name, b.name);
        EXPECT_EQ(tensor_bytes(m, a.name), tensor_bytes(whole, b.name)) << a.name;
        per[m.tensors()[i].shard] += a.nbytes;
        total += a.nbytes;
    }
    for (uint64_t p : per) {
        EXPECT_GT(p, total / 3 - total / 10);
        EXPECT_LT(p, total / 3 + total / 10);
    }
}

TEST(GenModel, DeterministicPerSeed) {
    TempDir d;
    gen(fmt::format("model --skeleton -o {} --preset demo --seed 5", d.file("a.gguf")));
    gen(fmt::format("model --skeleton -o {} --preset demo --seed 5", d.file("b.gguf")));
    gen(fmt::format("model --skeleton -o {} --preset demo --seed 6", d.file("c.gguf")));
    EXPECT_EQ(sha256_of(d.file("a.gguf")), sha256_of(d.file("b.gguf")));
    EXPECT_NE(sha256_of(d.file("a.gguf")), sha256_of(d.file("c.gguf")));
    EXPECT_EQ(std::filesystem::file_size(d.file("a.gguf")), std::filesystem::file_size(d.file("c.gguf")));
    // No temporaries left behind.
    size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(d.path())) files += e.is_regular_file();
    EXPECT_EQ(files, 3u);
}

TEST(GenModel, FloatTensorsHoldSmallFiniteValues) {
    for (const char* type : {"F32", "F16", "BF16"}) {
        SCOPED_TRACE(type);
        TempDir d;
        gen(fmt::format("model --skeleton -o {} --type-down {} --type-router {} --scales", d.file("m.gguf"),
                        type, type));
        ShardSet m = ShardSet::open(d.file("m.gguf"));
        for (const char* name : {"blk.1.ffn_down_exps.weight", "blk.2.ffn_gate_inp.weight"}) {
            const TensorInfo& t = m.info(*m.find_tensor(name));
            EXPECT_EQ(ggml_type_display(t.type), type);
            const auto v = as_floats(tensor_bytes(m, name), t.type);
            ASSERT_EQ(v.size(), t.n_elements());
            size_t negative = 0;
            for (float x : v) {
                ASSERT_TRUE(std::isfinite(x));
                ASSERT_GE(std::fabs(x), 0x1.0p-10f);
                ASSERT_LT(std::fabs(x), 0.25f);
                negative += x < 0;
            }
            EXPECT_GT(negative, v.size() / 3);
            EXPECT_LT(negative, v.size() * 2 / 3);
        }
        for (const char* name : {"blk.1.attn_norm.weight", "blk.1.ffn_down_exps.scale"}) {
            for (float x : as_floats(tensor_bytes(m, name), 0)) {
                ASSERT_GE(x, 0.5f);
                ASSERT_LT(x, 2.0f);
            }
        }
    }
}

TEST(GenModel, QuantizedBlocksHaveFiniteScales) {
    TempDir d;
    gen(fmt::format("model --skeleton -o {} --embd 256 --expert-ff 256 --type-exps Q4_K --type-down Q6_K",
                    d.file("m.gguf")));
    ShardSet m = ShardSet::open(d.file("m.gguf"));
    const auto check = [&](const char* name, size_t block, std::vector<size_t> d_offsets) {
        const auto b = tensor_bytes(m, name);
        ASSERT_EQ(b.size() % block, 0u);
        size_t distinct_bytes = std::set<uint8_t>(b.begin(), b.end()).size();
        EXPECT_GT(distinct_bytes, 200u) << "random bytes";
        for (size_t i = 0; i < b.size(); i += block)
            for (size_t o : d_offsets) {
                const float v = half_to_float(static_cast<uint16_t>(b[i + o] | (b[i + o + 1] << 8)));
                ASSERT_TRUE(std::isfinite(v)) << name << " block " << i / block;
                ASSERT_LT(std::fabs(v), 2.0f);
            }
    };
    check("blk.1.ffn_gate_exps.weight", 144, {0, 2});  // q4_K: d, dmin
    check("blk.1.ffn_down_exps.weight", 210, {208});   // q6_K: d last
    check("blk.1.attn_q.weight", 34, {0});             // q8_0
}

TEST(GenModel, AlignmentTiedAndDenseModels) {
    TempDir d;
    gen(fmt::format("model --skeleton -o {} --alignment 256 --tied --shards 2", d.file("a")));
    ShardSet a = ShardSet::open(d.file("a-00002-of-00002.gguf"));
    EXPECT_EQ(a.shards()[0].header.alignment, 256u);
    EXPECT_EQ(a.find_kv("general.alignment")->type, GgufType::kUint32);
    EXPECT_EQ(a.shards()[0].header.data_start % 256, 0u);
    EXPECT_EQ(a.shards()[1].header.alignment, 32u) << "later shards carry only split.*";
    for (const auto& t : a.shards()[0].header.tensors) EXPECT_EQ(t.offset % 256, 0u);
    EXPECT_EQ(a.find_tensor("output.weight"), nullptr);
    EXPECT_NE(a.find_tensor("token_embd.weight"), nullptr);

    gen(fmt::format("model --skeleton -o {} --experts 0", d.file("dense.gguf")));
    ShardSet dense = ShardSet::open(d.file("dense.gguf"));
    EXPECT_EQ(dense.find_kv("deepseek2.expert_count"), nullptr);
    EXPECT_TRUE(build_moe_layout(dense).blocks.empty());
    EXPECT_NE(dense.find_tensor("blk.3.ffn_down.weight"), nullptr);
}

TEST(GenModel, PresetsAndOverrides) {
    TempDir d;
    gen(fmt::format("model --skeleton -o {} --preset demo --experts 32 --truth {}", d.file("m.gguf"),
                    d.file("t.json")));
    const json t = load_json(d.file("t.json"));
    EXPECT_EQ(t["preset"], "demo");
    EXPECT_EQ(t["experts"], 32);
    EXPECT_EQ(t["used"], 8);
    EXPECT_EQ(t["embd"], 256);
    EXPECT_EQ(t["types"]["exps"], "Q4_K");
    EXPECT_EQ(t["types"]["down"], "Q8_0");
    EXPECT_TRUE(t["options"]["probs_bias"].get<bool>());
    ShardSet m = ShardSet::open(d.file("m.gguf"));
    EXPECT_EQ(*m.arch_uint("expert_count"), 32u);
    EXPECT_NE(m.find_tensor("blk.5.exp_probs_b.bias"), nullptr);
}

// The benchmark shapes documented in docs/fixture-generator.md, planned but not written.
TEST(GenModel, DocumentedBenchmarkShapes) {
    TempDir d;
    const auto r = run_gen(
        fmt::format("model --skeleton --preset kimi-k3 --embd 256 --expert-ff 64 --type-exps Q8_0 -o {} "
                    "--dry-run --truth {}",
                    d.file("k3.gguf"), d.file("t.json")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("would write"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(d.file("k3.gguf")));
    const json t = load_json(d.file("t.json"));
    EXPECT_EQ(t["block_count"], 93);
    EXPECT_EQ(t["experts"], 896);
    EXPECT_EQ(t["expert_slabs"], 92 * 896 * 3);
    EXPECT_GE(t["file_bytes"].get<uint64_t>(), uint64_t{4} << 30);

    const auto big = run_gen(
        fmt::format("model --skeleton --preset kimi-k3 --blocks 14 --experts 128 --used 8 --embd 2048 "
                    "--expert-ff 1024 --type-exps Q8_0 --shards 4 -o {} --dry-run --truth {}",
                    d.file("big"), d.file("b.json")));
    ASSERT_EQ(big.exit_code, 0) << big.err;
    const json b = load_json(d.file("b.json"));
    EXPECT_GE(b["file_bytes"].get<uint64_t>(), uint64_t{10} << 30);
    EXPECT_EQ(b["files"].size(), 4u);
}

TEST(GenModel, BadArgumentsExitTwoNamingTheOption) {
    TempDir d;
    const std::string out = d.file("m.gguf");
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--type-down Q4_K",
         "gguf-reap-gen: error: --type-down Q4_K: blk.1.ffn_down_exps.weight has rows of 64 elements "
         "(--expert-ff), not a multiple of the 256-element blocks of Q4_K\n"},
        {"--type-exps Q4_K",
         "gguf-reap-gen: error: --type-exps Q4_K: blk.1.ffn_gate_exps.weight has rows of 128 elements "
         "(--embd), "
         "not a multiple of the 256-element blocks of Q4_K\n"},
        {"--type-attn Q9_X", "gguf-reap-gen: error: --type-attn Q9_X: unknown ggml type"},
        {"--used 17", "gguf-reap-gen: error: --used 17: must be 1..--experts (16)\n"},
        {"--groups 3", "gguf-reap-gen: error: --groups 3: must divide --experts (16) and be smaller\n"},
        {"--dense-blocks 4", "gguf-reap-gen: error: --dense-blocks 4 leaves no MoE block (--blocks 4)\n"},
        {"--preset huge", "gguf-reap-gen: error: --preset huge: unknown preset (tiny, demo, kimi-k3)\n"},
        {"--shards 500", "gguf-reap-gen: error: --shards 500: the model has only"},
        {"--alignment 48", "gguf-reap-gen: error: --alignment 48: must be a power of two\n"},
        {"--heads 3", "gguf-reap-gen: error: --embd 128 is not a multiple of --heads 3\n"},
        {"--embd 100",
         "gguf-reap-gen: error: --type-embd Q8_0: token_embd.weight has rows of 100 elements (--embd)"},
        {"--blocks x", "gguf-reap-gen: error:"},
        {"--bogus", "gguf-reap-gen: error:"},
    };
    for (const auto& [args, msg] : cases) {
        const auto r = run_gen(fmt::format("model --skeleton -o {} {}", out, args));
        EXPECT_EQ(r.exit_code, 2) << args;
        EXPECT_EQ(r.err.substr(0, msg.size()), msg) << args;
        EXPECT_TRUE(r.out.empty()) << args;
    }
    EXPECT_TRUE(std::filesystem::is_empty(d.path())) << "nothing written, not even a temporary";
    const auto r = run_gen(fmt::format("model --skeleton --preset tiny"));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--output is required"), std::string::npos) << r.err;
}

// `each FILE` runs a command per line in one process: the same bytes as one process per command; a line
// that fails is named, leaves no file, and the lines after it still run; the exit is the first failure's.
TEST(GenEach, RunsEveryLineAsItsOwnCommandWouldRun) {
    TempDir d;
    gen(fmt::format("model --arch qwen3moe -o {} --set-key qwen3moe.expert_count=4", d.file("alone.gguf")));
    std::ofstream(d.file("each")) << fmt::format(
                                         "model --arch qwen3moe -o {} --set-key qwen3moe.expert_count=4\n",
                                         d.file("a.gguf"))
                                  << fmt::format("model --arch nosuch -o {}\n\n", d.file("b.gguf"))
                                  << fmt::format("model --arch afmoe -o {}\n", d.file("c.gguf"));
    const auto r = run_gen("each " + d.file("each"));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(d.file("each") + ": line 2 exited 2"), std::string::npos) << r.err;
    EXPECT_EQ(sha256_of(d.file("a.gguf")), sha256_of(d.file("alone.gguf")));
    EXPECT_FALSE(std::filesystem::exists(d.file("b.gguf")));
    EXPECT_TRUE(std::filesystem::exists(d.file("c.gguf")));
    EXPECT_EQ(run_gen("each " + d.file("missing")).exit_code, 2);
}

// The architecture table (model/architectures.cpp) and the generator's presets (tools/gen/archs/) name
// the same architectures: adding one to either without the other fails here, naming it.
TEST(GenModel, PresetsAreTheArchitectureTable) {
    const auto r = run_gen("model --list-archs");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::set<std::string> presets;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
        if (!line.empty()) presets.insert(line);
    std::set<std::string> table;
    for (const ArchInfo& a : architectures()) table.emplace(a.name);
    for (const auto& p : presets) EXPECT_TRUE(table.count(p)) << p << ": a generator preset, not in kArchs";
    for (const auto& a : table)
        EXPECT_TRUE(presets.count(a)) << a << ": in kArchs, without a generator preset";
    EXPECT_EQ(presets.size(), architectures().size());
}

// Which optional expert tensors a preset writes is the table's ArchInfo::takes: every architecture that
// can hold experts writes each one its loader creates, and refuses the others centrally, naming the
// option (tools/gen/model.cpp). hy_v3 takes a selection bias, but one named without a suffix, which
// its preset always writes and --probs-bias cannot name. Under the sanitizers, the architectures of the
// live sample, which between them take and refuse each option: 240 instrumented generators took two
// minutes of that pass.
TEST(GenModel, OptionalExpertTensorsFollowTheArchitectureTable) {
    TempDir d;
    const std::string out = d.file("m.gguf");
    struct Option {
        const char* flag;
        uint8_t bit;
    };
    const Option options[] = {{"--router-bias", ArchTakes::kRouterBias},
                              {"--exps-bias", ArchTakes::kExpsBias},
                              {"--probs-bias", ArchTakes::kProbsBias},
                              {"--fused-gate-up", ArchTakes::kFusedGateUp}};
    size_t taken = 0, refused = 0;
    const auto sample = test::live_sample_archs();
    const bool sampled = test::sanitizer_pass();
    std::set<std::pair<uint8_t, bool>> seen;  // (option, taken): each must occur, sampled or not
    for (const ArchInfo& a : architectures()) {
        if (a.status == ArchStatus::kNoExperts) continue;
        if (sampled && std::find(sample.begin(), sample.end(), a.name) == sample.end()) continue;
        for (const Option& o : options) {
            if (a.name == "hy_v3" && o.bit == ArchTakes::kProbsBias) continue;
            const auto r = run_gen(fmt::format("model --arch {} {} -o {}", a.name, o.flag, out));
            seen.emplace(o.bit, a.takes_tensor(o.bit));
            if (a.takes_tensor(o.bit)) {
                ++taken;
                EXPECT_EQ(r.exit_code, 0) << a.name << " " << o.flag << ": " << r.err;
            } else {
                ++refused;
                EXPECT_EQ(r.exit_code, 2) << a.name << " " << o.flag;
                EXPECT_NE(r.err.find(fmt::format("{}: {}'s loader creates no ", o.flag, a.name)),
                          std::string::npos)
                    << r.err;
            }
        }
    }
    EXPECT_EQ(seen.size(), std::size(options) * 2) << "an option is never taken, or never refused";
    if (!sampled) {
        EXPECT_GE(taken, 30u);
        EXPECT_GE(refused, 150u);
    }
    // A preset's default counts as asked for: demo writes exp_probs_b, which qwen3moe's loader lacks.
    const auto demo = run_gen(fmt::format("model --arch qwen3moe --preset demo -o {}", out));
    EXPECT_EQ(demo.exit_code, 2);
    EXPECT_NE(
        demo.err.find("--probs-bias: qwen3moe's loader creates no exp_probs_b.bias (--preset demo sets it)"),
        std::string::npos)
        << demo.err;
}

}  // namespace
}  // namespace gguf_reap
