// Hybrid-attention and grouped MoE decoders: step35 (Step-3.5: full/SWA layers with per-layer head counts,
// a head-wise attention gate, an always-on shared expert, MTP blocks), mimo2 (MiMo-V2-Flash: full/SWA
// layers, value heads narrower than key heads, attention sinks, dense MTP blocks), grovemoe (routed
// experts plus one "chunk" expert per group of experts_per_group), and lfm2 (short-conv / attention
// hybrid whose loader never creates experts: its preset is dense). Loaders: src/models/{step35,mimo2,
// grovemoe,lfm2}.cpp.
#include <fmt/format.h>

#include "gen/archs.h"
#include "gen/archs/refuse.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

constexpr int64_t kSlidingWindow = 16;

void refuse(bool bad, const std::string& message) {
    if (bad) throw UsageError(message);
}

// Expert groups, which no router of this file has.
void refuse_groups(const ModelSpec& s, const char* arch) {
    refuse(s.given.count("--groups") && s.groups > 1,
           fmt::format("--groups {}: {}'s router has no expert groups", s.groups, arch));
}

// A full/SWA pattern as the real models start theirs: full, SWA, SWA, full, repeated.
bool swa_block(int64_t i) {
    return i % 4 == 1 || i % 4 == 2;
}

// The options of an architecture whose loader never creates expert tensors.

}  // namespace

// Block i < --dense-blocks is dense, the others MoE (the loader decides by ffn_gate_inp's presence;
// leading_dense_block_count is written as the converter writes it, not read). The --nextn blocks are full
// decoder blocks with routed and shared experts, plus nextn.eh_proj/enorm/hnorm/shared_head_norm.
void build_step35(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_groups(s, "step35");
    refuse(s.experts > 0 && s.shared < 1,
           "--shared 0: step35's graph runs the shared expert on every MoE block (use --shared 1 or more)");
    refuse(s.tied, "--tied: step35's loader requires output.weight");
    refuse(s.blocks < 2, fmt::format("--blocks {}: step35 needs a sliding-window block (block 1)", s.blocks));
    const int64_t total = s.blocks + s.nextn, hd = s.embd / s.heads, kv = std::max<int64_t>(1, s.heads / 2);
    const auto swa = [&](int64_t i) { return i < s.blocks && swa_block(i); };
    const auto heads = [&](int64_t i) { return swa(i) ? s.heads + s.heads / 2 : s.heads; };
    const auto dense = [&](int64_t i) { return s.experts == 0 || (i < s.blocks && i < s.dense_blocks); };
    const int64_t shexp_ff = s.expert_ff * std::max<int64_t>(1, s.shared);

    b.gpt2_tokenizer();
    b.u32("context_length", 4096);
    b.u32("embedding_length", s.embd);
    b.u32("block_count", total);
    b.u32("feed_forward_length", s.ff);
    std::vector<int64_t> h(static_cast<size_t>(total)), hkv(static_cast<size_t>(total), kv);
    std::vector<bool> pattern(static_cast<size_t>(total));
    std::vector<double> clamp_exp(static_cast<size_t>(total)), clamp_shexp(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) {
        const auto u = static_cast<size_t>(i);
        h[u] = heads(i);
        pattern[u] = swa(i);
        const bool clamped = i < s.blocks && i % 4 >= 2;
        clamp_exp[u] = clamped ? 7.0 : 0.0;
        clamp_shexp[u] = clamped ? 16.0 : 0.0;
    }
    b.u32_array("attention.head_count", h);
    b.u32_array("attention.head_count_kv", hkv);
    // Explicit: with per-layer head counts the defaults would use layer 0's.
    b.u32("attention.key_length", hd);
    b.u32("attention.value_length", hd);
    b.u32("rope.dimension_count", hd);  // full layers rope half of it
    b.f32("rope.freq_base", 5e6);
    b.f32("rope.freq_base_swa", 1e4);
    b.f32("attention.layer_norm_rms_epsilon", 1e-5);
    b.u32("attention.sliding_window", kSlidingWindow);
    b.bool_array("attention.sliding_window_pattern", pattern);
    b.f32_array("swiglu_clamp_exp", clamp_exp);
    b.f32_array("swiglu_clamp_shexp", clamp_shexp);
    b.u32("vocab_size", s.vocab);
    if (s.experts > 0) {
        ModelBuilder::ExpertKeys k;
        k.leading_dense = k.weights_norm = k.weights_scale = true;
        k.gating = 2;  // sigmoid
        b.expert_keys(k);
        b.u32("expert_shared_feed_forward_length", shexp_ff);
    } else {
        b.u32("expert_feed_forward_length", s.expert_ff);  // required even without experts
    }

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
    for (int64_t i = 0; i < total; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, hd, heads(i), kv, /*qk_norm=*/true);
        b.tensor(ModelBuilder::blk(i, "attn_gate.weight"), {s.embd, heads(i), 1, 1}, TypeClass::kAttn);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (dense(i)) {
            b.dense_ffn(i, s.ff);
        } else {
            ModelBuilder::Experts x;
            x.allow_fused = false;
            x.probs_bias = true;  // exp_probs_b.bias, as Step-3.5 has
            b.experts(i, x);
            b.shared_experts(i, shexp_ff);
        }
        if (i >= s.blocks) {
            b.nextn_head(i);
        }
    }
}

