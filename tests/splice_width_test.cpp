// splice --neuron-plan: generated models width-spliced with hand-made plans, every output element
// checked against the source by code of this test (not splice's), the KVs it changes, the imatrix it
// prunes, and the refusals (illegal K, a plan for another model).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include <fmt/format.h>

#include "format/gguf.h"
#include "format/imatrix.h"
#include "format/npz.h"
#include "gguf_reap/splice.h"
#include "io/input_file.h"
#include "model/provenance.h"
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

std::string gen_model(const TempDir& dir, const std::string& name, const std::string& args) {
    const std::string path = dir.file(name + ".gguf");
    const auto r = test::run_gen(fmt::format("model --skeleton -o {} {}", path, args));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
}

// Every tensor of `out` against `src`, element by element: the slicing contract of docs/splice.md.
void check_width_output(const ShardSet& src, const ShardSet& out, const Plan& plan,
                        const std::vector<int64_t>& kept, int64_t n_ff) {
    ASSERT_EQ(src.tensors().size(), out.tensors().size());
    const int64_t E = static_cast<int64_t>(*src.arch_uint("expert_count"));
    const auto K = static_cast<size_t>(plan.k);
    for (size_t i = 0; i < src.tensors().size(); ++i) {
        const TensorInfo& s = src.info(src.tensors()[i]);
        const TensorInfo& o = out.info(out.tensors()[i]);
        SCOPED_TRACE(s.name);
        ASSERT_EQ(s.name, o.name);
        ASSERT_EQ(s.type, o.type);
        const auto a = tensor_bytes(src, src.tensors()[i]);
        const auto b = tensor_bytes(out, out.tensors()[i]);
        const bool expert =
            has(s.name, "_exps.") || has(s.name, "ffn_gate_inp.") || has(s.name, "exp_probs_b");
        if (!expert) {
            EXPECT_EQ(s.ne, o.ne);
            EXPECT_TRUE(a == b) << "changed";
            continue;
        }
        const int block = std::stoi(s.name.substr(4));
        const auto N = kept.size();
        // The expert axis is the last non-trivial one; everything before it is one expert's slab.
        const int axis = s.ne[2] == E ? 2 : s.ne[1] == E ? 1 : 0;
        ASSERT_EQ(o.ne[axis], static_cast<int64_t>(N));
        const uint64_t src_slab = a.size() / static_cast<uint64_t>(E), out_slab = b.size() / N;
        const bool rows = has(s.name, "ffn_gate_exps.weight") || has(s.name, "ffn_up_exps.weight");
        const bool fused = has(s.name, "ffn_gate_up_exps.weight");
        const bool fused_bias = has(s.name, "ffn_gate_up_exps.bias");  // gate elements, then up elements
        const bool columns = has(s.name, "ffn_down_exps.weight") || has(s.name, "ffn_gate_exps.bias") ||
                             has(s.name, "ffn_up_exps.bias") || fused_bias;
        for (size_t ei = 0; ei < N; ++ei) {
            const int64_t e = kept[ei];
            const uint8_t* from = a.data() + static_cast<uint64_t>(e) * src_slab;
            const uint8_t* to = b.data() + ei * out_slab;
            const std::vector<int64_t>& ch = plan.sorted.at({block, e});
            if (rows || fused) {
                ASSERT_EQ(o.ne[1], static_cast<int64_t>(fused ? 2 * K : K));
                const uint64_t row = src_slab / static_cast<uint64_t>(s.ne[1]);
                for (size_t j = 0; j < (fused ? 2 * K : K); ++j) {
                    const int64_t c = j < K ? ch[j] : n_ff + ch[j - K];
                    ASSERT_EQ(std::memcmp(to + j * row, from + static_cast<uint64_t>(c) * row, row), 0)
                        << "expert " << e << " row " << j;
                }
            } else if (columns) {
                const size_t halves = fused_bias ? 2 : 1;
                ASSERT_EQ(o.ne[0], static_cast<int64_t>(halves * K));
                const uint64_t elem = src_slab / static_cast<uint64_t>(n_ff) / halves /
                                      static_cast<uint64_t>(axis == 2 ? s.ne[1] : 1);
                const int64_t n_rows = axis == 2 ? s.ne[1] : 1;
                for (int64_t r = 0; r < n_rows; ++r)
                    for (size_t j = 0; j < halves * K; ++j) {
                        const int64_t c = static_cast<int64_t>(j / K) * n_ff + ch[j % K];
                        ASSERT_EQ(std::memcmp(to + (static_cast<uint64_t>(r) * halves * K + j) * elem,
                                              from + static_cast<uint64_t>(
                                                         r * static_cast<int64_t>(halves) * n_ff + c) *
                                                         elem,
                                              elem),
                                  0)
                            << "expert " << e << " row " << r << " channel " << c;
                    }
            } else {
                if (axis > 0) {
                    EXPECT_EQ(s.ne[0], o.ne[0]);
                }
                ASSERT_EQ(src_slab, out_slab);
                ASSERT_EQ(std::memcmp(to, from, src_slab), 0) << "expert " << e;
            }
        }
    }
}

