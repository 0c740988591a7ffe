// End to end: models from gguf-reap-gen and the fixtures, pruned by the real `splice` binary, proved
// by the real `audit` binary. Covers the expert roles the llama.cpp fixtures lack (fused gate_up,
// expert biases and scales, router bias, nextn blocks, general.alignment 64) and the CLI contract.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "io/input_file.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

namespace fs = std::filesystem;
using test::run_cli;
using test::run_gen;

struct Located {
    std::string path;
    uint64_t abs = 0;
    uint64_t nbytes = 0;
};

Located locate(const std::vector<std::string>& shards, const std::string& tensor) {
    for (const auto& p : shards) {
        auto f = InputFile::open(p);
        const Header h = parse_gguf_header(*f);
        for (const auto& t : h.tensors)
            if (t.name == tensor) return {p, h.data_start + t.offset, t.nbytes};
    }
    ADD_FAILURE() << "no tensor " << tensor;
    return {};
}

class AuditSpliceTest : public ::testing::Test {
  protected:
    // A 2-shard generated model with every optional expert role, pruned to 14 of 16 experts into 3
    // shards by splice.
    void SetUp() override {
        const auto gen = run_gen(fmt::format(
            "model --skeleton --preset tiny --blocks 3 --dense-blocks 1 --nextn 1 --probs-bias --router-bias "
            "--exps-bias "
            "--scales --alignment 64 --type-exps Q4_0 --type-down Q8_0 --shards 2 -o {}",
            dir.file("gen")));
        ASSERT_EQ(gen.exit_code, 0) << gen.err;
        std::ofstream(dir.file("drop.json")) << R"({"drop": {"1": [0, 5], "2": [3, 4], "3": [1, 15]}})";
        const auto sp = run_cli(fmt::format("splice {} --keeplist {} -o {} --split-count 3 -q", source(),
                                            dir.file("drop.json"), dir.file("out")));
        ASSERT_EQ(sp.exit_code, 0) << sp.err;
        for (int i = 1; i <= 3; ++i) out.push_back(dir.file(fmt::format("out-0000{}-of-00003.gguf", i)));
    }
    std::string source() const { return dir.file("gen-00001-of-00002.gguf"); }

    test::TempDir dir;
    std::vector<std::string> out;
};

TEST_F(AuditSpliceTest, SpliceOutputPassesWithEveryExpertRole) {
    const auto r = run_cli(fmt::format("audit {} --source {} --json", out[1], source()));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto j = nlohmann::json::parse(r.out);  // exactly one document
    EXPECT_EQ(j["result"], "pass");
    EXPECT_EQ(j["kept_from"], "provenance");
    EXPECT_EQ(j["expert_count"]["output"], 14);
    EXPECT_EQ(j["summary"]["tensors"], 79);
    // Per MoE block (3): router weight + bias, exp_probs_b, gate, up and down weights, their biases and
    // scales.
    EXPECT_EQ(j["summary"]["expert_tensors"], 36);
    EXPECT_EQ(j["summary"]["slabs"], 36 * 14);
    EXPECT_EQ(j["findings"].size(), 0u);
    // The same against the keeplist, and from the other source shard.
    const auto k = run_cli(fmt::format("audit {} --source {} --keeplist {}", out[0],
                                       dir.file("gen-00002-of-00002.gguf"), dir.file("drop.json")));
    EXPECT_EQ(k.exit_code, 0) << k.out;
    EXPECT_NE(k.out.find("PASS: 3 shard(s), 79 tensors total"), std::string::npos) << k.out;
}

TEST_F(AuditSpliceTest, FlipsInBiasesScalesAndRouterBiasAreNamed) {
    struct Case {
        const char* tensor;
        uint64_t expert;
        const char* region;
        uint64_t source_expert;
    };
    // Block 1 drops experts 0 and 5: output expert 4 is source expert 6.
    const Case cases[] = {{"blk.1.ffn_down_exps.bias", 4, "expert bias", 6},
                          {"blk.1.ffn_up_exps.scale", 4, "expert scale", 6},
                          {"blk.1.ffn_gate_inp.bias", 4, "router bias", 6},
                          {"blk.3.ffn_up_exps.weight", 13, "kept slab", 14}};  // nextn block 3 drops 1 and 15
    for (const Case& c : cases) {
        SCOPED_TRACE(c.tensor);
        const Located w = locate(out, c.tensor);
        const uint64_t slab = w.nbytes / 14;
        const uint64_t at = w.abs + c.expert * slab + slab / 2;
        test::flip_byte(w.path, at);
        const auto r = run_cli(fmt::format("audit {} --source {} --json", out[0], source()));
        test::flip_byte(w.path, at);  // restore for the next case
        EXPECT_EQ(r.exit_code, 1) << r.err;
        const auto j = nlohmann::json::parse(r.out);
        ASSERT_EQ(j["findings"].size(), 1u) << r.out;
        const auto& f = j["findings"][0];
        EXPECT_EQ(f["kind"], "data");
        EXPECT_EQ(f["file"], w.path);
        EXPECT_EQ(f["tensor"], c.tensor);
        EXPECT_EQ(f["expert"], c.expert);
        EXPECT_EQ(f["source_expert"], c.source_expert);
        EXPECT_EQ(f["region"], c.region);
        EXPECT_EQ(f["offset"], at);
    }
}

