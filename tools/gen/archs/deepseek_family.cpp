// The rest of the DeepSeek family and its descendants, beside deepseek2 (deepseek.cpp): leading dense blocks,
// routed experts with shared experts of width expert_ff × shared.
//   deepseek       DeepSeek-MoE v1: plain attention, softmax routing.    src/models/deepseek.cpp
//   deepseek2-ocr  DeepSeek-OCR's decoder: deepseek2 without MLA (MHA).  src/models/deepseek2ocr.cpp
//   deepseek32     DeepSeek-V3.2: MLA + the DSA lightning indexer, MTP.  src/models/deepseek32.cpp
//   glm-dsa        GLM-5: as deepseek32 (its indexer tensors optional).  src/models/glm-dsa.cpp
//   mistral4       Mistral 4: deepseek2's loader and graph, softmax.     src/models/deepseek2.cpp
//   dots1          dots.llm1: q/k norms, sigmoid routing, no tied head.  src/models/dots1.cpp
//   glm4moe        GLM-4.5: GQA with biases, required exp_probs_b, MoE
//                  nextn blocks that the loader skips.                  src/models/glm4-moe.cpp
#include <fmt/format.h>

#include "gen/archs.h"
#include "gen/archs/mla.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

// What an architecture's loader takes beyond the family's common ground; refuse_family throws
// UsageError for every other option given.
struct Takes {
    bool nextn = false;    // MTP blocks (nextn_predict_layers)
    bool shared0 = false;  // no shared experts (expert_shared_count 0)
    bool tied = true;      // output.weight optional
};

void refuse_family(const ModelSpec& s, const char* arch, const Takes& t) {
    if (s.experts == 0)
        throw UsageError(fmt::format(
            "--experts 0: {}'s loader requires routed experts (expert_count > 0) in the blocks past the "
            "leading dense ones",
            arch));
    if (s.shared < 1 && !t.shared0)
        throw UsageError(fmt::format(
            "--shared 0: {}'s loader always creates the shared experts (use --shared 1 or more)", arch));
    if (s.nextn > 0 && !t.nextn)
        throw UsageError(fmt::format("--nextn {}: {}'s loader has no MTP (nextn) blocks", s.nextn, arch));
    if (s.fused_gate_up && s.scales)
        throw UsageError(
            "--scales with --fused-gate-up: llama.cpp creates per-expert scales for ffn_gate_exps, "
            "ffn_up_exps and ffn_down_exps only, none for ffn_gate_up_exps");
    if (s.tied && !t.tied) throw UsageError(fmt::format("--tied: {}'s loader requires output.weight", arch));
}

// The FFN half of block i: a dense FFN in the leading dense blocks, else routed experts (+ shared ones),
// with exp_probs_b when --probs-bias asks or the loader requires it (`probs_bias`). `skipped`: the loader
// skips this block's tensors (a nextn block), so it creates no per-expert scales there.
void ffn(ModelBuilder& b, int64_t i, bool probs_bias = false, bool skipped = false) {
    const ModelSpec& s = b.spec();
    if (i < s.dense_blocks) {
        b.dense_ffn(i, s.ff);
        return;
    }
    ModelBuilder::Experts e;
    e.probs_bias = probs_bias;
    e.scales = !skipped;
    b.experts(i, e);
    if (s.shared > 0) b.shared_experts(i, s.expert_ff * s.shared);
}

// The MTP head's own tensors (the block's attention and experts are added as any block's).
void nextn_tensors(ModelBuilder& b, int64_t i) {
    const int64_t n = b.spec().embd;
    b.nextn_block(i);
    b.tensor(ModelBuilder::blk(i, "nextn.eh_proj.weight"), {2 * n, n, 1, 1}, TypeClass::kAttn);
    for (const char* w : {"nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight"})
        b.norm(ModelBuilder::blk(i, w), n);
}

void output_tensors(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

// ---- deepseek2 without MLA: deepseek, deepseek2-ocr ---------------------------------------------------

// Plain multi-head attention over n_embd (both loaders create attn_q/k/v/output as {n_embd, n_embd}).
void mha_model(ModelBuilder& b, int gating, int64_t rope_dims) {
    const ModelSpec& s = b.spec();
    b.gpt2_tokenizer();
    b.generic_keys({});
    b.u32("rope.dimension_count", rope_dims);
    ModelBuilder::ExpertKeys k;
    k.shared = k.leading_dense = k.weights_scale = k.groups = true;
    k.gating = gating;
    b.expert_keys(k);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    const int64_t head_dim = s.embd / s.heads;
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, s.heads);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        ffn(b, i);
    }
    output_tensors(b);
}

// ---- MLA with the DSA lightning indexer: deepseek32, glm-dsa --------------------------------------------

struct Indexer {
    int64_t heads, head_dim, top_k;
};

// The indexer's key width must be a power of two of at least 64 (its cache gets a Hadamard rotation of
// that size) and at least the rope width. 128 where 64 would equal the MLA cache's K row (then that cache
// is rotated too).
Indexer indexer_of(const Mla& m) {
    return {2, m.kv_lora + m.rope == 64 ? 128 : 64, 8};
}

