// Single-architecture MoE families.
//  - gpt-oss: alternating sliding-window / full attention with biases and per-head attention sinks; a
//    router bias and per-expert biases on every projection. Loader: src/models/openai-moe.cpp.
//  - grok: Grok-2's layout, a dense FFN in parallel with the MoE in every block, GELU experts, softcapped
//    attention. Loader: src/models/grok.cpp.
//  - dbrx: LayerNorm, fused clamped QKV, every block MoE, the expert width in feed_forward_length.
//    Loader: src/models/dbrx.cpp.
//  - arctic: a dense residual MLP (n_embd wide) in parallel with the MoE in every block, the MoE input
//    normed by ffn_norm_exps (a norm, not expert-indexed); the expert width in feed_forward_length.
//    Loader: src/models/arctic.cpp.
//  - smallthinker: every block MoE with the router on the block input, ReGLU experts, sliding-window
//    attention with a NoPE full block every fourth. Loader: src/models/smallthinker.cpp.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gen/archs.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

// What a loader takes beyond the routed experts; refuse_unsupported throws for the options it does not.
struct Takes {
    bool ff = false;          // a dense FFN that --ff sizes
    const char* ff_why = "";  // why --ff is refused
    bool tied = false;        // output.weight is optional (--tied)
};

void refuse_unsupported(const ModelSpec& s, const char* arch, const Takes& t) {
    if (s.experts == 0)
        throw UsageError(fmt::format("--experts 0: {}'s loader requires routed experts", arch));
    if (s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format("--dense-blocks {}: every block of {} is MoE", s.dense_blocks, arch));
    if (s.given.count("--shared") && s.shared > 0)
        throw UsageError(fmt::format("--shared {}: {} has no shared experts", s.shared, arch));
    if (!t.ff && s.given.count("--ff"))
        throw UsageError(
            fmt::format("--ff {}: {} has no dense FFN of that width; {} (set the expert width "
                        "with --expert-ff)",
                        s.ff, arch, t.ff_why));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
    if (!t.tied && s.tied)
        throw UsageError(
            fmt::format("--tied: {}'s loader requires output.weight (no tied embeddings)", arch));
}

// The expert keys of these loaders (groups are applied by llama.cpp's shared MoE code when written).
ModelBuilder::ExpertKeys expert_keys_of(bool width) {
    ModelBuilder::ExpertKeys k;
    k.width = width;
    k.groups = true;
    return k;
}

ModelBuilder::Experts separate_gate_up() {
    ModelBuilder::Experts e;
    e.allow_fused = false;
    return e;
}

// gpt-oss's routed experts: ModelBuilder::experts with the router bias and the per-expert biases that
// this architecture always has (whether or not --router-bias / --exps-bias are given). Named through
// the tensor table; the biases get small random values, as trained ones have.
void gpt_oss_experts(ModelBuilder& b, int64_t i) {
    const ModelSpec& s = b.spec();
    using R = ExpertRole;
    using P = Projection;
    const int64_t n = s.embd, E = s.experts, F = s.expert_ff;
    const auto name = [i](R r, P p = P::kNone) {
        return block_tensor_name(static_cast<int>(i), expert_kind(r, p));
    };
    b.tensor(name(R::kRouter), {n, E, 1, 1}, TypeClass::kRouter);
    b.tensor(name(R::kRouterBias), {E, 1, 1, 1}, TypeClass::kF32, FillKind::kSmall);
    b.tensor(name(R::kWeight, P::kGate), {n, F, E, 1}, TypeClass::kExps, FillKind::kSmall, "--embd");
    b.tensor(name(R::kWeight, P::kUp), {n, F, E, 1}, TypeClass::kExps, FillKind::kSmall, "--embd");
    b.tensor(name(R::kWeight, P::kDown), {F, n, E, 1}, TypeClass::kDown, FillKind::kSmall, "--expert-ff");
    // F32 always: the CPU's ADD_ID asserts F32 expert biases.
    b.tensor(name(R::kBias, P::kGate), {F, E, 1, 1}, TypeClass::kF32, FillKind::kSmall);
    b.tensor(name(R::kBias, P::kUp), {F, E, 1, 1}, TypeClass::kF32, FillKind::kSmall);
    b.tensor(name(R::kBias, P::kDown), {n, E, 1, 1}, TypeClass::kF32, FillKind::kSmall);
    if (s.scales)
        for (P p : {P::kGate, P::kUp, P::kDown})
            b.tensor(name(R::kScale, p), {E, 1, 1, 1}, TypeClass::kF32, FillKind::kNearOne);
    b.moe_block(i);
}

}  // namespace

