// rank on models and imatrices made by the fixture generator (gguf-reap-gen): expert groups, the
// legacy writer generations, weighted-energy, neuron plans, and mismatched models.
#include <gtest/gtest.h>

#include "format/npz.h"
#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "ops/rank/rank_keep.h"
#include "ops/rank/rank_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

class RankGenerated : public ::testing::Test {
  protected:
    void gen(const std::string& args) {
        auto r = test::run_gen(args);
        ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    }
    std::string f(const std::string& name) const { return dir.file(name); }

    std::string usage_error(const RankOptions& o) {
        try {
            const RankInput in = read_rank_input(resolve_rank_sources(o));
            rank_experts(in, resolve_rank_method(o));
        } catch (const UsageError& e) {
            return test::shown(e);
        }
        return "(no error)";
    }

    test::TempDir dir;
};

TEST_F(RankGenerated, EveryGroupKeepsTheSameNumber) {
    gen("model --skeleton --preset tiny --experts 16 --groups 4 --group-used 2 --used 4 -o " + f("g.gguf"));
    gen("imatrix --model " + f("g.gguf") + " --domain chat --super 2:5 --dead 1:3 -o " + f("chat.gguf"));
    gen("imatrix --model " + f("g.gguf") + " --domain code --seed 7 -o " + f("code.gguf"));
    RankOptions o;
    o.imatrices = {{"chat", f("chat.gguf")}, {"code", f("code.gguf")}};
    o.model = f("g.gguf");
    o.keep = 8;
    o.hash_inputs = false;
    const RankInput in = read_rank_input(resolve_rank_sources(o));
    EXPECT_EQ(in.expert_group_count, 4u);
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    for (const auto& b : r.keeplist.blocks) {
        int per_group[4] = {0, 0, 0, 0};
        for (int64_t e : b.keep) ++per_group[e / 4];
        for (int g = 0; g < 4; ++g) EXPECT_EQ(per_group[g], 2) << "block " << b.block << " group " << g;
    }
    KeepList k = r.keeplist;
    ShardSet m = ShardSet::open(f("g.gguf"));
    EXPECT_NO_THROW(validate_keeplist(k, build_moe_layout(m), "rank"));
    ASSERT_EQ(r.protected_experts.size(), 1u);
    EXPECT_EQ(r.protected_experts[0].block, 2);
    EXPECT_EQ(r.protected_experts[0].expert, 5);
    o.keep = 6;
    EXPECT_EQ(usage_error(o),
              "--keep 6 keeps 6 experts per block, not a multiple of expert_group_count = 4: routing "
              "picks experts group by group, so every group must keep the same number");
    o.keep = 2;
    EXPECT_EQ(usage_error(o),
              "--keep 2 keeps 2 experts per block, fewer than expert_used_count = 4: llama.cpp routes "
              "every token to 4 experts and requires expert_used_count <= expert_count; keep at least 4");
}