void dsa_model(ModelBuilder& b, const char* arch) {
    const ModelSpec& s = b.spec();
    refuse_family(s, arch, {.nextn = true});
    const Mla m = mla_of(s);
    const Indexer x = indexer_of(m);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = 1;  // MLA served as MQA
    b.generic_keys(g);
    mla_keys(b, m);
    b.u32("attention.indexer.head_count", x.heads);
    b.u32("attention.indexer.key_length", x.head_dim);
    b.u32("attention.indexer.top_k", x.top_k);
    ModelBuilder::ExpertKeys k;
    k.shared = k.leading_dense = k.weights_norm = k.weights_scale = k.groups = true;
    k.gating = 2;  // sigmoid (deepseek32 requires the key)
    b.expert_keys(k);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks + s.nextn; ++i) {
        mla_tensors(b, i, m, mla_k_b_fill(s));
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.norm(ModelBuilder::blk(i, "indexer.k_norm.weight"), x.head_dim);
        b.bias(ModelBuilder::blk(i, "indexer.k_norm.bias"), x.head_dim);
        b.tensor(ModelBuilder::blk(i, "indexer.proj.weight"), {s.embd, x.heads, 1, 1}, TypeClass::kAttn);
        b.tensor(ModelBuilder::blk(i, "indexer.attn_k.weight"), {s.embd, x.head_dim, 1, 1}, TypeClass::kAttn);
        b.tensor(ModelBuilder::blk(i, "indexer.attn_q_b.weight"), {m.q_lora, x.heads * x.head_dim, 1, 1},
                 TypeClass::kAttn);
        const bool nextn = i >= s.blocks;
        ffn(b, i, false, nextn);
        if (nextn) nextn_tensors(b, i);
    }
    output_tensors(b);
}

}  // namespace

void build_deepseek(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_family(s, "deepseek", {});
    // The graph routes by softmax, always, and ropes the whole head.
    mha_model(b, /*gating=*/-1, /*rope_dims=*/s.embd / s.heads);
}

void build_deepseek2_ocr(ModelBuilder& b) {
    refuse_family(b.spec(), "deepseek2-ocr", {});
    // Softmax; the OCR graph ropes the whole head (NEOX, base 10000) whatever rope.dimension_count says,
    // and DeepSeek-OCR's converter writes its qk_rope_head_dim, 0.
    mha_model(b, /*gating=*/1, /*rope_dims=*/0);
}

void build_deepseek32(ModelBuilder& b) {
    dsa_model(b, "deepseek32");
}

void build_glm_dsa(ModelBuilder& b) {
    dsa_model(b, "glm-dsa");
}

void build_mistral4(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_family(s, "mistral4", {.nextn = true});
    const Mla m = mla_of(s);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = 1;  // MLA served as MQA
    b.generic_keys(g);
    mla_keys(b, m);
    ModelBuilder::ExpertKeys k;
    // No expert_gating_func, as Mistral 4's converter writes it: deepseek2's loader then routes by softmax.
    k.shared = k.leading_dense = k.weights_norm = k.weights_scale = k.groups = true;
    b.expert_keys(k);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks + s.nextn; ++i) {
        mla_tensors(b, i, m, mla_k_b_fill(s));
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        const bool nextn = i >= s.blocks;
        ffn(b, i, false, nextn);
        if (nextn) nextn_tensors(b, i);
    }
    output_tensors(b);
}

void build_dots1(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_family(s, "dots1", {.tied = false});
    const int64_t head_dim = s.embd / s.heads;
    b.gpt2_tokenizer();
    b.generic_keys({});  // head_count_kv = head_count: the loader sizes k and v by head_count
    ModelBuilder::ExpertKeys k;
    k.shared = k.leading_dense = k.weights_norm = k.weights_scale = k.groups = true;
    k.gating = 2;  // sigmoid; the graph aborts without the key
    b.expert_keys(k);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, s.heads, /*qk_norm=*/true);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        ffn(b, i);
    }
    output_tensors(b);
}

void build_glm4moe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_family(s, "glm4moe", {.nextn = true, .shared0 = true});
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.u32("rope.dimension_count", head_dim / 2);  // partial rotary (GLM-4.5: 0.5)
    ModelBuilder::ExpertKeys k;
    k.shared = k.leading_dense = k.weights_norm = k.weights_scale = k.groups = true;
    k.gating = 2;  // sigmoid
    b.expert_keys(k);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks + s.nextn; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv, /*qk_norm=*/true);
        b.bias(ModelBuilder::blk(i, "attn_q.bias"), head_dim * s.heads);
        b.bias(ModelBuilder::blk(i, "attn_k.bias"), head_dim * heads_kv);
        b.bias(ModelBuilder::blk(i, "attn_v.bias"), head_dim * heads_kv);
        b.norm(ModelBuilder::blk(i, "post_attention_norm.weight"), s.embd);
        // exp_probs_b is required; the nextn blocks (loaded, then skipped) are MoE blocks like the trunk's.
        const bool nextn = i >= s.blocks;
        ffn(b, i, /*probs_bias=*/true, nextn);
        if (nextn) nextn_tensors(b, i);
    }
    output_tensors(b);
}

}  // namespace gguf_reap::gen
