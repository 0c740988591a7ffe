// Hybrid and interleaved MoE families: Gemma 4 (SWA/full attention, a dense MLP beside the routed
// experts in every block), Jamba (Mamba-1 + attention), Nemotron-H (Mamba-2 + attention + MoE blocks,
// ungated relu² experts), LFM2-MoE (short convolutions + attention). Which blocks are MoE, recurrent
// or attention is decided per block, by tensor presence or per-layer key arrays.
// Loaders: src/models/gemma4.cpp, jamba.cpp (+ mamba-base.cpp), nemotron-h.cpp (+ nemotron-h-moe.cpp,
// mamba-base.cpp), lfm2moe.cpp (+ lfm2.cpp).
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

// llama.cpp's hybrid memory needs a block of each kind (an empty KV or recurrent cache aborts at decode).
void require_blocks(const ModelSpec& s, const char* arch, int64_t n, const char* why) {
    if (s.blocks < n)
        throw UsageError(fmt::format("--blocks {}: {} needs at least {} ({})", s.blocks, arch, n, why));
}

// The keys every loader here reads, without the per-layer ones (head_count_kv, feed_forward_length)
// and the rope ones (the Mamba hybrids have no RoPE).
void base_keys(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    b.u32("context_length", 4096);
    b.u32("embedding_length", s.embd);
    b.u32("block_count", s.blocks + s.nextn);
    b.u32("attention.head_count", s.heads);
    b.f32("attention.layer_norm_rms_epsilon", 1e-6);
    b.u32("vocab_size", s.vocab);
}

// The norm in front of a block's projections, with small random weights (|w| < 1/4) rather than
// near-one ones: a product of two random Q8_0 projections (gate × up, an SSM or short-conv gate) of a
// near-one-normed input can exceed what the f16 scale of the activations' Q8_0 blocks holds, and
// llama.cpp's logits then turn NaN.
void input_norm(ModelBuilder& b, const std::string& name) {
    b.tensor(name, {b.spec().embd, 1, 1, 1}, TypeClass::kF32, FillKind::kSmall);
}

// The output norm is an input norm too: gemma4's soft-capped logits saturate (30 · tanh) with it near one.
void output_tensors(ModelBuilder& b, const char* norm = "output_norm.weight") {
    const ModelSpec& s = b.spec();
    input_norm(b, norm);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void attention_qkvo(ModelBuilder& b, int64_t i, int64_t q, int64_t kv, bool v = true) {
    const int64_t n = b.spec().embd;
    b.tensor(B::blk(i, "attn_q.weight"), {n, q, 1, 1}, TypeClass::kAttn);
    b.tensor(B::blk(i, "attn_k.weight"), {n, kv, 1, 1}, TypeClass::kAttn);
    if (v) b.tensor(B::blk(i, "attn_v.weight"), {n, kv, 1, 1}, TypeClass::kAttn);
    b.tensor(B::blk(i, "attn_output.weight"), {q, n, 1, 1}, TypeClass::kAttn, FillKind::kSmall, "--heads");
}

}  // namespace

