// The DeepSeek-V3 family: MLA attention, leading dense blocks, shared experts, sigmoid routing with an
// optional selection bias, expert groups, MTP (nextn) blocks. Loaders: src/models/deepseek2.cpp.
#include <fmt/format.h>

#include "gen/archs.h"
#include "io/error.h"

namespace gguf_reap::gen {

namespace {

// MLA sizes as Kimi-K2 and DeepSeek-V3 GGUFs store them (split attn_k_b / attn_v_b), scaled to n_embd.
struct Mla {
    int64_t q_lora, kv_lora, rope, nope, v_head;
};

Mla mla_of(const ModelSpec& s) {
    const int64_t lora = std::max<int64_t>(32, s.embd / 2);
    return {lora, lora, 32, 32, 32};
}

void mla_keys(ModelBuilder& b, const Mla& m) {
    b.u32("attention.key_length", m.kv_lora + m.rope);  // the KV cache's K row: latent + rope
    b.u32("attention.value_length", m.kv_lora);
    b.u32("attention.key_length_mla", m.nope + m.rope);
    b.u32("attention.value_length_mla", m.v_head);
    b.u32("attention.q_lora_rank", m.q_lora);
    b.u32("attention.kv_lora_rank", m.kv_lora);
    b.u32("rope.dimension_count", m.rope);
}

void mla_tensors(ModelBuilder& b, int64_t i, const Mla& m) {
    const int64_t n = b.spec().embd, h = b.spec().heads;
    b.norm(ModelBuilder::blk(i, "attn_norm.weight"), n);
    b.tensor(ModelBuilder::blk(i, "attn_q_a.weight"), {n, m.q_lora, 1, 1}, TypeClass::kAttn);
    b.norm(ModelBuilder::blk(i, "attn_q_a_norm.weight"), m.q_lora);
    b.tensor(ModelBuilder::blk(i, "attn_q_b.weight"), {m.q_lora, h * (m.nope + m.rope), 1, 1},
             TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "attn_kv_a_mqa.weight"), {n, m.kv_lora + m.rope, 1, 1}, TypeClass::kAttn);
    b.norm(ModelBuilder::blk(i, "attn_kv_a_norm.weight"), m.kv_lora);
    b.tensor(ModelBuilder::blk(i, "attn_k_b.weight"), {m.nope, m.kv_lora, h, 1}, TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "attn_v_b.weight"), {m.kv_lora, m.v_head, h, 1}, TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "attn_output.weight"), {h * m.v_head, n, 1, 1}, TypeClass::kAttn);
}

}  // namespace

void build_deepseek2(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    if (s.experts > 0 && s.shared < 1)
        throw UsageError(
            "--shared 0: deepseek2's loader always creates the shared experts (use --shared 1 or more)");
    if (s.router_bias) throw UsageError("--router-bias: deepseek2's loader has no ffn_gate_inp.bias");
    if (s.exps_bias) throw UsageError("--exps-bias: deepseek2's loader has no expert biases (gpt-oss has)");
    const Mla m = mla_of(s);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = 1;  // MLA served as MQA
    b.generic_keys(g);
    mla_keys(b, m);
    if (s.experts > 0) {
        ModelBuilder::ExpertKeys k;
        k.shared = k.leading_dense = k.weights_norm = k.weights_scale = k.groups = true;
        k.gating = 2;  // sigmoid
        b.expert_keys(k);
    }
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    const int64_t total = s.blocks + s.nextn;
    for (int64_t i = 0; i < total; ++i) {
        mla_tensors(b, i, m);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (s.experts == 0 || i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
        } else {
            b.experts(i, {});
            b.shared_experts(i, s.expert_ff * s.shared);
        }
        if (i >= s.blocks) {  // the MTP head's own tensors (loaded with the block, skipped at run time)
            b.nextn_block(i);
            b.tensor(ModelBuilder::blk(i, "nextn.eh_proj.weight"), {2 * s.embd, s.embd, 1, 1},
                     TypeClass::kAttn);
            for (const char* w :
                 {"nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight"})
                b.norm(ModelBuilder::blk(i, w), s.embd);
        }
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

}  // namespace gguf_reap::gen
