// MoE architectures whose every block is attention + routed experts, nothing else: no shared expert,
// no dense blocks, no MTP, softmax routing. olmoe and phimoe take the expert width from
// feed_forward_length; rnd1 and llada-moe are masked-diffusion models (non-causal, no KV cache), whose
// vocabulary carries a mask token for llama-diffusion-cli (llama-simple runs them too, each decode a
// memory-less encode of its batch, so they stay "generate" presets). Loaders: src/models/{olmoe,phimoe,
// mellum,rnd1,llada-moe}.cpp (phimoe's graph: src/models/phi3.cpp).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gen/archs.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

// Refuses the options none of these loaders has tensors or keys for; `tied`: output.weight is optional.
void refuse_unsupported(const ModelSpec& s, const char* arch, bool tied) {
    if (s.experts == 0)
        throw UsageError(fmt::format("--experts 0: {}'s loader requires routed experts", arch));
    if (s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format("--dense-blocks {}: every block of {} is MoE", s.dense_blocks, arch));
    if (s.given.count("--shared") && s.shared > 0)
        throw UsageError(fmt::format("--shared {}: {} has no shared experts", s.shared, arch));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
    if (s.tied && !tied) throw UsageError(fmt::format("--tied: {}'s loader requires output.weight", arch));
}

// olmoe and phimoe read no expert_feed_forward_length: feed_forward_length is the expert width.
void refuse_ff(const ModelSpec& s, const char* arch) {
    if (s.given.count("--ff"))
        throw UsageError(fmt::format(
            "--ff {}: {}'s feed_forward_length is the expert width (set it with --expert-ff)", s.ff, arch));
}

void token_embd(ModelBuilder& b) {
    b.tensor("token_embd.weight", {b.spec().embd, b.spec().vocab, 1, 1}, TypeClass::kEmbd);
}

void output_tensors(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

ModelBuilder::ExpertKeys expert_keys(bool width) {
    ModelBuilder::ExpertKeys k;
    k.width = width;
    k.groups = true;
    return k;
}

// ModelBuilder::gpt2_tokenizer's vocabulary one token shorter, then "<|mask|>" (CONTROL) as the last
// token and tokenizer.ggml.mask_token_id, which llama-diffusion-cli requires; bos = eos =
// <|endoftext|>, and add_bos_token false, as the RND1 and LLaDA-MoE converters write.
void diffusion_tokenizer(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    if (s.vocab < 261)
        throw UsageError(fmt::format(
            "--vocab {}: a GPT-2 byte-level vocabulary with a mask token needs at least 261", s.vocab));
    ModelSpec shorter = s;
    shorter.vocab = s.vocab - 1;
    ModelBuilder t(shorter);
    t.gpt2_tokenizer();
    for (const Kv& kv : t.finish().kvs) {
        if (!kv.key.starts_with("tokenizer.")) continue;  // general.* of the scratch builder
        if (kv.key == "tokenizer.ggml.tokens") {
            std::vector<std::string> tokens = kv.as_string_array().value();
            tokens.push_back("<|mask|>");
            b.raw(Kv::make_string_array(kv.key, tokens));
        } else if (kv.key == "tokenizer.ggml.token_type") {
            std::vector<int64_t> types;
            for (uint64_t i = 0; i < kv.count; ++i) {
                int32_t v = 0;
                std::memcpy(&v, kv.raw.data() + 12 + 4 * i, 4);  // after the element type and count
                types.push_back(v);
            }
            types.push_back(3);  // CONTROL
            b.i32_array(kv.key, types);
        } else {
            b.raw(kv);
        }
    }
    b.u32("tokenizer.ggml.mask_token_id", s.vocab - 1);
    b.boolean("tokenizer.ggml.add_bos_token", false);
}

}  // namespace

// OLMoE: full-width q/k norms ({n_embd}, so as many kv heads as heads), the expert width in
// feed_forward_length, output.weight required.
void build_olmoe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_unsupported(s, "olmoe", /*tied=*/false);
    refuse_ff(s, "olmoe");
    const int64_t head_dim = s.embd / s.heads;
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.ff = s.expert_ff;
    b.generic_keys(g);
    b.expert_keys(expert_keys(/*width=*/false));
    token_embd(b);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, s.heads);
        b.norm(ModelBuilder::blk(i, "attn_q_norm.weight"), s.embd);
        b.norm(ModelBuilder::blk(i, "attn_k_norm.weight"), s.embd);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.experts(i, {});
    }
    output_tensors(b);
}

// PhiMoE (phi3's graph): RMS norms with biases, q/k/v and attn_output biases, output.bias, the expert
// width in feed_forward_length, output.weight required.
void build_phimoe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_unsupported(s, "phimoe", /*tied=*/false);
    refuse_ff(s, "phimoe");
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.ff = s.expert_ff;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("rope.dimension_count", head_dim);
    b.expert_keys(expert_keys(/*width=*/false));
    token_embd(b);
    for (int64_t i = 0; i < s.blocks; ++i) {
        const auto p = [i](const char* rest) { return ModelBuilder::blk(i, rest); };
        b.norm(p("attn_norm.weight"), s.embd);
        b.bias(p("attn_norm.bias"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv);
        b.bias(p("attn_q.bias"), s.embd);
        b.bias(p("attn_k.bias"), head_dim * heads_kv);
        b.bias(p("attn_v.bias"), head_dim * heads_kv);
        b.bias(p("attn_output.bias"), s.embd);
        b.norm(p("ffn_norm.weight"), s.embd);
        b.bias(p("ffn_norm.bias"), s.embd);
        b.experts(i, {});
    }
    output_tensors(b);
    b.bias("output_norm.bias", s.embd);
    b.bias("output.bias", s.vocab);
}

// Mellum: qwen3moe-like blocks (q/k norms per head), expert_feed_forward_length required, output.weight
// required.
void build_mellum(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_unsupported(s, "mellum", /*tied=*/false);
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("rope.dimension_count", head_dim);
    b.expert_keys(expert_keys(/*width=*/true));
    token_embd(b);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv, /*qk_norm=*/true);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.experts(i, {});
    }
    output_tensors(b);
}

// RND1: a Qwen3-MoE turned masked-diffusion model (non-causal); output.weight optional.
void build_rnd1(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_unsupported(s, "rnd1", /*tied=*/true);
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    diffusion_tokenizer(b);
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.boolean("attention.causal", false);  // the converter writes it; the loader forces it anyway
    b.expert_keys(expert_keys(/*width=*/true));
    token_embd(b);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv, /*qk_norm=*/true);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.experts(i, {});
    }
    output_tensors(b);
}

// LLaDA-MoE: masked diffusion (non-causal), q/k norms per head, as many kv heads as heads (as the real
// model), output.weight required, diffusion.shift_logits false (as the converter writes).
void build_llada_moe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_unsupported(s, "llada-moe", /*tied=*/false);
    const int64_t head_dim = s.embd / s.heads;
    diffusion_tokenizer(b);
    ModelBuilder::Generic g;
    b.generic_keys(g);
    b.boolean("attention.causal", false);
    b.expert_keys(expert_keys(/*width=*/true));
    b.raw(Kv::make_bool("diffusion.shift_logits", false));  // read by llama-diffusion-cli
    token_embd(b);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, s.heads, /*qk_norm=*/true);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        b.experts(i, {});
    }
    output_tensors(b);
}

}  // namespace gguf_reap::gen
