// MoE architectures with plain q/k/v attention that fit no larger family. ernie4_5-moe: leading dense
// blocks, softmax routing, an optional selection bias and shared expert. exaone-moe: leading dense
// blocks, sliding-window attention, sigmoid routing with an optional selection bias, dense MTP
// blocks. hunyuan-moe: every block MoE, the routed experts' width in feed_forward_length. hy_v3:
// dense or MoE by tensor presence, sigmoid routing with a suffix-less selection bias, fused gate_up,
// MoE MTP blocks. Loaders: src/models/ernie4-5.cpp, exaone-moe.cpp, hunyuan-moe.cpp, hy-v3.cpp.
#include <algorithm>

#include <fmt/format.h>

#include "gen/archs.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

void require_experts(const ModelSpec& s, const char* arch) {
    if (s.experts == 0)
        throw UsageError(fmt::format("--experts 0: {}'s loader requires routed experts", arch));
}

void refuse_no_shared(const ModelSpec& s, const char* arch) {
    if (s.shared < 1)
        throw UsageError(fmt::format(
            "--shared 0: {}'s loader always creates the shared expert (use --shared 1 or more)", arch));
}

int64_t heads_kv_of(const ModelSpec& s) {
    return std::max<int64_t>(1, s.heads / 2);
}

}  // namespace

void build_ernie4_5_moe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    require_experts(s, "ernie4_5-moe");
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: ernie4_5-moe has no MTP blocks", s.nextn));
    const int64_t head_dim = s.embd / s.heads, heads_kv = heads_kv_of(s);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    ModelBuilder::ExpertKeys k;
    k.shared = k.leading_dense = k.groups = true;  // expert_shared_count: written by the converter, unread
    b.expert_keys(k);
    // > 0 makes the shared expert's tensors required; absent: no shared expert.
    if (s.shared > 0) b.u32("expert_shared_feed_forward_length", s.expert_ff * s.shared);
    // MoE blocks are those ≥ leading_dense_block_count (loader) with (i + 1) % step == 0 (graph): with
    // step 1 the two agree.
    b.u32("interleave_moe_layer_step", 1);
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
        } else {
            ModelBuilder::Experts e;
            e.allow_fused = false;
            b.experts(i, e);
            if (s.shared > 0) b.shared_experts(i, s.expert_ff * s.shared);
        }
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void build_exaone_moe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    require_experts(s, "exaone-moe");
    refuse_no_shared(s, "exaone-moe");
    if (s.tied) throw UsageError("--tied: exaone-moe's loader requires output.weight");
    if (s.dense_blocks >= s.blocks)
        throw UsageError(
            fmt::format("--dense-blocks {} leaves no MoE block (--blocks {}; exaone-moe's MTP "
                        "blocks are dense)",
                        s.dense_blocks, s.blocks));
    const int64_t head_dim = s.embd / s.heads, heads_kv = heads_kv_of(s);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("attention.key_length", head_dim);
    b.u32("attention.value_length", head_dim);
    b.u32("rope.dimension_count", head_dim);  // the graph asserts n_rot == head_dim
    b.u32("attention.sliding_window", 32);    // required
    // A scalar period (the loader's default, 4: three sliding-window blocks, then a full one). The
    // converter writes a bool array, which this loader ignores.
    b.u32("attention.sliding_window_pattern", 4);
    ModelBuilder::ExpertKeys k;
    k.shared = k.leading_dense = k.weights_norm = k.weights_scale = k.groups = true;
    k.gating = 2;  // sigmoid (the loader requires the key)
    b.expert_keys(k);
    b.u32("expert_shared_feed_forward_length", s.expert_ff * s.shared);  // absent: n_ff_exp
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    const int64_t total = s.blocks + s.nextn;
    for (int64_t i = 0; i < total; ++i) {
        b.attention(i, head_dim, s.heads, heads_kv, /*qk_norm=*/true);
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (i < s.dense_blocks || i >= s.blocks) {  // leading dense blocks and every MTP block
            b.dense_ffn(i, s.ff);
        } else {
            ModelBuilder::Experts e;
            e.allow_fused = false;
            b.experts(i, e);
            b.shared_experts(i, s.expert_ff * s.shared);
        }
        if (i >= s.blocks) {  // loaded with TENSOR_SKIP: shape-checked, then dropped
            b.nextn_head(i);
        }
    }
    b.norm("output_norm.weight", s.embd);
    b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void build_hunyuan_moe(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    require_experts(s, "hunyuan-moe");
    refuse_no_shared(s, "hunyuan-moe");
    if (s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format("--dense-blocks {}: every block of hunyuan-moe is MoE", s.dense_blocks));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: hunyuan-moe has no MTP blocks", s.nextn));
    if (s.given.count("--ff"))
        throw UsageError(
            "--ff: hunyuan-moe has no dense FFN; its feed_forward_length is the routed experts' width, which "
            "--expert-ff sets");
    const int64_t head_dim = s.embd / s.heads, heads_kv = heads_kv_of(s);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    g.ff = s.expert_ff;  // the loader sizes the routed experts by feed_forward_length
    b.generic_keys(g);
    ModelBuilder::ExpertKeys k;
    k.shared = k.groups = true;  // expert_shared_count: written by the converter, unread
    b.expert_keys(k);            // expert_feed_forward_length: required, unused; kept equal
    b.u32("expert_shared_feed_forward_length", s.expert_ff * s.shared);  // absent: feed_forward_length
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv, /*qk_norm=*/true);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        ModelBuilder::Experts e;
        e.allow_fused = false;
        b.experts(i, e);
        b.shared_experts(i, s.expert_ff * s.shared);
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

