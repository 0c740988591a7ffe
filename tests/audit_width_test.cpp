// audit of width-spliced outputs (--neuron-plan): generated F16 models cut by the real plan-width and
// splice binaries, proved by run_audit; one flipped kept element becomes a finding that names the
// tensor, the expert and the source channel. Covers gate/up rows, down columns, a fused gate_up, the
// gpt-oss gate/up biases, a keeplist combined with a plan, and the refusals.
#include <gtest/gtest.h>

#include <fstream>

#include <fmt/format.h>

#include "format/gguf.h"
#include "gguf_reap/audit.h"
#include "gguf_reap/error.h"
#include "gguf_reap/width.h"
#include "io/input_file.h"
#include "ops/audit/audit_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::run_cli;
using test::run_gen;

struct Located {
    uint64_t abs = 0;
    TensorInfo info;
};

Located locate(const std::string& path, const std::string& tensor) {
    auto f = InputFile::open(path);
    const Header h = parse_gguf_header(*f);
    for (const auto& t : h.tensors)
        if (t.name == tensor) return {h.data_start + t.offset, t};
    ADD_FAILURE() << "no tensor " << tensor;
    return {};
}

class AuditWidthTest : public ::testing::Test {
  protected:
    // A generated F16 model (expert width 64, E = 16, MoE blocks 1..3), a plan keeping `k` channels,
    // and its width splice (with `splice_extra` options) in out/o.gguf.
    void make(const std::string& gen_extra, int64_t k, const std::string& splice_extra = "") {
        const bool split = gen_extra.find("--shards") != std::string::npos;
        model_ = dir_.file(split ? "m-00001-of-00002.gguf" : "m.gguf");
        auto r = run_gen(fmt::format("model --skeleton --preset tiny --type-exps F16 {} -o {}", gen_extra,
                                     split ? dir_.file("m") : m()));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        r = run_gen(fmt::format("imatrix --model {} -o {}", m(), dir_.file("i.gguf")));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        r = run_cli(fmt::format("plan-width --imatrix {} --k {} -o {} --model {}", dir_.file("i.gguf"), k,
                                plan(), m()));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        std::filesystem::create_directories(dir_.file("out"));
        r = run_cli(fmt::format("splice {} --neuron-plan {} {} -o {}", m(), plan(), splice_extra,
                                dir_.file("out/o")));
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    AuditReport audit(std::optional<std::string> plan_path,
                      std::optional<std::string> keeplist = std::nullopt) {
        AuditOptions o;
        o.output = out();
        o.source = m();
        o.neuron_plan = plan_path;
        o.keeplist = keeplist;
        o.threads = 1;
        return run_audit(o);
    }
    NeuronPlan read_plan() { return read_neuron_plan(plan(), {1, 2, 3}, 16, 64); }
    std::string m() const { return model_; }
    std::string plan() const { return dir_.file("plan.npz"); }
    std::string out() const { return dir_.file("out/o.gguf"); }
    static std::string all(const AuditReport& r) {
        std::string s;
        for (const auto& f : r.findings) s += f.line() + "\n";
        return s;
    }
    test::TempDir dir_;
    std::string model_ = dir_.file("m.gguf");
};

TEST_F(AuditWidthTest, PassesAndNamesAFlippedDownColumn) {
    make("", 32);
    AuditReport r = audit(plan());
    EXPECT_TRUE(r.passed()) << all(r);
    EXPECT_EQ(r.source_width, 64);
    EXPECT_EQ(r.output_width, 32);
    EXPECT_EQ(r.summary.expert_tensors, 12u);  // router, gate, up, down in 3 blocks
    EXPECT_EQ(r.summary.slabs, 12u * 16);

    // blk.2.ffn_down_exps [32, 128, 16] F16: expert 5, row 7, kept column 3 = source channel row(1, 5)[3].
    const Located d = locate(out(), "blk.2.ffn_down_exps.weight");
    ASSERT_EQ(d.info.ne[0], 32);
    const uint64_t slab = 2 * 32 * 128;
    const uint64_t at = d.abs + 5 * slab + 7 * (2 * 32) + 3 * 2 + 1;
    test::flip_byte(out(), at);
    r = audit(plan());
    ASSERT_EQ(r.findings.size(), 1u) << all(r);
    const Finding& f = r.findings[0];
    const int64_t c = read_plan().row(1, 5)[3];
    EXPECT_EQ(f.kind, FindingKind::kData);
    EXPECT_EQ(f.tensor, "blk.2.ffn_down_exps.weight");
    EXPECT_EQ(f.expert, 5);
    EXPECT_EQ(f.source_expert, 5);
    EXPECT_EQ(f.channel, c);
    EXPECT_EQ(f.offset, at);
    EXPECT_EQ(f.region, "kept columns");
    EXPECT_EQ(f.subject,
              fmt::format("tensor 'blk.2.ffn_down_exps.weight' expert 5 (source expert 5) channel {}", c));
    EXPECT_NE(
        f.message.find(fmt::format("differs from source expert 5 channel {} in row 7: 1 of 8192 bytes", c)),
        std::string::npos)
        << f.message;
}

TEST_F(AuditWidthTest, FlippedGateRowNamesItsChannel) {
    make("", 16);
    const Located g = locate(out(), "blk.1.ffn_gate_exps.weight");
    const uint64_t row = 2 * 128, slab = row * 16;
    test::flip_byte(out(), g.abs + 9 * slab + 10 * row + 4);
    const AuditReport r = audit(plan());
    ASSERT_EQ(r.findings.size(), 1u) << all(r);
    EXPECT_EQ(r.findings[0].channel, read_plan().row(0, 9)[10]);
    EXPECT_EQ(r.findings[0].region, "kept rows");
    EXPECT_EQ(r.findings[0].expert, 9);
}

TEST_F(AuditWidthTest, FusedGateUp) {
    make("--fused-gate-up", 32);
    AuditReport r = audit(plan());
    EXPECT_TRUE(r.passed()) << all(r);
    // The up half of the fused tensor: row K + j is source row n_ff + row(b, e)[j].
    const Located gu = locate(out(), "blk.3.ffn_gate_up_exps.weight");
    ASSERT_EQ(gu.info.ne[1], 64);
    const uint64_t row = 2 * 128, slab = row * 64;
    test::flip_byte(out(), gu.abs + 2 * slab + (32 + 6) * row);
    r = audit(plan());
    ASSERT_EQ(r.findings.size(), 1u) << all(r);
    EXPECT_EQ(r.findings[0].tensor, "blk.3.ffn_gate_up_exps.weight");
    EXPECT_EQ(r.findings[0].channel, read_plan().row(2, 2)[6]);
    EXPECT_NE(r.findings[0].subject.find("(up half)"), std::string::npos) << r.findings[0].subject;
}

TEST_F(AuditWidthTest, GptOssBiases) {
    make("--exps-bias", 32);
    AuditReport r = audit(plan());
    EXPECT_TRUE(r.passed()) << all(r);
    // gpt-oss up bias [32, 16] F32: expert 4, kept element 31; the down bias [128, 16] is not cut.
    const Located ub = locate(out(), "blk.3.ffn_up_exps.bias");
    ASSERT_EQ(ub.info.ne[0], 32);
    EXPECT_EQ(locate(out(), "blk.3.ffn_down_exps.bias").info.ne[0], 128);
    test::flip_byte(out(), ub.abs + 4 * 32 * 4 + 31 * 4);
    r = audit(plan());
    ASSERT_EQ(r.findings.size(), 1u) << all(r);
    EXPECT_EQ(r.findings[0].tensor, "blk.3.ffn_up_exps.bias");
    EXPECT_EQ(r.findings[0].channel, read_plan().row(2, 4)[31]);
    EXPECT_EQ(r.findings[0].region, "kept columns");
}

TEST_F(AuditWidthTest, KeeplistAndPlanTogether) {
    auto rk = [&] {
        make("", 32);
        return run_cli(
            fmt::format("rank --imatrix {} --keep 12 -o {}", dir_.file("i.gguf"), dir_.file("rank")));
    }();
    ASSERT_EQ(rk.exit_code, 0) << rk.err;
    std::filesystem::create_directories(dir_.file("out2"));
    const auto r = run_cli(fmt::format("splice {} --neuron-plan {} --keeplist {} -o {}", m(), plan(),
                                       dir_.file("rank/keeplist.json"), dir_.file("out2/o")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    AuditOptions o;
    o.output = dir_.file("out2/o.gguf");
    o.source = m();
    o.neuron_plan = plan();
    o.keeplist = dir_.file("rank/keeplist.json");
    const AuditReport a = run_audit(o);
    EXPECT_TRUE(a.passed()) << all(a);
    EXPECT_EQ(a.output_expert_count, 12u);
}

TEST_F(AuditWidthTest, SplitSourceAndOutputWithManifest) {
    // A 2-shard source cut into 3 output shards: gathers cross no shard boundary, and the manifest
    // computed in the same pass hashes every output byte in order.
    make("--shards 2", 16, "--split-count 3");
    ASSERT_EQ(m(), dir_.file("m-00001-of-00002.gguf"));
    AuditOptions o;
    o.output = dir_.file("out/o-00002-of-00003.gguf");
    o.source = dir_.file("m-00002-of-00002.gguf");
    o.neuron_plan = plan();
    o.compute_manifest = true;
    const AuditReport r = run_audit(o);
    EXPECT_TRUE(r.passed()) << all(r);
    ASSERT_TRUE(r.manifest);
    ASSERT_EQ(r.manifest->shards.size(), 3u);
    for (int i = 1; i <= 3; ++i) {
        const std::string f = dir_.file(fmt::format("out/o-{:05d}-of-00003.gguf", i));
        EXPECT_EQ(r.manifest->shards[static_cast<size_t>(i - 1)].sha256,
                  test::sha256_file_range(f, 0, test::read_file(f).size()));
    }
}

TEST_F(AuditWidthTest, RefusesWithoutThePlanAndNamesAnotherPlan) {
    make("", 32);
    try {
        audit(std::nullopt);
        FAIL() << "no error";
    } catch (const UsageError& e) {
        const std::string what = test::shown(e);
        EXPECT_EQ(what.rfind(out() + ": was width-spliced with plan sha256 ", 0), 0u) << what;
        EXPECT_NE(what.find(": pass --neuron-plan (the plan it was cut with) to verify its expert tensors"),
                  std::string::npos)
            << what;
    }
    // Another plan with the same K: the recorded sha differs (and so, most likely, do the channels).
    auto g = run_gen(fmt::format("imatrix --model {} --seed 9 -o {}", m(), dir_.file("j.gguf")));
    ASSERT_EQ(g.exit_code, 0) << g.err;
    g = run_cli(
        fmt::format("plan-width --imatrix {} --k 32 -o {}", dir_.file("j.gguf"), dir_.file("p2.npz")));
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const AuditReport r = audit(dir_.file("p2.npz"));
    ASSERT_FALSE(r.passed());
    EXPECT_EQ(r.findings[0].kind, FindingKind::kKeeplist);
    EXPECT_NE(r.findings[0].message.find("the output was cut with plan sha256 "), std::string::npos);
    bool metadata = false;
    for (const auto& f : r.findings)
        metadata |= f.kind == FindingKind::kMetadata && f.subject == "kv 'gguf_reap.neuron_plan_sha256'";
    EXPECT_TRUE(metadata) << all(r);
}

TEST_F(AuditWidthTest, WithoutProvenanceTheWidthKeySaysWhatIsMissing) {
    make("", 32, "--no-provenance");
    try {
        audit(std::nullopt);
        FAIL() << "no error";
    } catch (const UsageError& e) {
        EXPECT_EQ(test::shown(e),
                  out() +
                      ": has deepseek2.expert_feed_forward_length = 32 but the source has 64: it was "
                      "width-spliced (without provenance keys); pass --neuron-plan (the plan it was cut "
                      "with) to verify its expert tensors");
    }
    EXPECT_TRUE(audit(plan()).passed()) << "and with the plan it passes";
}

TEST_F(AuditWidthTest, PlanNeedsSourceAndAnUnquantizedDown) {
    AuditOptions o;
    o.output = "x.gguf";
    o.neuron_plan = "p.npz";
    try {
        run_audit(o);
        FAIL() << "no error";
    } catch (const UsageError& e) {
        EXPECT_EQ(test::shown(e),
                  "--neuron-plan needs --source: the plan says which source channels the output keeps");
    }
    make("", 32);
    auto r = run_gen(fmt::format("model --skeleton --preset tiny --type-exps F16 --type-down Q8_0 -o {}",
                                 dir_.file("q.gguf")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    o.output = out();
    o.source = dir_.file("q.gguf");
    o.neuron_plan = plan();
    try {
        run_audit(o);
        FAIL() << "no error";
    } catch (const UsageError& e) {
        // A per-channel plan keeps parts of Q8_0 blocks (splice_width_blocks_test.cpp: whole ones pass).
        const std::string what = e.what();
        EXPECT_EQ(what.rfind(dir_.file("q.gguf") +
                                 ": blk.1.ffn_down_exps.weight is Q8_0, whose rows hold "
                                 "blocks of 32 values, but " +
                                 plan() + " keeps ",
                             0),
                  0u)
            << what;
        EXPECT_NE(what.find(" of block 1 expert 0: no width-spliced output of this source can have been cut "
                            "by that plan byte-exactly"),
                  std::string::npos)
            << what;
    }
}

}  // namespace
}  // namespace gguf_reap