TEST_F(RankGenerated, LegacyWriterGenerationsMarkDeadExpertsTheirOwnWay) {
    gen("model --skeleton --preset tiny -o " + f("m.gguf"));
    gen("imatrix --model " + f("m.gguf") + " --dead 1:3,3:0 -o " + f("a.gguf"));
    for (const char* g : {"current", "nan"}) {
        SCOPED_TRACE(g);
        const std::string dat = f(std::string(g) + ".dat");
        gen("imatrix --model " + f("m.gguf") + " --format dat --dat-generation " + g + " --dead 1:3,3:0 -o " +
            dat);
        RankOptions o;
        o.imatrices = {{"x", dat}};
        o.criterion = Criterion::kReapMean;
        o.prune = 1;
        o.hash_inputs = false;
        const RankDecision r = rank_experts(read_rank_input(resolve_rank_sources(o)), resolve_rank_method(o));
        ASSERT_EQ(r.dead_experts.size(), 2u);
        EXPECT_EQ(r.dead_experts[0].block, 1);
        EXPECT_EQ(r.dead_experts[0].expert, 3);
        EXPECT_EQ(r.dead_experts[1].block, 3);
        EXPECT_EQ(r.dead_experts[1].expert, 0);
    }
    // The 2024-25 writer skipped entries with a never-routed expert: those blocks need another domain.
    gen("imatrix --model " + f("m.gguf") + " --format dat --dat-generation partial-skip --dead 1:3 -o " +
        f("ps.dat"));
    RankOptions o;
    o.imatrices = {{"ps", f("ps.dat")}};
    o.model = f("m.gguf");
    o.criterion = Criterion::kReapMean;
    o.prune = 1;
    o.hash_inputs = false;
    EXPECT_EQ(usage_error(o),
              "no imatrix has data for MoE block 1 (legacy files skip entries with never-routed experts): "
              "add a GGUF imatrix");
    o.imatrices.push_back({"gguf", f("a.gguf")});
    const RankInput in = read_rank_input(resolve_rank_sources(o));
    EXPECT_FALSE(in.domains[0].blocks[0].present);
    EXPECT_TRUE(in.domains[0].blocks[1].present);
    bool noted = false;
    for (const auto& n : in.notes)
        noted |= n.find("ps: no entry for block(s) 1: the 2024-25 .dat writer skipped") == 0;
    EXPECT_TRUE(noted);
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    EXPECT_EQ(r.keeplist.blocks[0].prune, (std::vector<int64_t>{3}));
}

TEST_F(RankGenerated, WeightedEnergyReadsF16DownProjections) {
    gen("model --skeleton --preset tiny --type-down F16 -o " + f("m.gguf"));
    gen("imatrix --model " + f("m.gguf") + " --dead 2:1 --super 3:4 -o " + f("a.gguf"));
    RankOptions o;
    o.imatrices = {{"a", f("a.gguf")}};
    o.model = f("m.gguf");
    o.criterion = Criterion::kWeightedEnergy;
    o.prune = 4;
    o.hash_inputs = false;
    const RankInput in = read_rank_input(resolve_rank_sources(o));
    const RankDecision r = rank_experts(in, resolve_rank_method(o));
    for (size_t e = 0; e < 16; ++e) {
        const double w = in.domains[0].blocks[0].weighted[e];
        EXPECT_GT(w, 0.0) << e;
        EXPECT_NE(w, in.domains[0].blocks[0].energy[e]);
    }
    EXPECT_EQ(in.domains[0].blocks[1].weighted[1], 0.0);
    ASSERT_EQ(r.protected_experts.size(), 1u);
    EXPECT_EQ(r.protected_experts[0].expert, 4);
    // Q4_K down projections are not dequantised: the refusal says what to use instead.
    gen("model --skeleton --preset tiny --type-down Q4_K --expert-ff 256 -o " + f("q.gguf"));
    o.model = f("q.gguf");
    gen("imatrix --model " + f("q.gguf") + " -o " + f("q.imatrix.gguf"));
    o.imatrices = {{"q", f("q.imatrix.gguf")}};
    EXPECT_EQ(usage_error(o), f("q.gguf") +
                                  ": blk.1.ffn_down_exps.weight is Q4_K: weighted-energy reads the "
                                  "down-projection weights and handles F32, F16, BF16 and Q8_0 only; use "
                                  "--criterion energy, or a model file with such a down projection");
}