// ---- gemma4 ---------------------------------------------------------------------------------------
// Even blocks sliding-window (head dim embd/heads, kv heads heads/2), odd blocks full attention (twice
// the head dim, kv heads heads/4, no attn_v: K serves as V, proportional rope through rope_freqs).
// Every block has the dense GeGLU MLP (--ff); MoE blocks add the router (with its [n_embd] input
// scale ffn_gate_inp.scale), the experts and a per-expert ffn_down_exps.scale, as real files have.
// --dense-blocks K: the first K blocks without experts (default: every block MoE, as 26B-A4B).
void build_gemma4(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse(s, "gemma4", {});
    require_blocks(s, "gemma4", 2, "a sliding-window and a full-attention block; the KV cache asserts 2");
    const int64_t dense = given(s, "--dense-blocks") ? s.dense_blocks : 0;
    const int64_t hd_swa = s.embd / s.heads, hd_full = 2 * hd_swa;
    const int64_t kv_swa = std::max<int64_t>(1, s.heads / 2), kv_full = std::max<int64_t>(1, s.heads / 4);
    const auto swa = [](int64_t i) { return i % 2 == 0; };
    std::vector<int64_t> kv;
    std::vector<bool> pattern;
    for (int64_t i = 0; i < s.blocks; ++i) {
        kv.push_back(swa(i) ? kv_swa : kv_full);
        pattern.push_back(swa(i));
    }
    b.gpt2_tokenizer();
    base_keys(b);
    b.u32("feed_forward_length", s.ff);
    b.u32_array("attention.head_count_kv", kv);
    b.u32("attention.key_length", hd_full);
    b.u32("attention.value_length", hd_full);
    b.u32("attention.key_length_swa", hd_swa);
    b.u32("attention.value_length_swa", hd_swa);
    b.u32("rope.dimension_count", hd_full);
    b.u32("rope.dimension_count_swa", hd_swa);
    b.f32("rope.freq_base", 1000000.0);
    b.f32("rope.freq_base_swa", 10000.0);
    b.u32("attention.sliding_window", 32);
    b.bool_array("attention.sliding_window_pattern", pattern);
    b.u32("attention.shared_kv_layers", 0);
    b.u32("embedding_length_per_layer_input", 0);
    b.f32("final_logit_softcapping", 30.0);
    ModelBuilder::ExpertKeys k;
    k.groups = true;
    b.expert_keys(k);

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    output_tensors(b);
    b.norm("rope_freqs.weight", hd_full / 2);  // freq factors of the full-attention blocks
    for (int64_t i = 0; i < s.blocks; ++i) {
        const int64_t hd = swa(i) ? hd_swa : hd_full;
        input_norm(b, B::blk(i, "attn_norm.weight"));
        attention_qkvo(b, i, hd * s.heads, hd * kv[static_cast<size_t>(i)], /*v=*/swa(i));
        b.norm(B::blk(i, "attn_q_norm.weight"), hd);
        b.norm(B::blk(i, "attn_k_norm.weight"), hd);
        b.norm(B::blk(i, "post_attention_norm.weight"), s.embd);
        b.tensor(B::blk(i, "layer_output_scale.weight"), {1, 1, 1, 1}, TypeClass::kF32, FillKind::kNearOne);
        input_norm(b, B::blk(i, "ffn_norm.weight"));
        b.dense_ffn(i, s.ff);
        b.norm(B::blk(i, "post_ffw_norm.weight"), s.embd);
        if (i < dense) continue;
        b.experts(i, {});
        // Real files carry the per-expert output scale (--scales has the builder add gate and up too).
        if (!s.scales)
            b.tensor(
                block_tensor_name(static_cast<int>(i), expert_kind(ExpertRole::kScale, Projection::kDown)),
                {s.experts, 1, 1, 1}, TypeClass::kF32, FillKind::kNearOne);
        // The router's input scale: [n_embd], not per expert.
        b.norm(B::blk(i, "ffn_gate_inp.scale"), s.embd);
        input_norm(b, B::blk(i, "pre_ffw_norm_2.weight"));
        for (const char* w : {"post_ffw_norm_1.weight", "post_ffw_norm_2.weight"})
            b.norm(B::blk(i, w), s.embd);
    }
}

// ---- jamba ----------------------------------------------------------------------------------------
// Mamba-1 blocks (head_count_kv 0) with attention at every fourth block from block 2 (the last block
// when there are fewer than 3); MoE at the odd blocks (Jamba's expert period 2), or with --dense-blocks
// K at every block from K. One key, feed_forward_length, sizes both the dense FFNs and the experts:
// --expert-ff sets it, and --ff must agree.
void build_jamba(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse(s, "jamba", {});
    require_blocks(s, "jamba", 2, "a Mamba and an attention block");
    const int64_t w = s.expert_ff;
    const bool leading = given(s, "--dense-blocks");
    const auto moe = [&](int64_t i) { return leading ? i >= s.dense_blocks : i % 2 == 1; };
    bool any_dense = false;
    for (int64_t i = 0; i < s.blocks; ++i) any_dense = any_dense || !moe(i);
    if (given(s, "--ff") && s.ff != w)
        throw UsageError(
            fmt::format("--ff {}: jamba's feed_forward_length sizes the dense FFNs and the experts "
                        "alike; it is --expert-ff ({}){}",
                        s.ff, w, any_dense ? "" : " (and this model has no dense FFN)"));
    const auto attn = [&](int64_t i) { return s.blocks < 3 ? i == s.blocks - 1 : i % 4 == 2; };
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    const int64_t d_inner = 2 * s.embd, d_state = 16, d_conv = 4, dt_rank = (s.embd + 15) / 16;
    std::vector<int64_t> kv;
    for (int64_t i = 0; i < s.blocks; ++i) kv.push_back(attn(i) ? heads_kv : 0);
    b.gpt2_tokenizer();
    base_keys(b);
    b.u32("feed_forward_length", w);
    b.u32_array("attention.head_count_kv", kv);
    b.u32("ssm.conv_kernel", d_conv);
    b.u32("ssm.inner_size", d_inner);
    b.u32("ssm.state_size", d_state);
    b.u32("ssm.time_step_rank", dt_rank);
    ModelBuilder::ExpertKeys k;
    k.width = false;  // not read: feed_forward_length is the expert width
    k.groups = true;
    b.expert_keys(k);

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    output_tensors(b);
    for (int64_t i = 0; i < s.blocks; ++i) {
        input_norm(b, B::blk(i, "attn_norm.weight"));
        if (attn(i)) {
            attention_qkvo(b, i, s.embd, head_dim * heads_kv);
        } else {
            b.tensor(B::blk(i, "ssm_in.weight"), {s.embd, 2 * d_inner, 1, 1}, TypeClass::kAttn);
            b.tensor(B::blk(i, "ssm_conv1d.weight"), {d_conv, d_inner, 1, 1}, TypeClass::kF32);
            b.bias(B::blk(i, "ssm_conv1d.bias"), d_inner);
            b.tensor(B::blk(i, "ssm_x.weight"), {d_inner, dt_rank + 2 * d_state, 1, 1}, TypeClass::kAttn);
            b.norm(B::blk(i, "ssm_dt_norm.weight"), dt_rank);
            b.tensor(B::blk(i, "ssm_dt.weight"), {dt_rank, d_inner, 1, 1}, TypeClass::kF32);
            b.bias(B::blk(i, "ssm_dt.bias"), d_inner);
            b.norm(B::blk(i, "ssm_b_norm.weight"), d_state);
            b.norm(B::blk(i, "ssm_c_norm.weight"), d_state);
            b.tensor(B::blk(i, "ssm_a"), {d_state, d_inner, 1, 1}, TypeClass::kF32);
            b.norm(B::blk(i, "ssm_d"), d_inner);
            b.tensor(B::blk(i, "ssm_out.weight"), {d_inner, s.embd, 1, 1}, TypeClass::kAttn);
        }
        input_norm(b, B::blk(i, "ffn_norm.weight"));
        if (moe(i))
            b.experts(i, {});
        else
            b.dense_ffn(i, w);
    }
}

