// The Qwen MoE family: every block MoE; q/k norms (qwen3*); a shared expert behind its own sigmoid gate
// (ffn_gate_inp_shexp: qwen2moe, qwen35moe, qwen3next); IMROPE sections (qwen3vlmoe, qwen35moe); hybrid
// stacks of gated delta-net (linear attention) and gated full attention blocks with MTP (nextn) blocks
// (qwen35moe, qwen3next). Loaders: src/models/{qwen3moe,qwen2moe,qwen3vlmoe,qwen35moe,qwen3next}.cpp.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "gen/archs.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

void refuse_common(const ModelSpec& s, const char* arch) {
    if (s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format("--dense-blocks {}: every block of {} is MoE", s.dense_blocks, arch));
    if (s.given.count("--shared") && s.shared > 0)
        throw UsageError(fmt::format("--shared {}: {} has no shared experts", s.shared, arch));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
}

// What a loader of the family takes beyond plain routed experts.
struct Takes {
    bool shared = false;  // the gated shared expert, which the loader then requires
    bool nextn = false;   // MTP blocks after the trunk
    bool tied = false;    // no output.weight
};

// Refuses the options a loader has no keys or blocks for (refuse_common, option by option).
void refuse_unsupported(const ModelSpec& s, const char* arch, const Takes& t) {
    if (s.experts == 0)
        throw UsageError(fmt::format("--experts 0: {}'s loader requires routed experts", arch));
    if (s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format("--dense-blocks {}: every block of {} is MoE", s.dense_blocks, arch));
    if (t.shared && s.shared < 1)
        throw UsageError(fmt::format(
            "--shared 0: {}'s loader always creates the gated shared expert (use --shared 1 or more)", arch));
    if (!t.shared && s.given.count("--shared") && s.shared > 0)
        throw UsageError(fmt::format("--shared {}: {} has no shared experts", s.shared, arch));
    if (!t.nextn && s.nextn > 0)
        throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
    if (s.fused_gate_up && s.scales)
        throw UsageError(
            fmt::format("--scales with --fused-gate-up: {}'s loader looks up no per-expert scale for a fused "
                        "ffn_gate_up_exps",
                        arch));
    if (s.tied && !t.tied) throw UsageError(fmt::format("--tied: {}'s loader requires output.weight", arch));
}

// IMROPE: rope.dimension_sections, four sections that add up to n_rot / 2 (the last, for vision, 0).
std::vector<int64_t> rope_sections(int64_t n_rot) {
    const int64_t half = n_rot / 2;
    return {(half + 2) / 3, (half + 1) / 3, half / 3, 0};
}

