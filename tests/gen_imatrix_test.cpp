// The fixture generator's imatrix files: read back by gguf-reap's own parser and checked against the
// generator's --truth, in both formats, for split models, nextn blocks and fused gate_up.
#include "gen_test_support.h"

namespace gguf_reap {
namespace {

using namespace gen_test;
using nlohmann::json;
using test::run_gen;
using test::TempDir;

// ---- imatrix ---------------------------------------------------------------------------------------

struct ImatrixCase {
    TempDir d;
    std::string model;
    ImatrixCase(const std::string& model_args = "") {
        model = d.file("m.gguf");
        gen(fmt::format("model --skeleton -o {} {}", model, model_args));
    }
};

TEST(GenImatrix, GgufMatchesTruth) {
    ImatrixCase c;
    const std::string im = c.d.file("chat.imatrix.gguf"), truth = c.d.file("t.json");
    gen(
        fmt::format("imatrix --model {} -o {} --domain chat --tokens 4096 --chunk-size 512 --dead 1:3,2:0 "
                    "--super 2:5 --truth {}",
                    c.model, im, truth));
    const json t = load_json(truth);
    ImatrixFile f = ImatrixFile::open(im);
    EXPECT_EQ(f.kind(), ImatrixKind::kGguf);
    EXPECT_EQ(f.datasets(), std::vector<std::string>{"chat"});
    EXPECT_EQ(f.chunk_size(), 512u);
    EXPECT_EQ(f.chunk_count(), 8u);
    // Exactly llama-imatrix's four KVs, in its order, and alignment 32.
    const Header h = parse_gguf_header(f.file());
    ASSERT_EQ(h.kvs.size(), 4u);
    EXPECT_EQ(h.kvs[0].key, "general.type");
    EXPECT_EQ(h.kvs[1].key, "imatrix.datasets");
    EXPECT_EQ(h.kvs[2].key, "imatrix.chunk_count");
    EXPECT_EQ(h.kvs[2].type, GgufType::kUint32);
    EXPECT_EQ(h.kvs[3].key, "imatrix.chunk_size");
    EXPECT_EQ(h.alignment, 32u);
    ASSERT_EQ(h.tensors.size(), 2 * f.entries().size());
    for (size_t i = 0; i < f.entries().size(); ++i) {
        EXPECT_EQ(h.tensors[2 * i].name, f.entries()[i].name + ".in_sum2");
        EXPECT_EQ(h.tensors[2 * i + 1].name, f.entries()[i].name + ".counts");
        if (i > 0) {
            EXPECT_LT(f.entries()[i - 1].name, f.entries()[i].name) << "sorted by name";
        }
    }
    std::vector<std::string> names;
    for (const auto& e : f.entries()) names.push_back(e.name);
    EXPECT_EQ(t["entries"].get<std::vector<std::string>>(), names);
    // 3 MoE blocks × (gate, up, down) + per block attn q/k/v/output + router (MoE) + dense or shexp FFN.
    EXPECT_EQ(names.size(), 3u * 3 + 4 * 4 + 3 + 3 + 3 * 3);

    const ImatrixEntry* dense = f.find("blk.0.attn_q.weight");
    ASSERT_NE(dense, nullptr);
    EXPECT_EQ(dense->n_mat, 1);
    EXPECT_EQ(dense->ne0, 128);
    EXPECT_EQ(f.read_counts(*dense), std::vector<float>{4096.0f});
    const ImatrixEntry* router = f.find("blk.1.ffn_gate_inp.weight");
    ASSERT_NE(router, nullptr);
    EXPECT_EQ(router->n_mat, 1);

    ASSERT_EQ(t["blocks"].size(), 3u);
    for (const json& b : t["blocks"]) {
        const int blk = b["block"];
        SCOPED_TRACE(blk);
        const auto counts = b["counts"].get<std::vector<int64_t>>();
        int64_t sum = 0;
        for (int64_t x : counts) sum += x;
        EXPECT_EQ(sum, 4096 * 4) << "every token routes to expert_used_count experts";
        const auto* gate = f.find(fmt::format("blk.{}.ffn_gate_exps.weight", blk));
        const auto* up = f.find(fmt::format("blk.{}.ffn_up_exps.weight", blk));
        const auto* down = f.find(fmt::format("blk.{}.ffn_down_exps.weight", blk));
        ASSERT_TRUE(gate && up && down);
        EXPECT_EQ(gate->n_mat, 16);
        EXPECT_EQ(gate->ne0, 128);
        EXPECT_EQ(down->ne0, 64);
        const auto fc = f.read_counts(*down);
        ASSERT_EQ(fc.size(), 16u);
        for (size_t e = 0; e < 16; ++e) EXPECT_EQ(fc[e], static_cast<float>(counts[e]));
        EXPECT_EQ(f.read_counts(*gate), fc);
        EXPECT_EQ(f.read_values(*gate), f.read_values(*up)) << "gate and up read the same input";
        const auto sums = f.read_values(*down);
        const auto energy = b["down_energy"].get<std::vector<double>>();
        for (size_t e = 0; e < 16; ++e) {
            double s = 0;
            for (size_t j = 0; j < 64; ++j) s += sums[e * 64 + j];
            EXPECT_NEAR(s, energy[e], 1e-6 * s) << e;
            if (counts[e] > 0) {
                const double per = s / 64 / static_cast<double>(counts[e]);
                if (b["super"].empty() || b["super"][0] != e) {
                    EXPECT_GE(per, 0.2);
                    EXPECT_LT(per, 0.3);
                }
            } else {
                EXPECT_EQ(s, 0.0);
            }
        }
        const auto dead = b["dead"].get<std::vector<int64_t>>();
        for (int64_t e : dead) EXPECT_EQ(counts[static_cast<size_t>(e)], 0);
        for (size_t e = 0; e < 16; ++e) {
            if (std::find(dead.begin(), dead.end(), static_cast<int64_t>(e)) == dead.end()) {
                EXPECT_GT(counts[e], 0) << "live experts are routed";
            }
        }
    }
    EXPECT_EQ(t["blocks"][0]["dead"], json({3}));
    EXPECT_EQ(t["blocks"][1]["dead"], json({0}));
    EXPECT_EQ(t["blocks"][1]["super"], json({5}));
    // The super expert: routed often, ~50× the energy per channel, one outlier channel ~100× its mean.
    const json& b2 = t["blocks"][1];
    const auto counts = b2["counts"].get<std::vector<int64_t>>();
    EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), counts[5]);
    const auto sums = f.read_values(*f.find("blk.2.ffn_down_exps.weight"));
    const int64_t ch = b2["super_channel"]["5"];
    double mean = 0;
    for (size_t j = 0; j < 64; ++j)
        if (static_cast<int64_t>(j) != ch) mean += sums[5 * 64 + j] / 63.0;
    EXPECT_NEAR(mean / static_cast<double>(counts[5]), 12.5, 2.6);
    EXPECT_GT(sums[5 * 64 + static_cast<size_t>(ch)], 90 * mean);
}

