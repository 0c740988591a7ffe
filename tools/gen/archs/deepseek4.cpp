// The DeepSeek-V4 family: hyper-connections (4 residual streams mixed per block), single-row MQA attention
// with a low-rank grouped output, compressed (ratio 4 with a lightning indexer, ratio 128) and raw
// sliding-window blocks, sqrt-softplus routing, shared experts in every block, and hash routing in the
// leading blocks (ffn_gate_tid2eid: a token-id → expert-id table instead of exp_probs_b). dflash is its
// DSpark draft: DeepSeek-V4 blocks without compression or hash routing, fed by a target's hidden states.
// Loaders: src/models/deepseek4.cpp, src/models/dflash.cpp.
#include <fmt/format.h>

#include "gen/archs.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

// Sizes as the verified tiny models use them (independent of n_embd), with every row that a quantised
// type could hold a whole number of 32-element blocks.
struct Dsv4 {
    int64_t head_dim = 32;  // key_length = value_length: one K(=V) row per token
    int64_t rope = 16;      // the trailing rope dims of each head
    int64_t q_lora = 32;
    int64_t o_groups = 2;                                // attention.output_group_count: divides head_count
    int64_t o_lora = 16;                                 // o_groups × o_lora = 32
    int64_t hc = 4;                                      // hyper_connection.count: the graph asserts 4
    int64_t idx_heads = 2, idx_key = 64, idx_top_k = 4;  // idx_key: a multiple of 64 (Hadamard rotation)
    int64_t swa = 32;
    int64_t hc_mix() const { return (2 + hc) * hc; }
};

Dsv4 dsv4_of(const ModelSpec& s) {
    Dsv4 d;
    if (s.heads % 2 != 0) {
        d.o_groups = 1;
        d.o_lora = 32;
    }
    return d;
}

void refuse_dsv4(const ModelSpec& s, const char* arch) {
    if (s.experts == 0)
        throw UsageError(fmt::format("--experts 0: {}'s loader requires routed experts", arch));
    if (s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format("--dense-blocks {}: every block of {} is MoE", s.dense_blocks, arch));
    if (s.shared < 1)
        throw UsageError(fmt::format(
            "--shared {}: {}'s loader always creates the shared experts, {} wide (use --shared 1 or more)",
            s.shared, arch, "expert_feed_forward_length × expert_shared_count"));
}

// The keys deepseek4 and dflash's DSV4 mode share.
void dsv4_keys(ModelBuilder& b, const Dsv4& d) {
    const ModelSpec& s = b.spec();
    const int64_t total = s.blocks + s.nextn;
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.ff = -1;       // feed_forward_length: unused
    g.heads_kv = 1;  // one K(=V) row per token
    b.generic_keys(g);
    b.u32("embedding_length_out", d.hc * s.embd);  // the converter writes it; the loader recomputes it
    b.u32("attention.key_length", d.head_dim);
    b.u32("attention.value_length", d.head_dim);
    b.u32("rope.dimension_count", d.rope);
    b.u32("attention.q_lora_rank", d.q_lora);
    b.u32("attention.sliding_window", d.swa);
    ModelBuilder::ExpertKeys k;
    k.shared = k.weights_norm = k.weights_scale = k.groups = true;
    k.gating = 4;  // sqrt-softplus: the only scoring both loaders take
    b.expert_keys(k);
    b.f32_array("swiglu_clamp_exp", std::vector<double>(static_cast<size_t>(total), 10.0));
    b.f32_array("swiglu_clamp_shexp", std::vector<double>(static_cast<size_t>(total), 10.0));
    b.u32("attention.output_group_count", d.o_groups);
    b.u32("attention.output_lora_rank", d.o_lora);
    b.u32("hyper_connection.count", d.hc);
    b.u32("hyper_connection.sinkhorn_iterations", 3);
    b.f32("hyper_connection.epsilon", 1e-6);
}

// output_hc_*: the head that collapses the 4 streams before output_norm.
void hc_head(ModelBuilder& b, const Dsv4& d) {
    const int64_t n = b.spec().embd;
    b.tensor("output_hc_fn.weight", {d.hc * n, d.hc, 1, 1}, TypeClass::kF32);
    b.tensor("output_hc_base.weight", {d.hc, 1, 1, 1}, TypeClass::kF32);
    b.tensor("output_hc_scale.weight", {1, 1, 1, 1}, TypeClass::kF32, FillKind::kNearOne);
}

