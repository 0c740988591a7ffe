// The Qwen MoE family: every block MoE, q/k norms, optional shared expert with its own gate.
// Loaders: src/models/qwen3moe.cpp.
#include <fmt/format.h>

#include "gen/archs.h"
#include "io/error.h"

namespace gguf_reap::gen {

namespace {

void refuse_common(const ModelSpec& s, const char* arch) {
    if (s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format("--dense-blocks {}: every block of {} is MoE", s.dense_blocks, arch));
    if (s.given.count("--shared") && s.shared > 0)
        throw UsageError(fmt::format("--shared {}: {} has no shared experts", s.shared, arch));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
    if (s.router_bias || s.exps_bias || s.probs_bias || s.fused_gate_up)
        throw UsageError(
            fmt::format("--router-bias, --exps-bias, --probs-bias, --fused-gate-up: {}'s loader "
                        "creates none of these tensors",
                        arch));
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

}  // namespace gguf_reap::gen