std::vector<int64_t> all_experts(const ShardSet& m) {
    std::vector<int64_t> v(*m.arch_uint("expert_count"));
    std::iota(v.begin(), v.end(), 0);
    return v;
}

struct Case {
    std::string gen_args;
    int64_t k;
    bool keeplist;
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << "gen model " << c.gen_args << ", K = " << c.k << (c.keeplist ? ", with keeplist" : "");
}

class SpliceWidth : public ::testing::TestWithParam<Case> {};

TEST_P(SpliceWidth, EveryElementFollowsThePlan) {
    const Case& c = GetParam();
    TempDir dir;
    const std::string model = gen_model(dir, "src", c.gen_args);
    const ShardSet src = ShardSet::open(model);
    const auto blocks = moe_blocks(src);
    const int64_t E = static_cast<int64_t>(*src.arch_uint("expert_count"));
    const int64_t n_ff = static_cast<int64_t>(*src.arch_uint("expert_feed_forward_length"));
    const Plan plan = make_plan(dir.file("plan.npz"), blocks, E, n_ff, c.k, 7);
    std::vector<int64_t> kept = all_experts(src);
    std::string keeplist_arg;
    if (c.keeplist) {
        // Drop experts 1 and 4 in every block.
        nlohmann::json drop;
        for (int b : blocks) drop[std::to_string(b)] = {1, 4};
        test::write_file(dir.file("keep.json"), [&] {
            const std::string t = nlohmann::json{{"drop", drop}}.dump();
            return std::vector<uint8_t>(t.begin(), t.end());
        }());
        keeplist_arg = "--keeplist " + dir.file("keep.json");
        kept.erase(std::remove_if(kept.begin(), kept.end(), [](int64_t e) { return e == 1 || e == 4; }),
                   kept.end());
    }
    const auto r = test::run_cli(fmt::format("splice {} {} --neuron-plan {} -o {} --json", model,
                                             keeplist_arg, plan.path, dir.file("out")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["expert_width"]["native"], n_ff);
    EXPECT_EQ(j["expert_width"]["k"], c.k);
    EXPECT_EQ(j["expert_count"], kept.size());

    const ShardSet out = ShardSet::open(dir.file("out.gguf"));  // re-read by the GGUF reader
    check_width_output(src, out, plan, kept, n_ff);

    // KVs: the width, the expert count, the shared count where derived, provenance.
    EXPECT_EQ(out.arch_uint("expert_feed_forward_length"), static_cast<uint64_t>(c.k));
    EXPECT_EQ(out.arch_uint("expert_count"), kept.size());
    const std::string arch = *src.find_kv("general.architecture")->as_string();
    const TensorRef* shexp = src.find_tensor(fmt::format("blk.{}.ffn_down_shexp.weight", blocks.front()));
    if (arch == "deepseek2" && shexp)
        EXPECT_EQ(out.arch_uint("expert_shared_count"), static_cast<uint64_t>(src.info(*shexp).ne[0] / c.k));
    else
        EXPECT_EQ(out.arch_uint("expert_shared_count"), src.arch_uint("expert_shared_count"));
    const std::string sha =
        test::sha256_hex(test::read_file(plan.path).data(), test::read_file(plan.path).size());
    ASSERT_NE(out.find_kv(kProvenanceNeuronPlanShaKey), nullptr);
    EXPECT_EQ(out.find_kv(kProvenanceNeuronPlanShaKey)->as_string(), sha);
    EXPECT_EQ(out.find_kv(kProvenanceSourceExpertWidthKey)->as_uint(), static_cast<uint64_t>(n_ff));
    // The width keys come last, after the keep-experts provenance.
    const auto& kvs = out.metadata().kvs;
    ASSERT_GE(kvs.size(), 2u);
    EXPECT_EQ(kvs[kvs.size() - 2].key, kProvenanceNeuronPlanShaKey);
    EXPECT_EQ(kvs[kvs.size() - 1].key, kProvenanceSourceExpertWidthKey);
    if (!c.keeplist) {
        EXPECT_EQ(out.find_kv(kProvenanceKeeplistShaKey)->as_string(),
                  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}

INSTANTIATE_TEST_SUITE_P(
    Models, SpliceWidth,
    ::testing::Values(
        // deepseek2 F16 with 3 shared experts: W = 192, K = 48 → expert_shared_count 4.
        Case{"--type-exps F16 --shared 3", 48, false}, Case{"--type-exps F16 --shared 3", 24, true},
        Case{"--type-exps F32 --shared 0", 20, true},
        Case{"--type-exps BF16 --shared 2 --nextn 1", 32, false},
        // Quantized gate/up rows are copied whole; only the F16 down projection loses columns.
        Case{"--type-exps Q8_0 --type-down F16", 16, true},
        Case{"--type-exps Q4_K --type-down BF16 --embd 256", 64, true},
        Case{"--type-exps F16 --fused-gate-up --scales --probs-bias --router-bias", 32, true},
        Case{"--arch gpt-oss --type-exps BF16 --exps-bias --shared 0 --router-bias", 24, true}),
    [](const ::testing::TestParamInfo<Case>& i) { return fmt::format("case{}", i.index); });

// A qwen3moe model without <arch>.expert_feed_forward_length (its loader falls back to
// feed_forward_length / expert_used_count): the width cut adds the key, a u32, right after expert_count.
TEST(SpliceWidthKvs, MissingWidthKeyIsAddedAfterExpertCount) {
    TempDir dir;
    const std::string full = gen_model(dir, "full", "--arch qwen3moe --type-exps F16 --shared 0");
    const auto bytes = test::read_file(full);
    Header h = parse_gguf_header(*InputFile::open(full));
    std::erase_if(h.kvs, [](const Kv& kv) { return kv.key == "qwen3moe.expert_feed_forward_length"; });
    std::vector<uint8_t> out = serialize_header(h.version, h.kvs, h.tensors, h.alignment);
    out.insert(out.end(), bytes.begin() + static_cast<ptrdiff_t>(h.data_start), bytes.end());
    const std::string model = dir.file("m.gguf");
    test::write_file(model, out);
    const ShardSet src = ShardSet::open(model);
    ASSERT_EQ(src.find_kv("qwen3moe.expert_feed_forward_length"), nullptr);
    const Plan plan = make_plan(dir.file("plan.npz"), moe_blocks(src), 16, 64, 24, 5);
    const auto r =
        test::run_cli(fmt::format("splice {} --neuron-plan {} -o {}", model, plan.path, dir.file("out")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const ShardSet o = ShardSet::open(dir.file("out.gguf"));
    const auto& kvs = o.metadata().kvs;
    const auto at =
        std::find_if(kvs.begin(), kvs.end(), [](const Kv& kv) { return kv.key == "qwen3moe.expert_count"; });
    ASSERT_NE(at, kvs.end());
    ASSERT_NE(at + 1, kvs.end());
    EXPECT_EQ((at + 1)->key, "qwen3moe.expert_feed_forward_length");
    EXPECT_EQ((at + 1)->type, GgufType::kUint32);
    EXPECT_EQ((at + 1)->as_uint(), 24u);
    // + the width key, 3 provenance keys, one kept list per MoE block, the plan's 2, and with a name the
    // two base-model keys (docs/splice.md, "Name and base model").
    EXPECT_EQ(kvs.size(), src.metadata().kvs.size() + 1 + 3 + moe_blocks(src).size() + 2 +
                              (src.find_kv("general.name") ? 2 : 0));
    check_width_output(src, o, plan, all_experts(src), 64);
}

// A quantized down projection cut by a plan that is not whole quant blocks: splice_width_blocks_test.cpp.

TEST(SpliceWidthRefusal, IllegalKListsTheLegalWidths) {
    TempDir dir;
    // deepseek2, W = 64: K must divide 64.
    const std::string model = gen_model(dir, "m", "--type-exps F16");
    const ShardSet src = ShardSet::open(model);
    make_plan(dir.file("plan.npz"), moe_blocks(src), 16, 64, 48, 1);
    const auto r = test::run_cli(
        fmt::format("splice {} --neuron-plan {} -o {}", model, dir.file("plan.npz"), dir.file("out")));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "K = 48 is not a legal expert width for " + model)) << r.err;
    EXPECT_TRUE(has(r.err, "legal widths are {1, 2, 4, 8, 16, 32, 64}")) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.gguf")));
}

TEST(SpliceWidthRefusal, PlanForAnotherModel) {
    TempDir dir;
    const std::string model = gen_model(dir, "m", "--type-exps F16");
    const ShardSet src = ShardSet::open(model);
    make_plan(dir.file("plan.npz"), moe_blocks(src), 8, 64, 32, 1);  // 8 experts, the model has 16
    const auto r = test::run_cli(
        fmt::format("splice {} --neuron-plan {} -o {}", model, dir.file("plan.npz"), dir.file("out")));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, dir.file("plan.npz"))) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.gguf")));
    // Channel ids beyond the model's width.
    make_plan(dir.file("wide.npz"), moe_blocks(src), 16, 128, 32, 1);
    const auto w = test::run_cli(
        fmt::format("splice {} --neuron-plan {} -o {}", model, dir.file("wide.npz"), dir.file("out")));
    EXPECT_EQ(w.exit_code, 2);
    EXPECT_TRUE(has(w.err, dir.file("wide.npz"))) << w.err;
}

TEST(SpliceWidthRefusal, NeitherKeeplistNorPlan) {
    TempDir dir;
    const std::string model = gen_model(dir, "m", "--type-exps F16");
    const auto r = test::run_cli(fmt::format("splice {} -o {}", model, dir.file("out")));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "gguf-reap: error: splice needs --keeplist, --neuron-plan or both: nothing to prune\n");
}