// A block's attention and its two hyper-connection mixers.
void dsv4_attention(ModelBuilder& b, int64_t i, const Dsv4& d) {
    const int64_t n = b.spec().embd, h = b.spec().heads;
    const auto blk = [i](const char* rest) { return ModelBuilder::blk(i, rest); };
    b.norm(blk("attn_norm.weight"), n);
    b.tensor(blk("attn_sinks.weight"), {h, 1, 1, 1}, TypeClass::kF32);
    b.tensor(blk("attn_q_a.weight"), {n, d.q_lora, 1, 1}, TypeClass::kAttn);
    b.norm(blk("attn_q_a_norm.weight"), d.q_lora);
    b.tensor(blk("attn_q_b.weight"), {d.q_lora, h * d.head_dim, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("attn_kv.weight"), {n, d.head_dim, 1, 1}, TypeClass::kAttn);
    b.norm(blk("attn_kv_a_norm.weight"), d.head_dim);
    // Stored 2-D as the converter writes it; the loader views it as {.., o_lora, o_groups}.
    b.tensor(blk("attn_output_a.weight"), {h * d.head_dim / d.o_groups, d.o_lora * d.o_groups, 1, 1},
             TypeClass::kAttn);
    b.tensor(blk("attn_output_b.weight"), {d.o_groups * d.o_lora, n, 1, 1}, TypeClass::kAttn);
    for (const char* m : {"hc_attn", "hc_ffn"}) {
        b.tensor(blk(fmt::format("{}_fn.weight", m).c_str()), {d.hc * n, d.hc_mix(), 1, 1}, TypeClass::kF32);
        b.tensor(blk(fmt::format("{}_base.weight", m).c_str()), {d.hc_mix(), 1, 1, 1}, TypeClass::kF32);
        b.tensor(blk(fmt::format("{}_scale.weight", m).c_str()), {3, 1, 1, 1}, TypeClass::kF32,
                 FillKind::kNearOne);
    }
}

// The compressor of a ratio-4 (with the lightning indexer) or ratio-128 block.
void dsv4_compressor(ModelBuilder& b, int64_t i, int64_t ratio, const Dsv4& d) {
    const int64_t n = b.spec().embd, c = ratio == 4 ? 2 : 1;
    const auto blk = [i](const char* rest) { return ModelBuilder::blk(i, rest); };
    b.tensor(blk("attn_compressor_kv.weight"), {n, c * d.head_dim, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("attn_compressor_gate.weight"), {n, c * d.head_dim, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("attn_compressor_ape.weight"), {c * d.head_dim, ratio, 1, 1}, TypeClass::kF32);
    b.norm(blk("attn_compressor_norm.weight"), d.head_dim);
    if (ratio != 4) return;
    b.tensor(blk("indexer.proj.weight"), {n, d.idx_heads, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("indexer.attn_q_b.weight"), {d.q_lora, d.idx_heads * d.idx_key, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("indexer_compressor_kv.weight"), {n, 2 * d.idx_key, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("indexer_compressor_gate.weight"), {n, 2 * d.idx_key, 1, 1}, TypeClass::kAttn);
    b.tensor(blk("indexer_compressor_ape.weight"), {2 * d.idx_key, ratio, 1, 1}, TypeClass::kF32);
    b.norm(blk("indexer_compressor_norm.weight"), d.idx_key);
}

// A block's MoE: router, the selection bias (score-routed blocks) or the token → expert table
// (hash-routed blocks), ffn_norm, the routed experts and the shared experts.
void dsv4_moe(ModelBuilder& b, int64_t i, bool hash) {
    const ModelSpec& s = b.spec();
    ModelBuilder::Experts e;
    e.allow_fused = false;
    e.probs_bias = !hash;
    b.experts(i, e);
    if (hash) {
        // I32 {n_expert_used, n_vocab}: every token's row holds n_expert_used distinct expert ids.
        b.tensor(ModelBuilder::blk(i, "ffn_gate_tid2eid.weight"), {s.used, s.vocab, 1, 1}, TypeClass::kI32,
                 FillKind::kExpertIds);
        b.last().ids = {s.used, s.experts};
    }
    b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
    b.shared_experts(i, s.expert_ff * s.shared);
}

}  // namespace

// Defaults: 4 blocks (compress ratios 0, 4, 128, 4, repeating), the first two hash-routed; --probs-bias
// gives every block exp_probs_b instead (hash_layer_count 0). --nextn N adds MTP blocks (ratio 0).
void build_deepseek4(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_dsv4(s, "deepseek4");
    if (s.tied) throw UsageError("--tied: deepseek4's loader requires output.weight");
    if (s.scales && s.nextn > 0)
        throw UsageError(
            "--scales with --nextn: deepseek4's loader skips the MTP blocks' experts, so it never creates "
            "their ffn_*_exps.scale and refuses the file (wrong number of tensors)");
    const Dsv4 d = dsv4_of(s);
    const int64_t total = s.blocks + s.nextn;
    // Hash-routed blocks carry ffn_gate_tid2eid and must not carry exp_probs_b.
    const int64_t hash = s.probs_bias ? 0 : std::min<int64_t>(2, s.blocks);
    std::vector<int64_t> ratios;
    for (int64_t i = 0; i < total; ++i) {
        constexpr int64_t kPattern[] = {0, 4, 128, 4};
        ratios.push_back(i < s.blocks ? kPattern[i % 4] : 0);  // MTP blocks: uncompressed
    }
    dsv4_keys(b, d);
    b.u32("attention.indexer.head_count", d.idx_heads);
    b.u32("attention.indexer.key_length", d.idx_key);
    b.u32("attention.indexer.top_k", d.idx_top_k);
    b.i32_array("attention.compress_ratios", ratios);
    b.f32("attention.compress_rope_freq_base", 160000.0);
    b.u32("hash_layer_count", hash);

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
    hc_head(b, d);
    for (int64_t i = 0; i < total; ++i) {
        dsv4_attention(b, i, d);
        if (ratios[static_cast<size_t>(i)] != 0) dsv4_compressor(b, i, ratios[static_cast<size_t>(i)], d);
        dsv4_moe(b, i, i < hash);
        if (i >= s.blocks) {  // the MTP head's own tensors (shape-checked, then skipped by a plain load)
            b.nextn_head(i);
        }
    }
}

// The DSpark draft (hyper_connection.count > 0): --blocks stages, each an uncompressed, score-routed
// DeepSeek-V4 block. No token_embd (as the converter writes it) and no output (the loader never creates
// one): both come from the target's context, so llama.cpp loads the file but generates only as the
// draft of a deepseek4 target with the same --embd and --vocab (target_layers 1 and 3 of it).
void build_dflash(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_dsv4(s, "dflash");
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: dflash has no MTP blocks", s.nextn));
    if (s.tied) throw UsageError("--tied: dflash has no output.weight at all (the LM head is its target's)");
    const Dsv4 d = dsv4_of(s);
    const std::vector<int64_t> target_layers{1, 3};
    constexpr int64_t kMarkovRank = 16;
    dsv4_keys(b, d);
    b.u32("tokenizer.ggml.mask_token_id", s.vocab - 2);  // the drafting code's noise token
    b.i32_array("target_layers", target_layers);
    b.u32("block_size", 4);
    b.i32_array("attention.compress_ratios", std::vector<int64_t>(static_cast<size_t>(s.blocks), 0));
    b.u32("hash_layer_count", 0);  // the converter writes it; the loader never reads it

    b.tensor("fc.weight", {static_cast<int64_t>(target_layers.size()) * s.embd, s.embd, 1, 1},
             TypeClass::kAttn);
    b.norm("enc.output_norm.weight", s.embd);
    b.norm("output_norm.weight", s.embd);
    hc_head(b, d);
    // The DSpark Markov and confidence heads (small: F32).
    b.tensor("markov_w1.weight", {kMarkovRank, s.vocab, 1, 1}, TypeClass::kF32);
    b.tensor("markov_w2.weight", {kMarkovRank, s.vocab, 1, 1}, TypeClass::kF32);
    b.tensor("conf_proj.weight", {s.embd + kMarkovRank, 1, 1, 1}, TypeClass::kF32);
    for (int64_t i = 0; i < s.blocks; ++i) {
        dsv4_attention(b, i, d);
        dsv4_moe(b, i, /*hash=*/false);
    }
}

}  // namespace gguf_reap::gen
