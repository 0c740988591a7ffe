// The Kimi hybrid family: KDA (Kimi Delta Attention, recurrent) blocks and nope-only MLA blocks, the
// block type given by the head_count_kv array (0: KDA), leading dense blocks, sigmoid routing with a
// required exp_probs_b, shared experts whose width is expert_feed_forward_length × max(count, 1).
// kimi-k3 adds latent experts (run at expert_latent_length between ffn_routed_down/up), situ activation,
// attention residuals, an MLA output gate and a full-rank KDA gate. Loaders: src/models/kimi-linear.cpp,
// src/models/kimi-k3.cpp.
//
// (--arch kimi-k3 is this architecture; --preset kimi-k3 is a shape preset of defaults, unrelated.)
#include <fmt/format.h>

#include "gen/archs.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

// Sizes chosen so that every row a quantised type could hold is a whole number of 32-element blocks.
struct Kimi {
    int64_t kda_head = 32;  // kda.head_dim: d_inner = kda_head × head_count
    int64_t conv = 4;       // ssm.conv_kernel
    int64_t q_lora = 32;    // kimi-k3 only (kimi-linear has no q compression)
    int64_t kv_lora = 32;
    int64_t rope = 16;  // qk_rope_head_dim: sizes K, though no RoPE is applied (rope type NONE)
    int64_t nope = 32;
    int64_t v_head = 32;
    int64_t k_mla() const { return nope + rope; }
};

void refuse_kimi(const ModelSpec& s, const char* arch) {
    if (s.experts == 0)
        throw UsageError(fmt::format("--experts 0: {}'s loader requires routed experts", arch));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
    if (s.tied) throw UsageError(fmt::format("--tied: {}'s loader requires output.weight", arch));
    if (s.blocks < 2)
        throw UsageError(fmt::format(
            "--blocks {}: {} needs a KDA and an MLA block (its hybrid memory aborts without either)",
            s.blocks, arch));
}

// The keys both loaders read. `mla` says which blocks are MLA (head_count_kv 1), the others KDA (0).
void kimi_keys(ModelBuilder& b, const Kimi& k, const std::vector<bool>& mla, bool k3) {
    const ModelSpec& s = b.spec();
    b.gpt2_tokenizer();
    b.u32("vocab_size", s.vocab);
    b.u32("context_length", 4096);
    b.u32("embedding_length", s.embd);
    b.u32("block_count", s.blocks);
    b.u32("feed_forward_length", s.ff);
    b.u32("attention.head_count", s.heads);
    std::vector<int64_t> kv;
    for (bool m : mla) kv.push_back(m ? 1 : 0);
    b.u32_array("attention.head_count_kv", kv);
    b.u32("attention.key_length", k.kv_lora + k.rope);  // the MLA cache row: latent + rope
    b.u32("attention.value_length", k.kv_lora);
    b.u32("attention.key_length_mla", k.k_mla());
    b.u32("attention.value_length_mla", k.v_head);
    if (k3) b.u32("attention.q_lora_rank", k.q_lora);
    b.u32("attention.kv_lora_rank", k.kv_lora);
    b.f32("attention.layer_norm_rms_epsilon", 1e-5);
    b.u32("rope.dimension_count", k.rope);
    b.u32("ssm.conv_kernel", k.conv);
    b.u32("kda.head_dim", k.kda_head);
    ModelBuilder::ExpertKeys e;
    e.shared = e.leading_dense = e.weights_scale = e.groups = true;
    e.weights_norm = k3;  // kimi-linear's loader does not read it (it always renormalises)
    e.gating = 2;         // sigmoid
    b.expert_keys(e);
}