TEST(SpliceWidthKeepAll, FullWidthPlanIsAByteIdenticalCopy) {
    TempDir dir;
    const std::string model = gen_model(dir, "m", "--type-exps F16 --fused-gate-up --nextn 1");
    const ShardSet src = ShardSet::open(model);
    const auto blocks = moe_blocks(src);
    // Channels 0..63 in order for every pair.
    std::vector<uint16_t> ch;
    for (size_t p = 0; p < blocks.size() * 16; ++p)
        for (uint16_t c = 0; c < 64; ++c) ch.push_back(c);
    write_npz(dir.file("plan.npz"),
              {{"channels", NpyArray::u16({static_cast<int64_t>(blocks.size() * 16), 64}, ch)}});
    const auto r = test::run_cli(fmt::format("splice {} --neuron-plan {} --no-provenance -o {}", model,
                                             dir.file("plan.npz"), dir.file("out")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(test::read_file(model) == test::read_file(dir.file("out.gguf")));
}

// The imatrix read back: per entry name, its values per expert row and its counts.
struct ImatrixValues {
    std::map<std::string, std::vector<float>> values;
    std::map<std::string, std::vector<float>> counts;
};
ImatrixValues read_imatrix(const std::string& path) {
    ImatrixValues v;
    const ImatrixFile f = ImatrixFile::open(path);
    for (const ImatrixEntry& e : f.entries()) {
        v.values[e.name] = f.read_values(e);
        if (f.kind() == ImatrixKind::kGguf) v.counts[e.name] = f.read_counts(e);
    }
    return v;
}

TEST(SpliceWidthImatrix, DownEntriesKeepTheKeptChannelsOfKeptExperts) {
    TempDir dir;
    const std::string model = gen_model(dir, "m", "--type-exps F16 --shared 2");
    const ShardSet src = ShardSet::open(model);
    const auto blocks = moe_blocks(src);
    const Plan plan = make_plan(dir.file("plan.npz"), blocks, 16, 64, 32, 3);
    nlohmann::json drop;
    for (int b : blocks) drop[std::to_string(b)] = {0, 9};
    const std::string t = nlohmann::json{{"drop", drop}}.dump();
    test::write_file(dir.file("keep.json"), std::vector<uint8_t>(t.begin(), t.end()));
    std::vector<int64_t> kept;
    for (int64_t e = 0; e < 16; ++e)
        if (e != 0 && e != 9) kept.push_back(e);
    for (const std::string format : {"gguf", "dat"}) {
        SCOPED_TRACE(format);
        const std::string im = dir.file("im." + format), out_im = dir.file("pruned-im." + format);
        ASSERT_EQ(
            test::run_gen(fmt::format("imatrix --model {} -o {} --format {}", model, im, format)).exit_code,
            0);
        const auto r = test::run_cli(fmt::format(
            "splice {} --keeplist {} --neuron-plan {} --imatrix-in {} --imatrix-out {} -o {} --force", model,
            dir.file("keep.json"), plan.path, im, out_im, dir.file("out")));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const ImatrixValues a = read_imatrix(im), b = read_imatrix(out_im);
        ASSERT_EQ(a.values.size(), b.values.size());
        const ShardSet out = ShardSet::open(dir.file("out.gguf"));
        for (const auto& [name, va] : a.values) {
            SCOPED_TRACE(name);
            const std::vector<float>& vb = b.values.at(name);
            if (!has(name, "_exps")) {
                EXPECT_EQ(va, vb);
                continue;
            }
            const int block = std::stoi(name.substr(4));
            const bool down = has(name, "ffn_down_exps");
            const size_t ne0 = va.size() / 16, out_ne0 = down ? 32 : ne0;
            ASSERT_EQ(vb.size(), out_ne0 * kept.size());
            // What llama-quantize checks: values per expert == the pruned tensor's ne0.
            EXPECT_EQ(static_cast<int64_t>(out_ne0), out.info(*out.find_tensor(name)).ne[0]);
            for (size_t ei = 0; ei < kept.size(); ++ei)
                for (size_t j = 0; j < out_ne0; ++j) {
                    const size_t c = down ? static_cast<size_t>(plan.sorted.at({block, kept[ei]})[j]) : j;
                    ASSERT_EQ(vb[ei * out_ne0 + j], va[static_cast<size_t>(kept[ei]) * ne0 + c])
                        << "expert " << kept[ei] << " value " << j;
                }
            if (format == "gguf") {
                const std::vector<float>& ca = a.counts.at(name);
                const std::vector<float>& cb = b.counts.at(name);
                ASSERT_EQ(cb.size(), kept.size());
                for (size_t ei = 0; ei < kept.size(); ++ei)
                    EXPECT_EQ(cb[ei], ca[static_cast<size_t>(kept[ei])]);
            }
        }
    }
}

}  // namespace
}  // namespace gguf_reap