void output_tensors(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

// The shared expert of qwen2moe / qwen35moe / qwen3next: ffn_{gate,up,down}_shexp at width
// expert_ff × --shared, scaled by sigmoid(ffn_gate_inp_shexp · x) (a vector, not an expert router).
void gated_shared_expert(ModelBuilder& b, int64_t i) {
    const ModelSpec& s = b.spec();
    b.tensor(ModelBuilder::blk(i, "ffn_gate_inp_shexp.weight"), {s.embd, 1, 1, 1}, TypeClass::kF32);
    b.shared_experts(i, s.expert_ff * s.shared);
}

// Gated delta-net sizes (fixed; the verified tiny model's): head width (ssm.state_size), key heads
// (ssm.group_count), value heads (ssm.time_step_rank), conv kernel.
struct Gdn {
    int64_t state = 16, k_heads = 2, v_heads = 4, conv = 4;
    int64_t key_dim() const { return state * k_heads; }
    int64_t value_dim() const { return state * v_heads; }  // = ssm.inner_size (the graph's head_v_dim)
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
};

// qwen35moe and qwen3next: trunk blocks alternate linear (gated delta-net) and full attention
// (full_attention_interval 2: blocks 0, 2, ... linear), every block MoE + gated shared expert; the
// --nextn MTP blocks are full-attention blocks with nextn.* tensors, which llama-simple loads as skipped.
void build_qwen_hybrid(ModelBuilder& b, const char* arch, bool qwen35) {
    const ModelSpec& s = b.spec();
    refuse_unsupported(s, arch, {.shared = true, .nextn = true, .tied = true});
    const int64_t n = s.embd, head_dim = n / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    if (head_dim % 4 != 0)
        throw UsageError(
            fmt::format("--embd {} / --heads {}: {}'s head width {} must be a multiple of 4 (its "
                        "rotary half is split in pairs)",
                        s.embd, s.heads, arch, head_dim));
    const int64_t n_rot = head_dim / 2;  // partial rotary, as the real models have
    constexpr int64_t kFullAttentionInterval = 2;
    const Gdn d;
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.u32("rope.dimension_count", n_rot);
    if (qwen35) b.i32_array("rope.dimension_sections", rope_sections(n_rot));
    ModelBuilder::ExpertKeys k;
    k.groups = true;
    b.expert_keys(k);  // with nextn_predict_layers when --nextn
    b.u32("expert_shared_feed_forward_length", s.expert_ff * s.shared);
    b.u32("ssm.conv_kernel", d.conv);
    b.u32("ssm.inner_size", d.value_dim());
    b.u32("ssm.state_size", d.state);
    b.u32("ssm.time_step_rank", d.v_heads);
    b.u32("ssm.group_count", d.k_heads);
    b.u32("full_attention_interval", kFullAttentionInterval);
    b.tensor("token_embd.weight", {n, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks + s.nextn; ++i) {
        const auto p = [i](const char* rest) { return ModelBuilder::blk(i, rest); };
        const bool mtp = i >= s.blocks;
        const bool linear = !mtp && (i + 1) % kFullAttentionInterval != 0;
        b.norm(p("attn_norm.weight"), n);
        b.norm(p("post_attention_norm.weight"), n);
        if (linear) {
            b.tensor(p("attn_qkv.weight"), {n, d.conv_dim(), 1, 1}, TypeClass::kAttn);
            b.tensor(p("attn_gate.weight"), {n, d.value_dim(), 1, 1}, TypeClass::kAttn);
            b.tensor(p("ssm_conv1d.weight"), {d.conv, d.conv_dim(), 1, 1}, TypeClass::kF32);
            b.bias(p("ssm_dt.bias"), d.v_heads);
            b.bias(p("ssm_a"), d.v_heads);  // -exp(A_log); 0: no decay, the state stays bounded
            if (qwen35) {
                b.tensor(p("ssm_beta.weight"), {n, d.v_heads, 1, 1}, TypeClass::kAttn);
                b.tensor(p("ssm_alpha.weight"), {n, d.v_heads, 1, 1}, TypeClass::kAttn);
            } else {
                b.tensor(p("ssm_ba.weight"), {n, 2 * d.v_heads, 1, 1}, TypeClass::kAttn);
            }
            b.norm(p("ssm_norm.weight"), d.state);
            b.tensor(p("ssm_out.weight"), {d.value_dim(), n, 1, 1}, TypeClass::kAttn);
        } else {  // gated attention: attn_q holds each head's query and output gate
            b.tensor(p("attn_q.weight"), {n, 2 * head_dim * s.heads, 1, 1}, TypeClass::kAttn);
            b.tensor(p("attn_k.weight"), {n, head_dim * heads_kv, 1, 1}, TypeClass::kAttn);
            b.tensor(p("attn_v.weight"), {n, head_dim * heads_kv, 1, 1}, TypeClass::kAttn);
            b.tensor(p("attn_output.weight"), {head_dim * s.heads, n, 1, 1}, TypeClass::kAttn);
            b.norm(p("attn_q_norm.weight"), head_dim);
            b.norm(p("attn_k_norm.weight"), head_dim);
        }
        // An MTP block's expert weights are skipped by the loader, which then looks up no scales for them.
        ModelBuilder::Experts e;
        e.scales = !mtp;
        b.experts(i, e);
        gated_shared_expert(b, i);
        if (mtp) {
            b.nextn_block(i);
            b.tensor(p("nextn.eh_proj.weight"), {2 * n, n, 1, 1}, TypeClass::kAttn);
            for (const char* w :
                 {"nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight"})
                b.norm(p(w), n);
        }
    }
    output_tensors(b);
}

}  // namespace

void build_qwen3moe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_common(s, "qwen3moe");
    if (s.experts == 0) throw UsageError("--experts 0: qwen3moe's loader requires routed experts");
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.expert_keys({});
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv, /*qk_norm=*/true);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.experts(i, {});
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

// Qwen1.5/Qwen2-MoE: q/k/v biases, no q/k norms, the gated shared expert.
void build_qwen2moe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_unsupported(s, "qwen2moe", {.shared = true});
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    ModelBuilder::ExpertKeys k;
    k.groups = true;
    b.expert_keys(k);
    b.u32("expert_shared_feed_forward_length", s.expert_ff * s.shared);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv);
        b.bias(ModelBuilder::blk(i, "attn_q.bias"), head_dim * s.heads);
        b.bias(ModelBuilder::blk(i, "attn_k.bias"), head_dim * heads_kv);
        b.bias(ModelBuilder::blk(i, "attn_v.bias"), head_dim * heads_kv);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.experts(i, {});
        gated_shared_expert(b, i);
    }
    output_tensors(b);
}

// Qwen3-VL-MoE's text model: qwen3moe's blocks with IMROPE sections and deepstack metadata.
void build_qwen3vlmoe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_unsupported(s, "qwen3vlmoe", {.tied = true});
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    if (head_dim % 2 != 0)
        throw UsageError(
            fmt::format("--embd {} / --heads {}: qwen3vlmoe's head width {} must be even (IMROPE)", s.embd,
                        s.heads, head_dim));
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.i32_array("rope.dimension_sections", rope_sections(head_dim));
    // Blocks that add a slice of the (text: zero-padded) input embedding; metadata only, no tensors.
    b.u32("n_deepstack_layers", std::min<int64_t>(2, s.blocks));
    ModelBuilder::ExpertKeys k;
    k.groups = true;
    b.expert_keys(k);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv, /*qk_norm=*/true);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.experts(i, {});
    }
    output_tensors(b);
}

void build_qwen35moe(ModelBuilder& b) {
    build_qwen_hybrid(b, "qwen35moe", /*qwen35=*/true);
}

void build_qwen3next(ModelBuilder& b) {
    build_qwen_hybrid(b, "qwen3next", /*qwen35=*/false);
}

}  // namespace gguf_reap::gen