void build_hy_v3(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    require_experts(s, "hy_v3");
    refuse_no_shared(s, "hy_v3");
    // The selection bias is always written, by hand below: hy_v3 names it "blk.N.exp_probs_b" with no
    // suffix, which ModelBuilder::experts cannot name (it would write "blk.N.exp_probs_b.bias", a
    // tensor this loader never creates).
    if (s.probs_bias)
        throw UsageError(
            "--probs-bias (given, or the preset's default): hy_v3 always has its selection bias, named "
            "blk.N.exp_probs_b (no suffix); the option's blk.N.exp_probs_b.bias is not a tensor hy_v3's "
            "loader creates");
    if (s.scales && s.fused_gate_up)
        throw UsageError(
            "--scales with --fused-gate-up: llama.cpp creates no per-expert scale for a fused "
            "ffn_gate_up_exps");
    const int64_t head_dim = s.embd / s.heads, heads_kv = heads_kv_of(s);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = heads_kv;
    b.generic_keys(g);  // feed_forward_length: the dense blocks' width
    ModelBuilder::ExpertKeys k;
    k.weights_norm = k.weights_scale = k.groups = true;
    k.gating = 2;  // sigmoid (also the loader's default)
    b.expert_keys(k);
    b.u32("expert_shared_feed_forward_length", s.expert_ff * s.shared);  // absent: n_ff_exp
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    const std::string probs_bias(expert_kind(ExpertRole::kProbsBias).base);
    const int64_t total = s.blocks + s.nextn;
    for (int64_t i = 0; i < total; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv, /*qk_norm=*/true);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        // No leading_dense key: a block is MoE when it has ffn_gate_inp (the MTP blocks are MoE).
        if (i < s.dense_blocks && i < s.blocks) {
            b.dense_ffn(i, s.ff);
        } else {
            b.experts(i, {});  // separate gate and up, or ffn_gate_up_exps with --fused-gate-up
            b.tensor(ModelBuilder::blk(i, probs_bias), {s.experts, 1, 1, 1}, TypeClass::kF32,
                     FillKind::kZero);
            b.shared_experts(i, s.expert_ff * s.shared);
        }
        if (i >= s.blocks) {  // its attention is skipped at load; its FFN is loaded
            b.nextn_head(i);
        }
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

}  // namespace gguf_reap::gen