// ---- nemotron_h, nemotron_h_moe ---------------------------------------------------------------------
namespace {

// Blocks by i % 4: Mamba-2, MoE, attention, MoE ("ME*E", as the hybrid_override_pattern of the real
// checkpoints interleaves them); feed_forward_length[i] != 0 marks the MoE blocks, head_count_kv[i] != 0
// the attention ones. --nextn N appends N MTP blocks (attention + MoE folded into one block).
// Experts are ungated (up → relu² → down), sigmoid-routed with an always-present exp_probs_b, beside
// an ungated shared expert of width expert_ff × --shared.
void build_nemotron(ModelBuilder& b, const char* arch) {
    const ModelSpec& s = b.spec();
    Refuse r;
    r.dense_blocks = true;
    r.shared = false;
    r.nextn = false;
    refuse(s, arch, r);
    require_blocks(s, arch, 3, "a Mamba-2, an MoE and an attention block");
    if (s.shared < 1)
        throw UsageError(
            fmt::format("--shared {}: {}'s loader always creates the shared expert (use --shared 1 or more)",
                        s.shared, arch));
    enum Kind { kMamba, kMoe, kAttn, kMtp };
    const auto kind = [&](int64_t i) {
        if (i >= s.blocks) return kMtp;
        static constexpr Kind kCycle[4] = {kMamba, kMoe, kAttn, kMoe};
        return kCycle[i % 4];
    };
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    const int64_t ssm_head_dim = 16, d_inner = 2 * s.embd, n_ssm_head = d_inner / ssm_head_dim, d_state = 16,
                  n_group = 2, d_conv = 4;
    const int64_t d_in_proj = 2 * d_inner + 2 * n_group * d_state + n_ssm_head,
                  d_conv_ch = d_inner + 2 * n_group * d_state;
    const int64_t shexp = s.expert_ff * s.shared, total = s.blocks + s.nextn;
    std::vector<int64_t> ff, kv;
    for (int64_t i = 0; i < total; ++i) {
        const Kind k = kind(i);
        ff.push_back(k == kMoe || k == kMtp ? s.expert_ff : 0);
        kv.push_back(k == kAttn || k == kMtp ? heads_kv : 0);
    }
    b.gpt2_tokenizer();
    base_keys(b);
    b.u32_array("feed_forward_length", ff);
    b.u32_array("attention.head_count_kv", kv);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.f32("attention.layer_norm_epsilon", 1e-5);  // read even without MTP blocks
    b.u32("ssm.conv_kernel", d_conv);
    b.u32("ssm.inner_size", d_inner);
    b.u32("ssm.state_size", d_state);
    b.u32("ssm.time_step_rank", n_ssm_head);
    b.u32("ssm.group_count", n_group);
    ModelBuilder::ExpertKeys k;
    k.shared = k.weights_norm = k.weights_scale = k.groups = true;
    b.expert_keys(k);
    b.u32("expert_shared_feed_forward_length", shexp);

    ModelBuilder::Experts e;
    e.gate = false;
    e.probs_bias = true;
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    output_tensors(b);
    for (int64_t i = 0; i < total; ++i) {
        const Kind kd = kind(i);
        if (kd == kMtp) {
            b.nextn_block(i);
            b.norm(B::blk(i, "nextn.enorm.weight"), s.embd);
            b.norm(B::blk(i, "nextn.hnorm.weight"), s.embd);
            b.tensor(B::blk(i, "nextn.eh_proj.weight"), {2 * s.embd, s.embd, 1, 1}, TypeClass::kAttn);
            b.norm(B::blk(i, "nextn.shared_head_norm.weight"), s.embd);
        }
        input_norm(b, B::blk(i, "attn_norm.weight"));
        if (kd == kMamba) {
            b.tensor(B::blk(i, "ssm_in.weight"), {s.embd, d_in_proj, 1, 1}, TypeClass::kAttn);
            b.tensor(B::blk(i, "ssm_conv1d.weight"), {d_conv, d_conv_ch, 1, 1}, TypeClass::kF32);
            b.bias(B::blk(i, "ssm_conv1d.bias"), d_conv_ch);
            b.bias(B::blk(i, "ssm_dt.bias"), n_ssm_head);
            b.tensor(B::blk(i, "ssm_a"), {1, n_ssm_head, 1, 1}, TypeClass::kF32);
            b.tensor(B::blk(i, "ssm_d"), {1, n_ssm_head, 1, 1}, TypeClass::kF32, FillKind::kNearOne);
            b.tensor(B::blk(i, "ssm_norm.weight"), {d_inner / n_group, n_group, 1, 1}, TypeClass::kF32,
                     FillKind::kNearOne);
            b.tensor(B::blk(i, "ssm_out.weight"), {d_inner, s.embd, 1, 1}, TypeClass::kAttn);
            continue;
        }
        if (kd == kAttn || kd == kMtp) attention_qkvo(b, i, head_dim * s.heads, head_dim * heads_kv);
        if (kd == kAttn) continue;
        if (kd == kMtp) b.norm(B::blk(i, "post_attention_norm.weight"), s.embd);
        b.experts(i, e);
        b.shared_experts(i, shexp, /*gate=*/false);
    }
}

}  // namespace