TEST_F(AuditSpliceTest, TextReportAndExitCodes) {
    const Located w = locate(out, "token_embd.weight");
    test::flip_byte(w.path, w.abs + 3);
    const auto r = run_cli(fmt::format("audit {} --source {}", out[2], source()));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find(fmt::format(
                  "  [data] {}: tensor 'token_embd.weight' data at offset {} (0x{:x}): differs from "
                  "the source: 1 of {} bytes differ, the first at byte 3 of the tensor",
                  w.path, w.abs + 3, w.abs + 3, w.nbytes)),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("FAIL: 1 finding(s); 3 shard(s), 79 tensors total"), std::string::npos) << r.out;
    EXPECT_EQ(r.err, "");
}

TEST_F(AuditSpliceTest, ManifestWrittenOnlyWhenThePassSucceedsAndVerifiedLater) {
    const std::string m = dir.file("m.json");
    const auto ok = run_cli(fmt::format("audit {} --source {} --manifest-out {}", out[0], source(), m));
    ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
    ASSERT_TRUE(fs::exists(m));
    ASSERT_TRUE(fs::exists(dir.file("m.sha256")));
    const auto sums = test::run_command(fmt::format("cd {} && sha256sum -c m.sha256", dir.path().string()));
    EXPECT_EQ(sums.exit_code, 0) << sums.out << sums.err;
    EXPECT_EQ(sums.out,
              "out-00001-of-00003.gguf: OK\nout-00002-of-00003.gguf: OK\nout-00003-of-00003.gguf: OK\n");

    // Without the source, a later copy.
    const auto v = run_cli(fmt::format("audit {} --manifest {}", out[2], m));
    EXPECT_EQ(v.exit_code, 0) << v.out;
    // An existing manifest is not replaced without --force.
    const auto again = run_cli(fmt::format("audit {} --manifest-out {}", out[0], m));
    EXPECT_EQ(again.exit_code, 2);
    EXPECT_EQ(again.err, fmt::format("gguf-reap: error: {}: exists; pass --force to replace it\n", m));
    EXPECT_EQ(again.out, "");

    // A broken output gets no manifest.
    const Located w = locate(out, "blk.2.ffn_down_exps.weight");
    test::flip_byte(w.path, w.abs + 17);
    const std::string m2 = dir.file("m2.json");
    const auto bad = run_cli(fmt::format("audit {} --source {} --manifest-out {}", out[0], source(), m2));
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_FALSE(fs::exists(m2));
    EXPECT_FALSE(fs::exists(dir.file("m2.sha256")));
    EXPECT_NE(bad.err.find("manifest not written: the audit found 1 finding(s)"), std::string::npos)
        << bad.err;
    // And the copy no longer matches the first manifest: the tensor is named.
    const auto changed = run_cli(fmt::format("audit {} --manifest {} --json", out[0], m));
    EXPECT_EQ(changed.exit_code, 1);
    const auto j = nlohmann::json::parse(changed.out);
    bool named = false;
    for (const auto& f : j["findings"])
        named |= f["tensor"] == "blk.2.ffn_down_exps.weight" && f["kind"] == "manifest";
    EXPECT_TRUE(named) << changed.out;
}

TEST_F(AuditSpliceTest, NoProvenanceOutputNeedsTheKeeplist) {
    const auto sp = run_cli(fmt::format("splice {} --keeplist {} -o {} --split-count 1 --no-provenance -q",
                                        source(), dir.file("drop.json"), dir.file("bare")));
    ASSERT_EQ(sp.exit_code, 0) << sp.err;
    const std::string bare = dir.file("bare.gguf");
    const auto r = run_cli(fmt::format("audit {} --source {}", bare, source()));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err,
              fmt::format("gguf-reap: error: {}: the output has 14 experts per block, the source 16, and the "
                          "output carries no gguf_reap.kept.* keys (written with --no-provenance?): pass the "
                          "keeplist it was made from with --keeplist\n",
                          bare));
    const auto k =
        run_cli(fmt::format("audit {} --source {} --keeplist {}", bare, source(), dir.file("drop.json")));
    EXPECT_EQ(k.exit_code, 0) << k.out;
}

TEST(AuditSpliceFixtures, SplicedFixturesPassAgainstEitherFormOfTheSource) {
    REQUIRE_FIXTURES();
    test::TempDir dir;
    const std::string model = test::fixture("models/tiny-deepseek2-IQ2_XXS.gguf");
    const std::string shard = test::fixture("shards/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf");
    const std::string spec = test::fixture("prune_specs/tiny-deepseek2.drop-live.json");
    const auto sp = run_cli(fmt::format("splice {} --keeplist {} -o {} -q", shard, spec, dir.file("o")));
    ASSERT_EQ(sp.exit_code, 0) << sp.err;
    for (const std::string& src : {model, shard}) {
        const auto r = run_cli(fmt::format("audit {} --source {}", dir.file("o-00003-of-00003.gguf"), src));
        EXPECT_EQ(r.exit_code, 0) << r.out;
        EXPECT_NE(r.out.find("experts   13 of 16 per block kept (from the output's gguf_reap.kept.* keys)"),
                  std::string::npos)
            << r.out;
    }
    // The wrong keeplist is named per block.
    const auto bad =
        run_cli(fmt::format("audit {} --source {} --keeplist {}", dir.file("o-00001-of-00003.gguf"), model,
                            test::fixture("prune_specs/tiny-deepseek2.drop-dead.json")));
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.out.find(
                  "the output records block 2 as keeping [0, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15] but "
                  "the keeplist keeps [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 15]"),
              std::string::npos)
        << bad.out;
}

}  // namespace
}  // namespace gguf_reap