// A KDA block's attention. kimi-k3: ssm_a {n_head} and a full-rank ssm_g; kimi-linear: ssm_a {1, n_head}
// and a low-rank ssm_g_a/ssm_g_b.
void kda(ModelBuilder& b, int64_t i, const Kimi& k, bool k3) {
    const int64_t n = b.spec().embd, h = b.spec().heads, inner = k.kda_head * h;
    const auto blk = [i](const char* rest) { return ModelBuilder::blk(i, rest); };
    for (const char* c : {"ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight"})
        b.tensor(blk(c), {k.conv, 1, inner, 1}, TypeClass::kF32);
    b.tensor(blk("attn_q.weight"), {n, inner, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("attn_k.weight"), {n, inner, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("attn_v.weight"), {n, inner, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("ssm_f_a.weight"), {n, k.kda_head, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("ssm_f_b.weight"), {k.kda_head, inner, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("ssm_beta.weight"), {n, h, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("ssm_a"), {k3 ? h : 1, k3 ? 1 : h, 1, 1}, TypeClass::kF32);  // no ".weight": −exp(A_log)
    b.bias(blk("ssm_dt.bias"), inner);
    if (k3) {
        b.tensor(blk("ssm_g.weight"), {n, inner, 1, 1}, TypeClass::kAttn);
    } else {
        b.tensor(blk("ssm_g_a.weight"), {n, k.kda_head, 1, 1}, TypeClass::kAttn);
        b.tensor(blk("ssm_g_b.weight"), {k.kda_head, inner, 1, 1}, TypeClass::kAttn);
    }
    b.norm(blk("ssm_norm.weight"), k.kda_head);
    b.tensor(blk("attn_output.weight"), {inner, n, 1, 1}, TypeClass::kAttn);
}

// An MLA block's attention, with the split attn_k_b/attn_v_b of the MLA cache. kimi-k3: q through
// q_lora and a sigmoid output gate; kimi-linear: a full-rank attn_q.
void mla(ModelBuilder& b, int64_t i, const Kimi& k, bool k3) {
    const int64_t n = b.spec().embd, h = b.spec().heads;
    const auto blk = [i](const char* rest) { return ModelBuilder::blk(i, rest); };
    if (k3) {
        b.norm(blk("attn_q_a_norm.weight"), k.q_lora);
        b.tensor(blk("attn_q_a.weight"), {n, k.q_lora, 1, 1}, TypeClass::kAttn);
        b.tensor(blk("attn_q_b.weight"), {k.q_lora, h * k.k_mla(), 1, 1}, TypeClass::kAttn);
    } else {
        b.tensor(blk("attn_q.weight"), {n, h * k.k_mla(), 1, 1}, TypeClass::kAttn);
    }
    b.norm(blk("attn_kv_a_norm.weight"), k.kv_lora);
    b.tensor(blk("attn_kv_a_mqa.weight"), {n, k.kv_lora + k.rope, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("attn_k_b.weight"), {k.nope, k.kv_lora, h, 1}, TypeClass::kAttn);
    b.tensor(blk("attn_v_b.weight"), {k.kv_lora, k.v_head, h, 1}, TypeClass::kAttn);
    if (k3) b.tensor(blk("attn_gate.weight"), {n, h * k.v_head, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("attn_output.weight"), {h * k.v_head, n, 1, 1}, TypeClass::kAttn);
}

}  // namespace

// Defaults: 4 blocks, block 3 (every 4th) MLA and the others KDA (a model of fewer blocks: the last MLA),
// the first --dense-blocks dense; experts at a latent width of n_embd / 2 (down to a multiple of 32, at least
// 32); shared experts optional (--shared 0: none); attention residuals over blocks of 2.
void build_kimi_k3(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_kimi(s, "kimi-k3");
    const Kimi k;
    std::vector<bool> mla_blocks;
    for (int64_t i = 0; i < s.blocks; ++i)
        mla_blocks.push_back(i % 4 == 3 || (s.blocks < 4 && i == s.blocks - 1));
    const int64_t latent = std::max<int64_t>(32, s.embd / 2 / 32 * 32);  // whole 32-element blocks
    constexpr int64_t kAttnResBlock = 2;
    kimi_keys(b, k, mla_blocks, /*k3=*/true);
    b.f32("kda.gate_lower_bound", -5.0);
    b.u32("expert_latent_length", latent);
    b.u32("attn_res.block_size", kAttnResBlock);
    b.f32("activation.situ_beta", 2.0);
    b.f32("activation.situ_linear_beta", 10.0);

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
    b.tensor("output_res_score.weight", {s.embd, 1, 1, 1}, TypeClass::kF32);
    for (int64_t i = 0; i < s.blocks; ++i) {
        const auto blk = [i](const char* rest) { return ModelBuilder::blk(i, rest); };
        b.norm(blk("attn_norm.weight"), s.embd);
        b.norm(blk("ffn_norm.weight"), s.embd);
        b.tensor(blk("attn_res_score.weight"), {s.embd, 1, 1, 1}, TypeClass::kF32);
        b.tensor(blk("ffn_res_score.weight"), {s.embd, 1, 1, 1}, TypeClass::kF32);
        if (mla_blocks[static_cast<size_t>(i)])
            mla(b, i, k, /*k3=*/true);
        else
            kda(b, i, k, /*k3=*/true);
        if (i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
            continue;
        }
        ModelBuilder::Experts e;
        e.in = latent;  // the experts run in the latent space; the router reads the full-width input
        e.allow_fused = false;
        e.probs_bias = true;  // required
        b.experts(i, e);
        b.tensor(blk("ffn_routed_down.weight"), {s.embd, latent, 1, 1}, TypeClass::kAttn);
        b.tensor(blk("ffn_routed_up.weight"), {latent, s.embd, 1, 1}, TypeClass::kAttn);
        b.norm(blk("ffn_routed_norm.weight"), latent);
        if (s.shared > 0) b.shared_experts(i, s.expert_ff * s.shared);
    }
}

// Defaults: 4 blocks, the odd ones MLA and the even ones KDA, the first
// --dense-blocks dense; experts at n_embd; shared experts required (the graph uses them unconditionally).
void build_kimi_linear(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_kimi(s, "kimi-linear");
    if (s.shared < 1)
        throw UsageError(
            fmt::format("--shared {}: kimi-linear's graph always runs the shared experts (use "
                        "--shared 1 or more)",
                        s.shared));
    const Kimi k;
    std::vector<bool> mla_blocks;
    for (int64_t i = 0; i < s.blocks; ++i) mla_blocks.push_back(i % 2 == 1);
    kimi_keys(b, k, mla_blocks, /*k3=*/false);

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        if (mla_blocks[static_cast<size_t>(i)])
            mla(b, i, k, /*k3=*/false);
        else
            kda(b, i, k, /*k3=*/false);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
            continue;
        }
        ModelBuilder::Experts e;
        e.allow_fused = false;
        e.probs_bias = true;  // required
        b.experts(i, e);
        b.shared_experts(i, s.expert_ff * s.shared);
    }
}

}  // namespace gguf_reap::gen