TEST(GenImatrix, DatGenerationsReadBackAsSpecified) {
    ImatrixCase c;
    const std::string g = c.d.file("x.gguf");
    const std::string common =
        fmt::format("--model {} --tokens 1000 --chunk-size 256 --dead 2:4 --seed 3", c.model);
    gen(fmt::format("imatrix {} -o {} --truth {}", common, g, c.d.file("t.json")));
    const ImatrixFile ref = ImatrixFile::open(g);
    const json truth = load_json(c.d.file("t.json"));
    for (const char* generation : {"current", "partial-skip", "nan"}) {
        SCOPED_TRACE(generation);
        const std::string dat = c.d.file(fmt::format("{}.dat", generation));
        gen(fmt::format("imatrix {} -o {} --format dat --dat-generation {} --truth {}", common, dat,
                        generation, c.d.file("d.json")));
        const json dt = load_json(c.d.file("d.json"));
        ImatrixFile f = ImatrixFile::open(dat);
        EXPECT_EQ(f.kind(), ImatrixKind::kLegacy);
        EXPECT_EQ(f.chunk_count(), 4u);  // ceil(1000 / 256)
        EXPECT_EQ(f.datasets(), std::vector<std::string>{"synthetic"});
        const bool partial = std::string(generation) == "partial-skip";
        EXPECT_EQ(f.entries().size(), ref.entries().size() - (partial ? 3 : 0));
        EXPECT_EQ(f.find("blk.2.ffn_down_exps.weight") == nullptr, partial);
        EXPECT_EQ(dt["skipped_entries"].size(), partial ? 3u : 0u);
        for (const ImatrixEntry& e : f.entries()) {
            const ImatrixEntry* r = ref.find(e.name);
            ASSERT_NE(r, nullptr) << e.name;
            const auto rs = ref.read_values(*r), rc = ref.read_counts(*r), v = f.read_values(e);
            ASSERT_EQ(v.size(), rs.size()) << e.name;
            const float max_count = *std::max_element(rc.begin(), rc.end());
            EXPECT_EQ(e.ncall, static_cast<int32_t>(std::ceil(max_count / 256.0f))) << e.name;
            const size_t ne0 = rs.size() / rc.size();
            for (size_t i = 0; i < v.size(); ++i) {
                const float count = rc[i / ne0];
                if (count > 0)
                    EXPECT_FLOAT_EQ(v[i], rs[i] / count * static_cast<float>(e.ncall)) << e.name << " " << i;
                else if (std::string(generation) == "nan")
                    EXPECT_TRUE(std::isnan(v[i])) << e.name << " " << i;
                else
                    EXPECT_EQ(v[i], static_cast<float>(e.ncall)) << e.name << " " << i;
            }
        }
        EXPECT_EQ(dt["blocks"][1]["counts"], truth["blocks"][1]["counts"]);
    }
}