void build_nemotron_h(ModelBuilder& b) {
    build_nemotron(b, "nemotron_h");
}

void build_nemotron_h_moe(ModelBuilder& b) {
    build_nemotron(b, "nemotron_h_moe");
}

// ---- lfm2moe --------------------------------------------------------------------------------------
// Short-convolution blocks (even, head_count_kv 0) and attention blocks with q/k norms (odd); the first
// --dense-blocks blocks (default 1) have a dense SwiGLU FFN, the rest sigmoid-routed experts with an
// always-present exp_probs_b. The output norm is token_embd_norm.
void build_lfm2moe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse(s, "lfm2moe", {});
    require_blocks(s, "lfm2moe", 2, "a short-convolution and an attention block");
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2), l_cache = 3;
    const auto attn = [](int64_t i) { return i % 2 == 1; };
    std::vector<int64_t> kv;
    for (int64_t i = 0; i < s.blocks; ++i) kv.push_back(attn(i) ? heads_kv : 0);
    b.gpt2_tokenizer();
    base_keys(b);
    b.u32("feed_forward_length", s.ff);
    b.u32_array("attention.head_count_kv", kv);
    b.u32("rope.dimension_count", head_dim);
    b.f32("rope.freq_base", 1000000.0);
    b.u32("shortconv.l_cache", l_cache);
    ModelBuilder::ExpertKeys k;
    k.leading_dense = k.groups = true;
    k.gating = 2;  // sigmoid; the loader requires the key
    b.expert_keys(k);

    ModelBuilder::Experts e;
    e.probs_bias = true;
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    output_tensors(b, "token_embd_norm.weight");
    for (int64_t i = 0; i < s.blocks; ++i) {
        input_norm(b, B::blk(i, "attn_norm.weight"));
        if (attn(i)) {
            b.norm(B::blk(i, "attn_q_norm.weight"), head_dim);
            b.norm(B::blk(i, "attn_k_norm.weight"), head_dim);
            attention_qkvo(b, i, s.embd, head_dim * heads_kv);
        } else {
            b.tensor(B::blk(i, "shortconv.conv.weight"), {l_cache, s.embd, 1, 1}, TypeClass::kF32);
            b.tensor(B::blk(i, "shortconv.in_proj.weight"), {s.embd, 3 * s.embd, 1, 1}, TypeClass::kAttn);
            b.tensor(B::blk(i, "shortconv.out_proj.weight"), {s.embd, s.embd, 1, 1}, TypeClass::kAttn);
        }
        input_norm(b, B::blk(i, "ffn_norm.weight"));
        if (i < s.dense_blocks)
            b.dense_ffn(i, s.ff);
        else
            b.experts(i, e);
    }
}

}  // namespace gguf_reap::gen
