// Sigmoid-routed MoE families with leading dense blocks, shared experts and interleaved sliding-window
// attention: Arcee AFMoE (gated attention, exp_probs_b), Cohere Command-A MoE (parallel blocks with
// LayerNorm, MTP blocks, fused gate_up), poolside Laguna (per-layer head counts, softplus attention
// gate per head or per element, exp_probs_b). Loaders: src/models/afmoe.cpp, cohere2moe.cpp, laguna.cpp.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gen/archs.h"
#include "gen/archs/refuse.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

using B = ModelBuilder;

// The norms in front of a block's projections and of the output, with small random weights
// (|w| < 1/4) rather than near-one ones: a product of two random Q8_0 projections (gate × up) of a
// near-one-normed input can exceed what the f16 scale of the activations' Q8_0 blocks holds, and
// llama.cpp's logits then turn NaN.
void input_norm(ModelBuilder& b, const std::string& name) {
    b.tensor(name, {b.spec().embd, 1, 1, 1}, TypeClass::kF32, FillKind::kSmall);
}

void output_tensors(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    input_norm(b, "output_norm.weight");
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void attention_qkvo(ModelBuilder& b, int64_t i, int64_t q, int64_t kv) {
    const int64_t n = b.spec().embd;
    b.tensor(B::blk(i, "attn_q.weight"), {n, q, 1, 1}, TypeClass::kAttn);
    b.tensor(B::blk(i, "attn_k.weight"), {n, kv, 1, 1}, TypeClass::kAttn);
    b.tensor(B::blk(i, "attn_v.weight"), {n, kv, 1, 1}, TypeClass::kAttn);
    b.tensor(B::blk(i, "attn_output.weight"), {q, n, 1, 1}, TypeClass::kAttn, FillKind::kSmall, "--heads");
}

}  // namespace

// ---- afmoe ----------------------------------------------------------------------------------------
// The first --dense-blocks blocks (default 1) dense, the rest MoE: sigmoid routing with exp_probs_b,
// normalised and scaled weights, --shared shared experts (0: none) whose width the loader derives as
// expert_ff × expert_shared_count. Sliding window on even blocks (period 2); every block has q/k norms,
// a sigmoid attention output gate and pre/post norms around attention and FFN.
void build_afmoe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Refuse r;
    r.dense_blocks = false;
    r.shared = false;
    refuse(s, "afmoe", r);
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("attention.sliding_window", 64);
    b.u32("attention.sliding_window_pattern", 2);  // a scalar: the loader ignores an array here
    ModelBuilder::ExpertKeys k;
    k.shared = k.weights_norm = k.weights_scale = k.leading_dense = k.groups = true;
    k.gating = 2;  // sigmoid
    b.expert_keys(k);

    ModelBuilder::Experts e;
    e.probs_bias = true;
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    output_tensors(b);
    for (int64_t i = 0; i < s.blocks; ++i) {
        input_norm(b, B::blk(i, "attn_norm.weight"));
        b.norm(B::blk(i, "post_attention_norm.weight"), s.embd);
        attention_qkvo(b, i, head_dim * s.heads, head_dim * heads_kv);
        b.norm(B::blk(i, "attn_q_norm.weight"), head_dim);
        b.norm(B::blk(i, "attn_k_norm.weight"), head_dim);
        b.tensor(B::blk(i, "attn_gate.weight"), {s.embd, head_dim * s.heads, 1, 1}, TypeClass::kAttn);
        input_norm(b, B::blk(i, "ffn_norm.weight"));
        b.norm(B::blk(i, "post_ffw_norm.weight"), s.embd);
        if (i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
        } else {
            b.experts(i, e);
            if (s.shared > 0) b.shared_experts(i, s.expert_ff * s.shared);
        }
    }
}