TEST(GenImatrix, SplitModelNextnAndFusedGateUp) {
    ImatrixCase c("--nextn 1 --fused-gate-up --shards 2");
    const std::string shard2 = c.d.file("m-00002-of-00002.gguf");
    gen(fmt::format("imatrix --model {} -o {} --truth {}", shard2, c.d.file("a.gguf"), c.d.file("a.json")));
    ImatrixFile a = ImatrixFile::open(c.d.file("a.gguf"));
    const auto* gu = a.find("blk.4.ffn_gate_up_exps.weight");
    ASSERT_NE(gu, nullptr) << "the nextn block is covered by default";
    EXPECT_EQ(gu->ne0, 128);
    EXPECT_EQ(gu->n_mat, 16);
    EXPECT_NE(a.find("blk.4.nextn.eh_proj.weight"), nullptr);
    EXPECT_EQ(a.find("blk.1.ffn_gate_exps.weight"), nullptr);
    const json t = load_json(c.d.file("a.json"));
    EXPECT_EQ(t["blocks"].size(), 4u);
    EXPECT_TRUE(t["blocks"][3]["nextn"].get<bool>());

    gen(fmt::format("imatrix --model {} -o {} --no-nextn", shard2, c.d.file("b.gguf")));
    ImatrixFile b = ImatrixFile::open(c.d.file("b.gguf"));
    for (const auto& e : b.entries()) EXPECT_NE(e.name.rfind("blk.4.", 0), 0u) << e.name;
    EXPECT_NE(b.find("blk.3.ffn_gate_up_exps.weight"), nullptr);
}

