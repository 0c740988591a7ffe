// The Ling (Bailing) MoE family. bailingmoe: every block MoE with a shared expert, softmax routing.
// bailingmoe2: fused QKV with q/k norms, leading dense blocks, sigmoid routing with an optional
// selection bias, expert groups, MTP (nextn) blocks. bailingmoe3: a hybrid of KDA (Kimi delta
// attention, recurrent) blocks and gated MLA blocks, the selection bias required, MTP blocks.
// Loaders: src/models/bailingmoe.cpp, bailingmoe2.cpp, bailingmoe3.cpp.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "gen/archs.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

// What none of the three loaders creates.
void refuse_common(const ModelSpec& s, const char* arch) {
    if (s.experts == 0)
        throw UsageError(fmt::format("--experts 0: {}'s loader requires routed experts", arch));
    if (s.shared < 1)
        throw UsageError(fmt::format(
            "--shared 0: {}'s loader always creates the shared experts (use --shared 1 or more)", arch));
}

// The MTP blocks of bailingmoe2 and bailingmoe3 are loaded with TENSOR_SKIP: their expert weights are
// shape-checked and dropped, so llama.cpp's generic pass creates no ffn_*_exps.scale for them and a
// file holding such scales has tensors the loader never creates.
void refuse_skipped_scales(const ModelSpec& s, const char* arch) {
    if (s.scales && s.nextn > 0)
        throw UsageError(
            fmt::format("--scales with --nextn: {} loads its MTP blocks with TENSOR_SKIP, so llama.cpp "
                        "creates no expert scales for them",
                        arch));
}

// Plain q/k/v attention at head_dim × heads.
int64_t heads_kv_of(const ModelSpec& s) {
    return std::max<int64_t>(1, s.heads / 2);
}

// The MTP head's own tensors (the loader names the trailing norm layer_output_norm).
void nextn_tensors(ModelBuilder& b, int64_t i, bool shared_head_norm) {
    const int64_t n = b.spec().embd;
    b.tensor(ModelBuilder::blk(i, "nextn.eh_proj.weight"), {2 * n, n, 1, 1}, TypeClass::kAttn);
    b.norm(ModelBuilder::blk(i, "nextn.enorm.weight"), n);
    b.norm(ModelBuilder::blk(i, "nextn.hnorm.weight"), n);
    if (shared_head_norm) b.norm(ModelBuilder::blk(i, "nextn.shared_head_norm.weight"), n);
    b.norm(ModelBuilder::blk(i, "layer_output_norm.weight"), n);
    b.nextn_block(i);
}

}  // namespace

void build_bailingmoe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_common(s, "bailingmoe");
    if (s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format(
            "--dense-blocks {}: bailingmoe reads leading_dense_block_count but makes every block MoE",
            s.dense_blocks));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: bailingmoe has no MTP blocks", s.nextn));
    if (s.tied) throw UsageError("--tied: bailingmoe's loader requires output.weight");
    const int64_t head_dim = s.embd / s.heads, heads_kv = heads_kv_of(s);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);  // feed_forward_length is read, no tensor uses it
    ModelBuilder::ExpertKeys k;
    k.shared = k.weights_norm = k.weights_scale = k.groups = true;
    b.expert_keys(k);
    b.u32("leading_dense_block_count", 0);  // read, and ignored: every block is MoE
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        ModelBuilder::Experts e;
        e.allow_fused = false;
        b.experts(i, e);
        b.shared_experts(i, s.expert_ff * s.shared);  // the loader: n_ff_exp × expert_shared_count
    }
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void build_bailingmoe2(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_common(s, "bailingmoe2");
    refuse_skipped_scales(s, "bailingmoe2");
    if (s.tied) throw UsageError("--tied: bailingmoe2's loader requires output.weight");
    // attn_qkv's q part is n_embd wide: head_dim × heads == n_embd, as --embd / --heads gives.
    const int64_t head_dim = s.embd / s.heads, heads_kv = heads_kv_of(s);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("rope.dimension_count", head_dim / 2);  // partial rotary, as the converter writes it
    ModelBuilder::ExpertKeys k;
    k.shared = k.leading_dense = k.weights_norm = k.weights_scale = k.groups = true;
    k.gating = 2;  // sigmoid (the loader requires the key)
    b.expert_keys(k);
    // The loader multiplies this by expert_shared_count.
    b.u32("expert_shared_feed_forward_length", s.expert_ff);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    const int64_t total = s.blocks + s.nextn;
    for (int64_t i = 0; i < total; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.tensor(ModelBuilder::blk(i, "attn_qkv.weight"), {s.embd, s.embd + 2 * heads_kv * head_dim, 1, 1},
                 TypeClass::kAttn);
        b.tensor(ModelBuilder::blk(i, "attn_output.weight"), {head_dim * s.heads, s.embd, 1, 1},
                 TypeClass::kAttn);
        b.norm(ModelBuilder::blk(i, "attn_q_norm.weight"), head_dim);
        b.norm(ModelBuilder::blk(i, "attn_k_norm.weight"), head_dim);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
        } else {  // MoE, the MTP blocks too (loaded with TENSOR_SKIP, shape-checked all the same)
            ModelBuilder::Experts e;
            e.allow_fused = false;
            b.experts(i, e);
            b.shared_experts(i, s.expert_ff * s.shared);
        }
        if (i >= s.blocks) nextn_tensors(b, i, /*shared_head_norm=*/true);
    }
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