// Block i < --dense-blocks is dense, the others MoE (by ffn_gate_inp's presence; the router is sigmoid
// with exp_probs_b, hard-coded in the graph). Value heads are half the key heads' width. The --nextn
// blocks are as MiMo-V2-Flash's: sliding-window, fused attn_qkv, a dense FFN (the MTP graph requires
// one), nextn.eh_proj/enorm/hnorm and layer_output_norm; so they are nextn blocks without experts.
void build_mimo2(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_groups(s, "mimo2");
    refuse(s.given.count("--shared") && s.shared > 0,
           fmt::format("--shared {}: mimo2 has no shared experts", s.shared));
    refuse(s.tied, "--tied: mimo2's loader requires output.weight");
    refuse(s.blocks < 2, fmt::format("--blocks {}: mimo2 needs a sliding-window block (block 1)", s.blocks));
    const int64_t total = s.blocks + s.nextn, hk = s.embd / s.heads, hv = hk / 2;
    refuse(hv < 1, fmt::format("--embd {} / --heads {}: mimo2's value heads are half the key heads", s.embd,
                               s.heads));
    const int64_t kv_full = std::max<int64_t>(1, s.heads / 2), kv_swa = std::max<int64_t>(1, s.heads / 4);
    const auto swa = [&](int64_t i) { return i >= s.blocks || swa_block(i); };
    const auto kv = [&](int64_t i) { return swa(i) ? kv_swa : kv_full; };

    b.gpt2_tokenizer();
    b.u32("context_length", 4096);
    b.u32("embedding_length", s.embd);
    b.u32("block_count", total);
    b.u32("feed_forward_length", s.ff);
    b.u32("attention.head_count", s.heads);
    std::vector<int64_t> hkv(static_cast<size_t>(total)), pattern(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) {
        hkv[static_cast<size_t>(i)] = kv(i);
        pattern[static_cast<size_t>(i)] = swa(i) ? 1 : 0;
    }
    b.u32_array("attention.head_count_kv", hkv);
    b.u32("attention.key_length", hk);
    b.u32("attention.value_length", hv);
    b.u32("rope.dimension_count", hv);  // partial rotary
    b.f32("rope.freq_base", 5e6);
    b.f32("rope.freq_base_swa", 1e4);
    b.f32("attention.layer_norm_rms_epsilon", 1e-5);
    b.u32("attention.sliding_window", kSlidingWindow);
    b.i32_array("attention.sliding_window_pattern", pattern);
    b.f32("attention.value_scale", 0.707);
    b.u32("vocab_size", s.vocab);
    if (s.experts > 0) {
        b.expert_keys({});  // count, used, width (and nextn_predict_layers)
    } else {
        b.u32("expert_feed_forward_length", s.expert_ff);  // required even without experts
        if (s.nextn > 0) b.u32("nextn_predict_layers", s.nextn);
    }

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
    for (int64_t i = 0; i < total; ++i) {
        const bool mtp = i >= s.blocks;
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        if (mtp) {  // the MTP graph reads the fused projection
            b.tensor(ModelBuilder::blk(i, "attn_qkv.weight"),
                     {s.embd, hk * s.heads + (hk + hv) * kv(i), 1, 1}, TypeClass::kAttn);
        } else {
            b.tensor(ModelBuilder::blk(i, "attn_q.weight"), {s.embd, hk * s.heads, 1, 1}, TypeClass::kAttn);
            b.tensor(ModelBuilder::blk(i, "attn_k.weight"), {s.embd, hk * kv(i), 1, 1}, TypeClass::kAttn);
            b.tensor(ModelBuilder::blk(i, "attn_v.weight"), {s.embd, hv * kv(i), 1, 1}, TypeClass::kAttn);
        }
        b.tensor(ModelBuilder::blk(i, "attn_output.weight"), {hv * s.heads, s.embd, 1, 1}, TypeClass::kAttn);
        if (swa(i)) b.tensor(ModelBuilder::blk(i, "attn_sinks.weight"), {s.heads, 1, 1, 1}, TypeClass::kF32);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (mtp || s.experts == 0 || i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
        } else {
            ModelBuilder::Experts x;
            x.allow_fused = false;
            x.probs_bias = true;  // the graph routes by sigmoid + selection bias
            b.experts(i, x);
        }
        if (mtp) {
            b.nextn_block(i);
            b.tensor(ModelBuilder::blk(i, "nextn.eh_proj.weight"), {2 * s.embd, s.embd, 1, 1},
                     TypeClass::kAttn);
            for (const char* w : {"nextn.enorm.weight", "nextn.hnorm.weight", "layer_output_norm.weight"})
                b.norm(ModelBuilder::blk(i, w), s.embd);
        }
    }
}