TEST(GenImatrix, DomainsSkewPopularityAndShareDeadExperts) {
    ImatrixCase c;
    for (const char* domain : {"chat", "code"})
        gen(fmt::format("imatrix --model {} -o {} --domain {} --dead-per-block 2 --truth {}", c.model,
                        c.d.file(std::string(domain) + ".gguf"), domain,
                        c.d.file(std::string(domain) + ".json")));
    gen(fmt::format("imatrix --model {} -o {} --domain chat --dead-per-block 2", c.model,
                    c.d.file("again.gguf")));
    EXPECT_EQ(sha256_of(c.d.file("chat.gguf")), sha256_of(c.d.file("again.gguf")));
    const json chat = load_json(c.d.file("chat.json")), code = load_json(c.d.file("code.json"));
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(chat["blocks"][i]["dead"].size(), 2u);
        EXPECT_EQ(chat["blocks"][i]["dead"], code["blocks"][i]["dead"]);
        EXPECT_NE(chat["blocks"][i]["counts"], code["blocks"][i]["counts"]);
    }
}

TEST(GenImatrix, BadArgumentsExitTwoNamingTheOption) {
    ImatrixCase c;
    const std::string out = c.d.file("x.gguf");
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--dead 0:1",
         "gguf-reap-gen: error: --dead 0:1: block 0 has no routed experts in this imatrix (MoE "
         "blocks: 1,2,3)\n"},
        {"--dead 1:16",
         "gguf-reap-gen: error: --dead 1:16: expert 16 is out of range (expert_count is 16)\n"},
        {"--dead 1-2", "gguf-reap-gen: error: --dead 1-2: expected BLOCK:EXPERT pairs"},
        {"--dead 1:2 --super 1:2", "gguf-reap-gen: error: --dead 1:2: expert is also given as --super\n"},
        {"--dead-per-block 13",
         "gguf-reap-gen: error: block 1: 13 dead experts leave 3 live, fewer than expert_used_count (4)\n"},
        {"--tokens 2",
         "gguf-reap-gen: error: --tokens 2: 2 tokens × 4 experts each cannot reach all 16 live "
         "experts of block 1; raise --tokens\n"},
        {"--tokens 20000000", "gguf-reap-gen: error: --tokens 20000000: must be 1..16777216"},
        {"--format bin", "gguf-reap-gen: error: --format bin: must be gguf or dat\n"},
        {"--dat-generation old",
         "gguf-reap-gen: error: --dat-generation old: must be current, partial-skip or nan\n"},
    };
    for (const auto& [args, msg] : cases) {
        const auto r = run_gen(fmt::format("imatrix --model {} -o {} {}", c.model, out, args));
        EXPECT_EQ(r.exit_code, 2) << args;
        EXPECT_EQ(r.err.substr(0, msg.size()), msg) << args;
    }
    EXPECT_FALSE(std::filesystem::exists(out));
    auto r = run_gen(fmt::format("imatrix --model {} -o {}", c.model, c.model));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("that is the model itself"), std::string::npos) << r.err;
    r = run_gen(fmt::format("imatrix --model {} -o {}", c.d.file("missing.gguf"), out));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("missing.gguf: does not exist"), std::string::npos) << r.err;
}

// Against a real llama.cpp model and its real imatrix: the generator covers exactly the weights
// llama-imatrix covers, with the same shapes.
TEST(GenImatrix, CoversWhatLlamaImatrixCoversOnARealModel) {
    REQUIRE_FIXTURES();
    TempDir d;
    gen(fmt::format("imatrix --model {} -o {}", test::fixture("models/tiny-deepseek2-Q8_0.gguf"),
                    d.file("x.gguf")));
    ImatrixFile ours = ImatrixFile::open(d.file("x.gguf"));
    ImatrixFile real = ImatrixFile::open(test::fixture("imatrix/tiny-deepseek2.chat.imatrix.gguf"));
    ASSERT_EQ(ours.entries().size(), real.entries().size());
    for (size_t i = 0; i < ours.entries().size(); ++i) {
        EXPECT_EQ(ours.entries()[i].name, real.entries()[i].name);
        EXPECT_EQ(ours.entries()[i].ne0, real.entries()[i].ne0) << real.entries()[i].name;
        EXPECT_EQ(ours.entries()[i].n_mat, real.entries()[i].n_mat) << real.entries()[i].name;
    }
}

}  // namespace
}  // namespace gguf_reap