namespace {

// bailingmoe3's sizes: KDA heads of embd / heads (d_inner = embd); MLA with a plain q projection (no
// q_lora_rank), rows that are whole Q8_0 / K-quant blocks where quantised.
struct Ling3 {
    int64_t kda_head, d_conv, kv_lora, rope, nope, v_head;
};

Ling3 ling3_of(const ModelSpec& s) {
    return {s.embd / s.heads, 4, 32, 16, 32, 32};
}

// The converter's is_full_attention with layer_group_size 4: every fourth block, the trailing partial
// group and the MTP blocks are MLA; the others KDA.
bool ling3_mla(int64_t i, int64_t blocks) {
    return i >= blocks || (i + 1) % 4 == 0 || i >= blocks / 4 * 4;
}

void ling3_mla_tensors(ModelBuilder& b, int64_t i, const Ling3& m) {
    const int64_t n = b.spec().embd, h = b.spec().heads;
    b.tensor(ModelBuilder::blk(i, "attn_q.weight"), {n, h * (m.nope + m.rope), 1, 1}, TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "attn_kv_a_mqa.weight"), {n, m.kv_lora + m.rope, 1, 1}, TypeClass::kAttn);
    b.norm(ModelBuilder::blk(i, "attn_kv_a_norm.weight"), m.kv_lora);
    // F32 whatever --type-attn says: k_b multiplies q before its dot product with the F16 K cache, and
    // with the generator's quantised data (random blocks, weights up to ~250) that product overflows
    // F16 and the logits turn NaN (llama-simple then prints nothing).
    b.tensor(ModelBuilder::blk(i, "attn_k_b.weight"), {m.nope, m.kv_lora, h, 1}, TypeClass::kF32);
    b.tensor(ModelBuilder::blk(i, "attn_v_b.weight"), {m.kv_lora, m.v_head, h, 1}, TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "attn_gate.weight"), {n, h, 1, 1}, TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "attn_output.weight"), {h * m.v_head, n, 1, 1}, TypeClass::kAttn);
}

void ling3_kda_tensors(ModelBuilder& b, int64_t i, const Ling3& m) {
    const int64_t n = b.spec().embd, h = b.spec().heads, d_inner = m.kda_head * h;
    for (const char* x : {"q", "k", "v"})  // the short convolutions (F32, as ggml_ssm_conv takes them)
        b.tensor(ModelBuilder::blk(i, fmt::format("ssm_conv1d_{}.weight", x)), {m.d_conv, 1, d_inner, 1},
                 TypeClass::kF32);
    for (const char* x : {"q", "k", "v"})  // separate: the graph reads wq, wk, wv
        b.tensor(ModelBuilder::blk(i, fmt::format("attn_{}.weight", x)), {n, d_inner, 1, 1},
                 TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "ssm_f_a.weight"), {n, d_inner, 1, 1}, TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "ssm_beta.weight"), {n, h, 1, 1}, TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "ssm_a"), {1, h, 1, 1}, TypeClass::kF32, FillKind::kNearOne);  // no suffix
    b.bias(ModelBuilder::blk(i, "ssm_dt.bias"), d_inner);
    b.tensor(ModelBuilder::blk(i, "ssm_g_a.weight"), {n, d_inner, 1, 1}, TypeClass::kAttn);
    b.norm(ModelBuilder::blk(i, "ssm_norm.weight"), m.kda_head);
    b.tensor(ModelBuilder::blk(i, "attn_output.weight"), {d_inner, n, 1, 1}, TypeClass::kAttn);
}

}  // namespace

void build_bailingmoe3(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_common(s, "bailingmoe3");
    refuse_skipped_scales(s, "bailingmoe3");
    const Ling3 m = ling3_of(s);
    const int64_t total = s.blocks + s.nextn;
    b.gpt2_tokenizer();
    // The generic keys by hand: head_count_kv is a per-block array (0: a KDA block, 1: an MLA block).
    b.u32("context_length", 4096);
    b.u32("embedding_length", s.embd);
    b.u32("block_count", total);
    b.u32("feed_forward_length", s.ff);
    b.u32("attention.head_count", s.heads);
    std::vector<int64_t> kv(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) kv[static_cast<size_t>(i)] = ling3_mla(i, s.blocks) ? 1 : 0;
    b.i32_array("attention.head_count_kv", kv);
    b.f32("attention.layer_norm_rms_epsilon", 1e-6);
    b.f32("rope.freq_base", 10000.0);
    b.u32("vocab_size", s.vocab);
    b.u32("rope.dimension_count", m.rope);
    b.u32("attention.key_length", m.kv_lora + m.rope);  // the K cache row: latent + rope
    b.u32("attention.key_length_mla", m.nope + m.rope);
    b.u32("attention.value_length_mla", m.v_head);
    b.u32("attention.kv_lora_rank", m.kv_lora);
    b.u32("ssm.conv_kernel", m.d_conv);
    b.u32("kda.head_dim", m.kda_head);
    b.boolean("kda.safe_gate", true);
    b.f32("kda.gate_lower_bound", -5.0);
    ModelBuilder::ExpertKeys k;
    k.shared = k.leading_dense = k.weights_norm = k.weights_scale = k.groups = true;
    k.gating = 2;  // sigmoid (the loader requires the key)
    b.expert_keys(k);
    b.u32("expert_shared_feed_forward_length", s.expert_ff * s.shared);  // used as is
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < total; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        if (ling3_mla(i, s.blocks))
            ling3_mla_tensors(b, i, m);
        else
            ling3_kda_tensors(b, i, m);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (i < s.dense_blocks && i < s.blocks) {
            b.dense_ffn(i, s.ff);
        } else {  // MoE, the MTP blocks always
            ModelBuilder::Experts e;
            e.allow_fused = false;
            e.probs_bias = true;  // required here
            b.experts(i, e);
            b.shared_experts(i, s.expert_ff * s.shared);
        }
        if (i >= s.blocks) nextn_tensors(b, i, /*shared_head_norm=*/false);
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

}  // namespace gguf_reap::gen