// ---- cohere2moe -----------------------------------------------------------------------------------
// Parallel attention + FFN blocks under one LayerNorm (layer_norm_epsilon), logit_scale, sliding
// window on three blocks of every four (the bool pattern the converter writes). The first
// --dense-blocks blocks (default 1) dense, the rest MoE with --shared shared experts (0: none; width
// expert_ff × count, written as expert_shared_feed_forward_length). --nextn N appends N MTP blocks,
// each a full MoE block with nextn.* tensors. Split or --fused-gate-up experts.
void build_cohere2moe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Refuse r;
    r.dense_blocks = false;
    r.shared = false;
    r.nextn = false;
    refuse(s, "cohere2moe", r);
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    const int64_t shexp = s.expert_ff * s.shared;
    std::vector<bool> swa;
    for (int64_t i = 0; i < s.blocks; ++i) swa.push_back(i % 4 != 3);  // trunk blocks only
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    g.layer_norm = true;
    b.generic_keys(g);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.u32("rope.dimension_count", head_dim);  // the graph asserts n_rot == head_dim
    b.str("rope.scaling.type", "none");
    b.f32("logit_scale", 0.25);
    b.u32("attention.sliding_window", 32);
    b.bool_array("attention.sliding_window_pattern", swa);
    ModelBuilder::ExpertKeys k;
    k.shared = k.weights_norm = k.leading_dense = k.groups = true;  // gating: the loader's default, sigmoid
    b.expert_keys(k);
    if (s.shared > 0) b.u32("expert_shared_feed_forward_length", shexp);

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    output_tensors(b);
    for (int64_t i = 0; i < s.blocks + s.nextn; ++i) {
        input_norm(b, B::blk(i, "attn_norm.weight"));
        attention_qkvo(b, i, head_dim * s.heads, head_dim * heads_kv);
        if (i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
            continue;
        }
        b.experts(i, {});
        if (s.shared > 0) b.shared_experts(i, shexp);
        if (i >= s.blocks) {  // MTP: shape-checked and skipped unless llama.cpp loads the MTP head
            b.nextn_block(i);
            b.tensor(B::blk(i, "nextn.eh_proj.weight"), {2 * s.embd, s.embd, 1, 1}, TypeClass::kAttn);
            for (const char* w :
                 {"nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight"})
                b.norm(B::blk(i, w), s.embd);
        }
    }
}

// ---- laguna ---------------------------------------------------------------------------------------
// Full attention on even blocks (--heads heads, partial rotary), sliding window on odd ones (twice the
// heads, full rotary): head_count is a per-layer array. Softplus attention output gate per head in
// the first half of the blocks, per element in the rest (the loader tells them apart by shape). The
// first --dense-blocks blocks (default 1) dense, the rest MoE: sigmoid routing with exp_probs_b and
// an always-present shared expert of width expert_ff × --shared.
void build_laguna(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Refuse r;
    r.dense_blocks = false;
    r.shared = false;
    refuse(s, "laguna", r);
    if (s.blocks < 2)
        throw UsageError(
            fmt::format("--blocks {}: laguna needs at least 2 (block 0 is full attention and "
                        "the sliding-window cache needs a sliding block)",
                        s.blocks));
    if (s.shared < 1)
        throw UsageError(fmt::format(
            "--shared {}: laguna's loader always creates the shared expert (use --shared 1 or more)",
            s.shared));
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    const int64_t shexp = s.expert_ff * s.shared;
    const auto heads = [&](int64_t i) { return i % 2 == 0 ? s.heads : 2 * s.heads; };
    std::vector<int64_t> head_count;
    for (int64_t i = 0; i < s.blocks; ++i) head_count.push_back(heads(i));
    b.gpt2_tokenizer();
    b.u32("context_length", 4096);
    b.u32("embedding_length", s.embd);
    b.u32("block_count", s.blocks);
    b.u32("feed_forward_length", s.ff);
    b.u32_array("attention.head_count", head_count);
    b.u32("attention.head_count_kv", heads_kv);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.f32("attention.layer_norm_rms_epsilon", 1e-6);
    b.u32("rope.dimension_count", head_dim / 2);  // full blocks: partial rotary
    b.u32("rope.dimension_count_swa", head_dim);
    b.f32("rope.freq_base", 500000.0);
    b.f32("rope.freq_base_swa", 10000.0);
    b.u32("attention.sliding_window", 16);
    b.u32("attention.sliding_window_pattern", 2);  // a scalar, dense-first: block i full iff i % 2 == 0
    b.u32("vocab_size", s.vocab);
    ModelBuilder::ExpertKeys k;
    k.shared = k.weights_norm = k.weights_scale = k.leading_dense = k.groups = true;
    k.gating = 2;  // sigmoid
    b.expert_keys(k);
    b.u32("expert_shared_feed_forward_length", shexp);  // absent, the loader would derive it from expert_ff

    ModelBuilder::Experts e;
    e.probs_bias = true;
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    output_tensors(b);
    for (int64_t i = 0; i < s.blocks; ++i) {
        const int64_t h = heads(i);
        input_norm(b, B::blk(i, "attn_norm.weight"));
        attention_qkvo(b, i, head_dim * h, head_dim * heads_kv);
        b.norm(B::blk(i, "attn_q_norm.weight"), head_dim);
        b.norm(B::blk(i, "attn_k_norm.weight"), head_dim);
        b.tensor(B::blk(i, "attn_gate.weight"), {s.embd, i < s.blocks / 2 ? h : head_dim * h, 1, 1},
                 TypeClass::kAttn);
        input_norm(b, B::blk(i, "ffn_norm.weight"));
        if (i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
        } else {
            b.experts(i, e);
            b.shared_experts(i, shexp);
        }
    }
}

}  // namespace gguf_reap::gen
