// The MiniMax family. minimax-01 (MiniMax-Text-01 / M1): lightning (linear) attention blocks with a
// softmax-attention block every second one, every block MoE, the expert width in feed_forward_length.
// minimax-m2: GQA with full-width q/k norms, every block MoE with sigmoid routing and a required
// selection bias, the expert tensors sized by feed_forward_length. minimax-m3: M2's attention with per-head
// q/k norms, leading dense blocks, routed + shared experts (shared width = expert width × count), and the
// MSA sparse-attention indexer in every MoE block.
// Loaders: src/models/minimax-01.cpp, src/models/minimax-m2.cpp, src/models/minimax-m3.cpp.
#include <algorithm>

#include <fmt/format.h>

#include "gen/archs.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

// What a loader takes beyond the routed experts; refuse_unsupported throws for the options it does not.
struct Takes {
    bool dense_blocks = false;  // leading dense blocks (--dense-blocks)
    bool shared = false;        // shared experts (--shared)
    bool ff = false;            // a dense FFN that --ff sizes
    const char* ff_why = "";    // why --ff is refused
    bool tied = false;          // output.weight is optional (--tied)
};

void refuse_unsupported(const ModelSpec& s, const char* arch, const Takes& t) {
    if (s.experts == 0)
        throw UsageError(fmt::format("--experts 0: {}'s loader requires routed experts", arch));
    if (!t.dense_blocks && s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format("--dense-blocks {}: every block of {} is MoE", s.dense_blocks, arch));
    if (!t.shared && s.given.count("--shared") && s.shared > 0)
        throw UsageError(fmt::format("--shared {}: {} has no shared experts", s.shared, arch));
    if (!t.ff && s.given.count("--ff"))
        throw UsageError(
            fmt::format("--ff {}: {} has no dense FFN; {} (set the expert width with --expert-ff)", s.ff,
                        arch, t.ff_why));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
    if (!t.tied && s.tied)
        throw UsageError(
            fmt::format("--tied: {}'s loader requires output.weight (no tied embeddings)", arch));
}

// The expert keys every MiniMax loader reads (groups are applied by llama.cpp's shared MoE code).
ModelBuilder::ExpertKeys expert_keys_of() {
    ModelBuilder::ExpertKeys k;
    k.groups = true;
    return k;
}

}  // namespace

void build_minimax_01(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Takes t;
    t.ff_why = "its feed_forward_length is the expert width";
    t.tied = true;
    refuse_unsupported(s, "minimax-01", t);
    if (s.blocks < 2)
        throw UsageError(
            fmt::format("--blocks {}: minimax-01's lightning attention divides its slope by block_count - 1 "
                        "(use 2 or more)",
                        s.blocks));
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    const int64_t n_qo = head_dim * s.heads;
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.ff = s.expert_ff;  // the only width key: sizes ffn_{gate,up,down}_exps
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);  // the graph asserts key_length == value_length
    b.u32("rope.dimension_count", std::max<int64_t>(2, head_dim / 2));  // partial rotary, as the real model
    b.f32("residual_scale", 1.0);
    // Block i is lightning attention unless (i + 1) % interval == 0: blocks 0, 2, ... lightning, 1, 3, ...
    // softmax.
    constexpr int64_t kInterval = 2;
    b.u32("full_attention_interval", kInterval);
    ModelBuilder::ExpertKeys k = expert_keys_of();
    k.width = false;  // no expert_feed_forward_length for this architecture
    b.expert_keys(k);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        if ((i + 1) % kInterval != 0) {  // lightning: Q, K, V of n_head heads each, a sigmoid output gate
            b.norm(ModelBuilder::blk(i, "attn_norm_2.weight"), n_qo);
            b.tensor(ModelBuilder::blk(i, "attn_qkv.weight"), {s.embd, 3 * n_qo, 1, 1}, TypeClass::kAttn);
            b.tensor(ModelBuilder::blk(i, "attn_gate.weight"), {s.embd, n_qo, 1, 1}, TypeClass::kAttn);
            b.tensor(ModelBuilder::blk(i, "attn_output.weight"), {n_qo, s.embd, 1, 1}, TypeClass::kAttn);
        } else {
            b.attention(i, head_dim, s.heads, heads_kv);
        }
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        ModelBuilder::Experts e;
        e.allow_fused = false;
        b.experts(i, e);
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void build_minimax_m2(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Takes t;
    t.ff_why = "its feed_forward_length sizes the expert tensors";
    refuse_unsupported(s, "minimax-m2", t);
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.ff = s.expert_ff;  // what the loader sizes ffn_{gate,up,down}_exps with
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.u32("rope.dimension_count", std::max<int64_t>(2, head_dim / 2));
    ModelBuilder::ExpertKeys k = expert_keys_of();  // expert_feed_forward_length: required, = the width
    k.gating = 2;                                   // sigmoid; without the key the first graph build aborts
    b.expert_keys(k);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv);
        // Full-width q/k norms over all heads (not per head).
        b.norm(ModelBuilder::blk(i, "attn_q_norm.weight"), head_dim * s.heads);
        b.norm(ModelBuilder::blk(i, "attn_k_norm.weight"), head_dim * heads_kv);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        ModelBuilder::Experts e;
        e.allow_fused = false;
        e.probs_bias = true;  // required
        b.experts(i, e);
    }
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void build_minimax_m3(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    Takes t;
    t.dense_blocks = t.shared = t.ff = true;
    refuse_unsupported(s, "minimax-m3", t);
    if (s.shared < 1)
        throw UsageError(
            "--shared 0: minimax-m3's loader always creates the shared experts (use --shared 1 or more)");
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    // The MSA indexer: one head per KV head (the sparse path asserts it), keys as wide as a head.
    const int64_t idx_heads = heads_kv, idx_dim = head_dim;
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);  // feed_forward_length: the leading dense blocks
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.u32("rope.dimension_count", std::max<int64_t>(2, head_dim / 2));
    ModelBuilder::ExpertKeys k = expert_keys_of();
    k.shared = k.leading_dense = k.weights_norm = k.weights_scale = true;
    k.gating = 2;  // sigmoid (required)
    b.expert_keys(k);
    b.u32("attention.indexer.head_count", idx_heads);
    b.u32("attention.indexer.key_length", idx_dim);
    b.u32("attention.indexer.top_k", 2);
    b.u32("attention.indexer.block_size", 4);
    b.u32("attention.indexer.local_blocks", 1);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv, /*qk_norm=*/true);  // per-head q/k norms
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
            continue;
        }
        ModelBuilder::Experts e;
        e.allow_fused = false;
        e.probs_bias = true;  // required
        b.experts(i, e);
        b.shared_experts(i, s.expert_ff * s.shared);  // no width key of their own
        b.tensor(ModelBuilder::blk(i, "indexer.q_proj.weight"), {s.embd, idx_heads * idx_dim, 1, 1},
                 TypeClass::kAttn);
        b.tensor(ModelBuilder::blk(i, "indexer.k_proj.weight"), {s.embd, idx_dim, 1, 1}, TypeClass::kAttn);
        b.norm(ModelBuilder::blk(i, "indexer.q_norm.weight"), idx_dim);
        b.norm(ModelBuilder::blk(i, "indexer.k_norm.weight"), idx_dim);
    }
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

}  // namespace gguf_reap::gen