TEST_F(RankGenerated, NeuronPlanRestrictsEnergiesToTheKeptChannels) {
    gen("model --skeleton --preset tiny --type-down F16 -o " + f("native.gguf"));  // expert width 64
    gen("model --skeleton --preset tiny --type-down F16 --expert-ff 32 -o " + f("narrow.gguf"));
    gen("imatrix --model " + f("native.gguf") + " --dead 1:2 --super 2:6 -o " + f("a.gguf"));
    // Keep channels 2j + (e % 2) of every expert: 32 of 64.
    std::vector<uint16_t> ch;
    for (int pair = 0; pair < 3 * 16; ++pair)
        for (int j = 0; j < 32; ++j) ch.push_back(static_cast<uint16_t>(2 * j + (pair % 16) % 2));
    write_npz(f("plan.npz"), {{"channels", NpyArray::u16({48, 32}, ch)}, {"k", NpyArray::i64({1}, {32})}});
    RankOptions o;
    o.imatrices = {{"a", f("a.gguf")}};
    o.model = f("narrow.gguf");
    o.prune = 3;
    o.hash_inputs = false;
    EXPECT_EQ(usage_error(o),
              f("narrow.gguf") +
                  ": blk.1.ffn_down_exps.weight has expert width 32 but the imatrix entry in " + f("a.gguf") +
                  " has 64: a width-pruned model needs its --neuron-plan");
    o.neuron_plan = f("plan.npz");
    const RankInput in = read_rank_input(resolve_rank_sources(o));
    EXPECT_EQ(in.plan_k, 32);
    const BlockStats& s = in.domains[0].blocks[0];
    for (size_t e = 0; e < 16; ++e) {
        if (s.dead[e]) continue;
        EXPECT_LT(s.energy[e], s.energy_full[e]);
        EXPECT_GT(s.energy[e], 0.0);
    }
    RankDecision r = rank_experts(in, resolve_rank_method(o));
    for (size_t b = 0; b < 3; ++b) {
        const double rho = r.spearman[b];
        EXPECT_GT(rho, 0.5) << b;
        EXPECT_LE(rho, 1.0);
    }
    EXPECT_NE(render_receipt(in, r).find("Spearman restricted vs full"), std::string::npos);
    // weighted-energy on the narrow model: its k columns pair with the plan's channels.
    o.criterion = Criterion::kWeightedEnergy;
    EXPECT_NO_THROW(rank_experts(read_rank_input(resolve_rank_sources(o)), resolve_rank_method(o)));
    // A plan for the wrong k.
    write_npz(f("bad.npz"), {{"channels", NpyArray::u16({48, 2}, std::vector<uint16_t>(96, 0))}});
    o.neuron_plan = f("bad.npz");
    try {
        read_rank_input(resolve_rank_sources(o));
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("bad.npz: row 0: channel 0 is listed twice"), std::string::npos)
            << e.what();
    }
    std::vector<uint16_t> two;
    for (int i = 0; i < 48; ++i) two.insert(two.end(), {0, 1});
    write_npz(f("k2.npz"), {{"channels", NpyArray::u16({48, 2}, two)}});
    o.neuron_plan = f("k2.npz");
    EXPECT_EQ(usage_error(o), f("narrow.gguf") +
                                  ": blk.1.ffn_down_exps.weight has width 32 but the neuron plan keeps 2 "
                                  "channels: the model must be the width-pruned one made with this plan");
}

TEST_F(RankGenerated, MismatchedModelsAreNamed) {
    gen("model --skeleton --preset tiny -o " + f("m.gguf"));              // MoE blocks 1..3
    gen("model --skeleton --preset tiny --blocks 5 -o " + f("m5.gguf"));  // MoE blocks 1..4
    gen("model --skeleton --preset tiny --expert-ff 128 -o " + f("wide.gguf"));
    gen("imatrix --model " + f("m.gguf") + " -o " + f("a.gguf"));
    RankOptions o;
    o.imatrices = {{"a", f("a.gguf")}};
    o.prune = 2;
    o.hash_inputs = false;
    o.model = f("m5.gguf");
    EXPECT_EQ(usage_error(o), f("a.gguf") +
                                  ": has no ffn_down_exps entry for MoE block(s) 4 of the model: was it made "
                                  "for another model?");
    o.model = f("wide.gguf");
    EXPECT_EQ(usage_error(o),
              f("wide.gguf") + ": blk.1.ffn_down_exps.weight has expert width 128 but the imatrix entry in " +
                  f("a.gguf") + " has 64: the imatrix was made for another model");
}

}  // namespace
}  // namespace gguf_reap