void build_gpt_oss(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Takes t;
    t.ff_why = "its feed_forward_length is unread and written as the expert width";
    refuse_unsupported(s, "gpt-oss", t);
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.ff = s.expert_ff;  // as convert_hf_to_gguf writes it (intermediate_size); the loader does not read it
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    // Required. The default pattern (2) makes even blocks sliding-window, odd ones full; block 0 is one,
    // as the iSWA cache needs.
    b.u32("attention.sliding_window", 128);
    b.expert_keys(expert_keys_of(/*width=*/true));  // gating: softmax over the selected, fixed in the graph
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv);
        b.bias(ModelBuilder::blk(i, "attn_q.bias"), head_dim * s.heads);
        b.bias(ModelBuilder::blk(i, "attn_k.bias"), head_dim * heads_kv);
        b.bias(ModelBuilder::blk(i, "attn_v.bias"), head_dim * heads_kv);
        b.bias(ModelBuilder::blk(i, "attn_output.bias"), s.embd);
        // One learned sink logit per head (F32: ggml's soft_max with sinks asserts it).
        b.tensor(ModelBuilder::blk(i, "attn_sinks.weight"), {s.heads, 1, 1, 1}, TypeClass::kF32);
        b.norm(ModelBuilder::blk(i, "post_attention_norm.weight"), s.embd);  // the pre-MoE norm
        gpt_oss_experts(b, i);
    }
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void build_grok(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Takes t;
    t.ff = t.tied = true;
    refuse_unsupported(s, "grok", t);
    // q and attn_output are {n_embd, n_embd}; the graph asserts head_dim == n_rot.
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);                              // feed_forward_length: the parallel dense FFN
    b.expert_keys(expert_keys_of(/*width=*/true));  // expert_feed_forward_length: the experts' own width
    b.f32("attn_logit_softcapping", 30.0);
    b.f32("router_logit_softcapping", 30.0);
    b.f32("attention.output_scale", 1.0 / std::sqrt(static_cast<double>(head_dim)));
    // Grok-1's defaults (78.38, 0.577) are for its own widths; 1 keeps a tiny model's activations sane.
    b.f32("embedding_scale", 1.0);
    b.f32("logit_scale", 1.0);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv);
        b.norm(ModelBuilder::blk(i, "attn_output_norm.weight"), s.embd);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.dense_ffn(i, s.ff);  // Grok-2: runs beside the MoE, output (dense + moe) / sqrt(2)
        b.experts(i, separate_gate_up());
        b.norm(ModelBuilder::blk(i, "layer_output_norm.weight"), s.embd);
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void build_dbrx(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Takes t;
    t.ff_why = "its feed_forward_length is the expert width";
    refuse_unsupported(s, "dbrx", t);
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.ff = s.expert_ff;  // sizes ffn_{gate,up,down}_exps
    g.heads_kv = heads_kv;
    g.layer_norm = true;  // LayerNorm (attention.layer_norm_epsilon), no biases
    b.generic_keys(g);
    b.f32("attention.clamp_kqv", 8.0);  // required
    b.expert_keys(expert_keys_of(/*width=*/false));
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.tensor(ModelBuilder::blk(i, "attn_qkv.weight"), {s.embd, s.embd + 2 * head_dim * heads_kv, 1, 1},
                 TypeClass::kAttn);
        b.tensor(ModelBuilder::blk(i, "attn_output.weight"), {s.embd, s.embd, 1, 1}, TypeClass::kAttn);
        b.norm(ModelBuilder::blk(i, "attn_output_norm.weight"), s.embd);  // the pre-MoE norm
        b.experts(i, separate_gate_up());
    }
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void build_arctic(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Takes t;
    t.ff_why = "its residual MLP is n_embd wide and feed_forward_length is the expert width";
    t.tied = true;
    refuse_unsupported(s, "arctic", t);
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.ff = s.expert_ff;  // sizes ffn_{gate,up,down}_exps
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.expert_keys(expert_keys_of(/*width=*/false));
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.dense_ffn(i, s.embd);  // the dense residual MLP, hard-wired to n_embd
        b.norm(ModelBuilder::blk(i, "ffn_norm_exps.weight"), s.embd);  // a norm [n_embd], no expert axis
        b.experts(i, separate_gate_up());
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void build_smallthinker(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Takes t;
    t.ff_why = "its feed_forward_length is unread and written as the expert width";
    t.tied = true;
    refuse_unsupported(s, "smallthinker", t);
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.ff = s.expert_ff;  // as the converter writes it; the loader does not read it
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("rope.dimension_count", head_dim);  // the graph asserts n_rot == head_dim
    // Sliding-window mode (the loader then uses a 4096 window, pattern 4: block 0 full, 1-3 windowed).
    // A single block would have no windowed block, which the iSWA cache refuses: plain attention then.
    if (s.blocks >= 2) b.u32("attention.sliding_window", 32);
    ModelBuilder::ExpertKeys k = expert_keys_of(/*width=*/true);
    k.gating = 1;  // softmax; without the key the first graph build aborts
    b.expert_keys(k);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.experts(i, separate_gate_up());
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

}  // namespace gguf_reap::gen