// Every block MoE: routed experts (gate/up/down at --expert-ff) and --experts / 2 chunk experts
// ffn_{gate,up,down}_chexps at the head width, chunk j serving routed experts 2j and 2j+1
// (experts_per_group 2, as the converter writes it). One router (softmax weights, sigmoid selection).
void build_grovemoe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_groups(s, "grovemoe");
    refuse(s.given.count("--dense-blocks") && s.dense_blocks > 0,
           fmt::format("--dense-blocks {}: every block of grovemoe is MoE", s.dense_blocks));
    refuse(
        s.given.count("--shared") && s.shared > 0,
        fmt::format("--shared {}: grovemoe has no shared experts (its chunk experts are routed)", s.shared));
    refuse(s.nextn > 0, fmt::format("--nextn {}: grovemoe has no MTP blocks", s.nextn));
    refuse(s.experts == 0, "--experts 0: grovemoe's loader asserts routed experts");
    constexpr int64_t kGroup = 2;  // experts_per_group
    refuse(s.experts % kGroup != 0,
           fmt::format("--experts {}: grovemoe pairs every {} routed experts with one chunk expert; use a "
                       "multiple of {}",
                       s.experts, kGroup, kGroup));
    const int64_t chunks = s.experts / kGroup, hd = s.embd / s.heads,
                  heads_kv = std::max<int64_t>(1, s.heads / 2);
    refuse(s.used > chunks,
           fmt::format("--used {}: grovemoe's graph needs expert_used_count <= the {} chunk experts", s.used,
                       chunks));

    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.expert_keys({});
    b.u32("expert_chunk_feed_forward_length", hd);
    b.u32("experts_per_group", kGroup);
    b.f32("expert_group_scale", 0.05);

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, hd, s.heads, heads_kv, /*qk_norm=*/true);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        ModelBuilder::Experts x;
        x.allow_fused = false;
        b.experts(i, x);
        // Not in gguf-reap's tensor table: named as LLM_TENSOR_NAMES names them. Always F32: their input is
        // the routed output, not a normalised one, and with quantised random blocks (scales up to 2, weights
        // up to 127) the product overflows and llama-simple samples from NaN logits.
        b.tensor(ModelBuilder::blk(i, "ffn_gate_chexps.weight"), {s.embd, hd, chunks, 1}, TypeClass::kF32);
        b.tensor(ModelBuilder::blk(i, "ffn_down_chexps.weight"), {hd, s.embd, chunks, 1}, TypeClass::kF32);
        b.tensor(ModelBuilder::blk(i, "ffn_up_chexps.weight"), {s.embd, hd, chunks, 1}, TypeClass::kF32);
    }
}

