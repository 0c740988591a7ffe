// The test skeleton (--skeleton): not a llama.cpp layout. Four n_embd × n_embd attention matrices per
// block, dense FFN blocks, and every optional expert tensor gguf-reap handles in whatever combination
// the options ask for (router bias, selection bias, fused gate_up, gpt-oss biases, per-expert scales,
// shared experts, MTP blocks), under any general.architecture. llama.cpp refuses it; gguf-reap's tests
// and benchmarks use it to reach shapes no single architecture has.
#include <fmt/format.h>

#include "gen/archs.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

void build_skeleton(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    if (s.exps_bias && s.fused_gate_up)
        throw UsageError(
            "--exps-bias with --fused-gate-up: no llama.cpp loader has a fused gate_up with expert biases "
            "(gpt-oss, the one with biases, takes gate and up apart)");
    b.u32("block_count", s.blocks + s.nextn);
    b.u32("context_length", 4096);
    b.u32("embedding_length", s.embd);
    b.u32("feed_forward_length", s.ff);
    b.u32("attention.head_count", s.heads);
    b.u32("attention.head_count_kv", s.heads);
    b.f32("attention.layer_norm_rms_epsilon", 1e-6);
    if (s.experts > 0) {
        b.u32("expert_count", s.experts);
        b.u32("expert_used_count", s.used);
        b.u32("expert_shared_count", s.shared);
        b.u32("expert_feed_forward_length", s.expert_ff);
        b.u32("leading_dense_block_count", s.dense_blocks);
        if (s.groups > 1) {
            b.u32("expert_group_count", s.groups);
            b.u32("expert_group_used_count", s.group_used);
        }
        b.u32("expert_gating_func", 2);  // sigmoid
        b.boolean("expert_weights_norm", true);
        b.f32("expert_weights_scale", s.weights_scale);
        if (s.nextn > 0) b.u32("nextn_predict_layers", s.nextn);
    }
    b.u32("vocab_size", s.vocab);
    b.str("tokenizer.ggml.model", "gpt2");
    std::vector<std::string> tokens;
    tokens.reserve(static_cast<size_t>(s.vocab));
    for (int64_t i = 0; i < s.vocab; ++i) tokens.push_back(fmt::format("t{}", i));
    b.raw(Kv::make_string_array("tokenizer.ggml.tokens", tokens));
    b.raw(Kv::make_u32("general.quantization_version", 2));

    const int64_t embd = s.embd, E = s.experts, eff = s.expert_ff;
    const auto kSmall = FillKind::kSmall, kOne = FillKind::kNearOne;
    b.tensor("token_embd.weight", {embd, s.vocab, 1, 1}, TypeClass::kEmbd, kSmall, "--embd");
    const int64_t total = s.blocks + s.nextn;
    for (int64_t i = 0; i < total; ++i) {
        const auto p = [i](const std::string& rest) { return ModelBuilder::blk(i, rest); };
        const bool moe = E > 0 && i >= s.dense_blocks;
        const bool nextn = i >= s.blocks;
        if (moe) b.moe_block(i);
        if (nextn) b.nextn_block(i);
        b.tensor(p("attn_norm.weight"), {embd, 1, 1, 1}, TypeClass::kF32, kOne);
        for (const char* w : {"attn_q", "attn_k", "attn_v", "attn_output"})
            b.tensor(p(std::string(w) + ".weight"), {embd, embd, 1, 1}, TypeClass::kAttn, kSmall, "--embd");
        b.tensor(p("ffn_norm.weight"), {embd, 1, 1, 1}, TypeClass::kF32, kOne);
        if (!moe) {
            b.tensor(p("ffn_gate.weight"), {embd, s.ff, 1, 1}, TypeClass::kDense, kSmall, "--embd");
            b.tensor(p("ffn_up.weight"), {embd, s.ff, 1, 1}, TypeClass::kDense, kSmall, "--embd");
            b.tensor(p("ffn_down.weight"), {s.ff, embd, 1, 1}, TypeClass::kDense, kSmall, "--ff");
            continue;
        }
        using R = ExpertRole;
        using P = Projection;
        const auto name = [i](const ExpertTensorKind& k) {
            return block_tensor_name(static_cast<int>(i), k);
        };
        b.tensor(name(expert_kind(R::kRouter)), {embd, E, 1, 1}, TypeClass::kRouter, kSmall, "--embd");
        if (s.router_bias) b.tensor(name(expert_kind(R::kRouterBias)), {E, 1, 1, 1}, TypeClass::kF32, kSmall);
        if (s.probs_bias) b.tensor(name(expert_kind(R::kProbsBias)), {E, 1, 1, 1}, TypeClass::kF32, kSmall);
        // The projections that read the block input, then down.
        const std::vector<P> in_exps =
            s.fused_gate_up ? std::vector<P>{P::kGateUp} : std::vector<P>{P::kGate, P::kUp};
        for (P pr : in_exps)
            b.tensor(name(expert_kind(R::kWeight, pr)),
                     {embd, eff * expert_kind(R::kWeight, pr).width_factor, E, 1}, TypeClass::kExps, kSmall,
                     "--embd");
        b.tensor(name(expert_kind(R::kWeight, P::kDown)), {eff, embd, E, 1}, TypeClass::kDown, kSmall,
                 "--expert-ff");
        if (s.exps_bias) {  // gpt-oss: one bias row per expert, expert = ne[1]
            for (P pr : in_exps)
                b.tensor(name(expert_kind(R::kBias, pr)), {eff, E, 1, 1}, TypeClass::kF32, kSmall);
            b.tensor(name(expert_kind(R::kBias, P::kDown)), {embd, E, 1, 1}, TypeClass::kF32, kSmall);
        }
        if (s.scales) {  // per-expert scales, as llama.cpp's generic pass creates them (none for gate_up)
            if (!s.fused_gate_up)
                for (P pr : in_exps)
                    b.tensor(name(expert_kind(R::kScale, pr)), {E, 1, 1, 1}, TypeClass::kF32, kOne);
            b.tensor(name(expert_kind(R::kScale, P::kDown)), {E, 1, 1, 1}, TypeClass::kF32, kOne);
        }
        if (s.shared > 0) {
            const int64_t sff = eff * s.shared;
            b.tensor(p("ffn_gate_shexp.weight"), {embd, sff, 1, 1}, TypeClass::kShexp, kSmall, "--embd");
            b.tensor(p("ffn_up_shexp.weight"), {embd, sff, 1, 1}, TypeClass::kShexp, kSmall, "--embd");
            b.tensor(p("ffn_down_shexp.weight"), {sff, embd, 1, 1}, TypeClass::kShexp, kSmall,
                     "--expert-ff × --shared");
        }
        if (nextn) {  // the MTP head's own tensors
            b.tensor(p("nextn.eh_proj.weight"), {2 * embd, embd, 1, 1}, TypeClass::kAttn, kSmall,
                     "2 × --embd");
            for (const char* w : {"nextn.enorm", "nextn.hnorm", "nextn.shared_head_norm"})
                b.tensor(p(std::string(w) + ".weight"), {embd, 1, 1, 1}, TypeClass::kF32, kOne);
        }
    }
    b.tensor("output_norm.weight", {embd, 1, 1, 1}, TypeClass::kF32, kOne);
    if (!s.tied) b.tensor("output.weight", {embd, s.vocab, 1, 1}, TypeClass::kOutput, kSmall, "--embd");
}

}  // namespace gguf_reap::gen
