// MLA (multi-head latent attention) as the DeepSeek-V2/V3 loaders create it, shared by the presets whose
// loaders read it: deepseek2 and mistral4 (src/models/deepseek2.cpp), deepseek32, glm-dsa.
#pragma once

#include <algorithm>
#include <cstdint>

#include "format/ggml_types.h"
#include "gen/builder.h"

namespace gguf_reap::gen {

// MLA sizes as Kimi-K2 and DeepSeek-V3 GGUFs store them (split attn_k_b / attn_v_b), scaled to n_embd.
struct Mla {
    int64_t q_lora, kv_lora, rope, nope, v_head;
};

inline Mla mla_of(const ModelSpec& s) {
    const int64_t lora = std::max<int64_t>(32, s.embd / 2);
    return {lora, lora, 32, 32, 32};
}

inline void mla_keys(ModelBuilder& b, const Mla& m) {
    b.u32("attention.key_length", m.kv_lora + m.rope);  // the KV cache's K row: latent + rope
    b.u32("attention.value_length", m.kv_lora);
    b.u32("attention.key_length_mla", m.nope + m.rope);
    b.u32("attention.value_length_mla", m.v_head);
    b.u32("attention.q_lora_rank", m.q_lora);
    b.u32("attention.kv_lora_rank", m.kv_lora);
    b.u32("rope.dimension_count", m.rope);
}

// Quantized tensors are filled with random blocks (fill.h), weights of up to ~2^8: through attn_q_b and
// the attn_k_b that the graph absorbs into the query, the latent queries then overflow F16 and every
// logit is NaN (llama-simple "generates" token 0, an empty piece). A zero attn_k_b keeps the scores
// finite (the rope half of each head still attends); float types get small values and need nothing.
inline FillKind mla_k_b_fill(const ModelSpec& s) {
    const auto t = ggml_type_from_name(s.type_attn);
    return t && is_float_type(*t) ? FillKind::kSmall : FillKind::kZero;
}

// `k_b`: how attn_k_b is filled (see mla_k_b_fill).
inline void mla_tensors(ModelBuilder& b, int64_t i, const Mla& m, FillKind k_b = FillKind::kSmall) {
    const int64_t n = b.spec().embd, h = b.spec().heads;
    b.norm(ModelBuilder::blk(i, "attn_norm.weight"), n);
    b.tensor(ModelBuilder::blk(i, "attn_q_a.weight"), {n, m.q_lora, 1, 1}, TypeClass::kAttn);
    b.norm(ModelBuilder::blk(i, "attn_q_a_norm.weight"), m.q_lora);
    b.tensor(ModelBuilder::blk(i, "attn_q_b.weight"), {m.q_lora, h * (m.nope + m.rope), 1, 1},
             TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "attn_kv_a_mqa.weight"), {n, m.kv_lora + m.rope, 1, 1}, TypeClass::kAttn);
    b.norm(ModelBuilder::blk(i, "attn_kv_a_norm.weight"), m.kv_lora);
    b.tensor(ModelBuilder::blk(i, "attn_k_b.weight"), {m.nope, m.kv_lora, h, 1}, TypeClass::kAttn, k_b);
    b.tensor(ModelBuilder::blk(i, "attn_v_b.weight"), {m.kv_lora, m.v_head, h, 1}, TypeClass::kAttn);
    b.tensor(ModelBuilder::blk(i, "attn_output.weight"), {h * m.v_head, n, 1, 1}, TypeClass::kAttn);
}

}  // namespace gguf_reap::gen