// Dense: lfm2's load_arch_hparams sets n_layer_dense_lead = n_layer, so its MoE branch is dead code
// (LFM2's MoE checkpoints are lfm2moe). Even blocks are short-conv blocks (head_count_kv 0), odd ones
// attention; output_norm is named token_embd_norm; output.weight is optional (--tied).
void build_lfm2(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_expert_options(s, "lfm2", "its loader forces every block dense; LFM2's MoE models are lfm2moe");
    constexpr int64_t kConvCache = 3;  // shortconv.l_cache
    const int64_t hd = s.embd / s.heads, kv = std::max<int64_t>(1, s.heads / 2);
    const auto conv = [](int64_t i) { return i % 2 == 0; };

    b.gpt2_tokenizer();
    b.u32("vocab_size", s.vocab);
    b.u32("context_length", 4096);
    b.u32("embedding_length", s.embd);
    b.u32("block_count", s.blocks);
    b.u32("feed_forward_length", s.ff);
    b.u32("attention.head_count", s.heads);
    std::vector<int64_t> hkv(static_cast<size_t>(s.blocks));
    for (int64_t i = 0; i < s.blocks; ++i) hkv[static_cast<size_t>(i)] = conv(i) ? 0 : kv;
    b.u32_array("attention.head_count_kv", hkv);
    b.u32("rope.dimension_count", hd);
    b.f32("rope.freq_base", 1e6);
    b.f32("attention.layer_norm_rms_epsilon", 1e-5);
    b.u32("shortconv.l_cache", kConvCache);

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    b.norm("token_embd_norm.weight", s.embd);  // the output norm (LLM_TENSOR_OUTPUT_NORM_LFM2)
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.dense_ffn(i, s.ff);
        if (conv(i)) {
            // ne[0] = l_cache: no quant block fits, F32.
            b.tensor(ModelBuilder::blk(i, "shortconv.conv.weight"), {kConvCache, s.embd, 1, 1},
                     TypeClass::kF32);
            // F32 too: the conv multiplies two of its three outputs (B and C) with the third, and with
            // quantised random blocks (scales up to 2, weights up to 127) that overflows to NaN logits.
            b.tensor(ModelBuilder::blk(i, "shortconv.in_proj.weight"), {s.embd, 3 * s.embd, 1, 1},
                     TypeClass::kF32);
            b.tensor(ModelBuilder::blk(i, "shortconv.out_proj.weight"), {s.embd, s.embd, 1, 1},
                     TypeClass::kAttn);
        } else {
            b.norm(ModelBuilder::blk(i, "attn_q_norm.weight"), hd);
            b.norm(ModelBuilder::blk(i, "attn_k_norm.weight"), hd);
            b.tensor(ModelBuilder::blk(i, "attn_q.weight"), {s.embd, s.embd, 1, 1}, TypeClass::kAttn);
            b.tensor(ModelBuilder::blk(i, "attn_k.weight"), {s.embd, hd * kv, 1, 1}, TypeClass::kAttn);
            b.tensor(ModelBuilder::blk(i, "attn_v.weight"), {s.embd, hd * kv, 1, 1}, TypeClass::kAttn);
            b.tensor(ModelBuilder::blk(i, "attn_output.weight"), {s.embd, s.embd, 1, 1}, TypeClass::kAttn);
        }
    }
}

}  // namespace gguf_reap::gen
