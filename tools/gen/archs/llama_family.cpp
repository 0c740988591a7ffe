// The llama family: llama.cpp loaders that switch every block to Mixtral-style MoE when expert_count > 0
// and then take the expert width from <arch>.feed_forward_length (no dense FFN is left to share it):
// llama, llama-embed (llama's loader, an encoder graph), mistral3, minicpm, granite, granitemoe (both with
// an optional shared expert of its own width, expert_shared_feed_forward_length), granitehybrid (Mamba2
// and attention blocks, all MoE), refact (loads experts, its graph never runs them). And llama4: MoE
// blocks interleaved with dense ones (interleave_moe_layer_step), a shared expert as wide as the routed
// ones, expert_feed_forward_length. Loaders: src/models/{llama,llama-embed,mistral3,minicpm,granite,
// granite-moe,granite-hybrid,refact,llama4}.cpp.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "gen/archs.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

// What none of these loaders creates, and what the "every block MoE" ones cannot lay out.
void refuse_llama_common(const ModelSpec& s, const char* arch, bool leading_dense_ok) {
    if (!leading_dense_ok && s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format(
            "--dense-blocks {}: {}'s loader makes every block MoE when expert_count > 0 (no leading dense "
            "blocks)",
            s.dense_blocks, arch));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
}

// How a flavour treats --shared.
enum class Shared {
    kNone,     // no shared experts: refuse --shared > 0
    kIfGiven,  // expert_shared_feed_forward_length only when --shared is given (granite: dense Granite)
    kDefault,  // the spec's shared count, 1 by default (GraniteMoeShared, Granite-4.0-H)
};

// The Granite scalars (logit, residual, embedding, attention scale), or MiniCPM's defaults written out.
enum class Scalars { kNone, kMinicpm, kGranite };

struct Flavour {
    const char* arch;
    bool rope = true;  // rope.dimension_count / freq_base (refact: ALiBi, none)
    Scalars scalars = Scalars::kNone;
    Shared shared = Shared::kNone;
    bool embed = false;   // llama-embed: non-causal, mean pooling
    bool hybrid = false;  // granitehybrid: Mamba2 blocks where head_count_kv[i] == 0
};

// Granite-4.0-H's Mamba2 mixer at d_inner = 2 × n_embd (the only expansion the loader takes).
struct Ssm {
    int64_t conv = 4, inner = 0, state = 16, heads = 0, groups = 1;
    int64_t conv_channels() const { return inner + 2 * groups * state; }
    int64_t in_proj() const { return 2 * inner + 2 * groups * state + heads; }
};

Ssm ssm_of(const ModelSpec& s) {
    Ssm m;
    m.inner = 2 * s.embd;
    m.heads = std::max<int64_t>(1, m.inner / 16);  // SSM head dim 16 where it divides
    if (m.inner % m.heads != 0) m.heads = 1;
    return m;
}

void ssm_tensors(ModelBuilder& b, int64_t i, const Ssm& m) {
    const int64_t n = b.spec().embd;
    // Always F32: random quantised blocks (weights up to ~250) drive dt = softplus(x·W_in) to inf and
    // the scan to NaN; llama-simple then "generates" token 0 (an empty piece) every step.
    b.tensor(ModelBuilder::blk(i, "ssm_in.weight"), {n, m.in_proj(), 1, 1}, TypeClass::kF32);
    // Rows of d_conv (4) elements: never whole quant blocks.
    b.tensor(ModelBuilder::blk(i, "ssm_conv1d.weight"), {m.conv, m.conv_channels(), 1, 1}, TypeClass::kF32);
    b.bias(ModelBuilder::blk(i, "ssm_conv1d.bias"), m.conv_channels());
    b.bias(ModelBuilder::blk(i, "ssm_dt.bias"), m.heads);
    b.tensor(ModelBuilder::blk(i, "ssm_a"), {1, m.heads, 1, 1}, TypeClass::kF32);  // no ".weight"
    b.tensor(ModelBuilder::blk(i, "ssm_d"), {1, m.heads, 1, 1}, TypeClass::kF32, FillKind::kNearOne);
    b.tensor(ModelBuilder::blk(i, "ssm_norm.weight"), {m.inner / m.groups, m.groups, 1, 1}, TypeClass::kF32,
             FillKind::kNearOne);
    b.tensor(ModelBuilder::blk(i, "ssm_out.weight"), {m.inner, n, 1, 1}, TypeClass::kAttn, FillKind::kSmall,
             "2 × --embd");
}

void build_llama_like(ModelBuilder& b, const Flavour& f) {
    const ModelSpec& s = b.spec();
    refuse_llama_common(s, f.arch, /*leading_dense_ok=*/false);
    const bool moe = s.experts > 0;
    if (moe && s.given.count("--ff"))
        throw UsageError(fmt::format(
            "--ff {}: {} has no dense FFN once it has experts; the expert width is --expert-ff (written as "
            "{}.feed_forward_length)",
            s.ff, f.arch, f.arch));
    int64_t shared = 0;
    if (f.shared == Shared::kNone || !moe) {
        if (s.given.count("--shared") && s.shared > 0)
            throw UsageError(fmt::format("--shared {}: {} has no shared experts{}", s.shared, f.arch,
                                         moe ? "" : " without routed ones (--experts 0)"));
    } else if (f.shared == Shared::kDefault || s.given.count("--shared")) {
        shared = s.shared;
    }
    const int64_t shexp_ff = s.expert_ff * shared;

    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    const int64_t ff = moe ? s.expert_ff : s.ff;  // the expert width in MoE mode (LLAMA_LOAD_LOCALS n_ff)
    // granitehybrid: even blocks Mamba2 (head_count_kv 0), odd blocks attention, as Granite-4.0-H mixes them.
    const auto recurrent = [&](int64_t i) { return f.hybrid && i % 2 == 0; };
    const Ssm m = ssm_of(s);
    b.gpt2_tokenizer();
    if (!f.hybrid) {
        ModelBuilder::Generic g;
        g.ff = ff;
        g.heads_kv = heads_kv;
        g.rope = f.rope;
        b.generic_keys(g);
    } else {  // generic_keys' keys, with head_count_kv per block
        b.u32("context_length", 4096);
        b.u32("embedding_length", s.embd);
        b.u32("block_count", s.blocks);
        b.u32("feed_forward_length", ff);
        b.u32("attention.head_count", s.heads);
        std::vector<int64_t> kv;
        for (int64_t i = 0; i < s.blocks; ++i) kv.push_back(recurrent(i) ? 0 : heads_kv);
        b.u32_array("attention.head_count_kv", kv);
        b.f32("attention.layer_norm_rms_epsilon", 1e-6);
        b.f32("rope.freq_base", 10000.0);
        b.u32("vocab_size", s.vocab);
        b.boolean("rope.scaling.finetuned", false);  // Granite's RoPE switch: off (NoPE), as converted 4.0-H
        b.u32("ssm.conv_kernel", m.conv);
        b.u32("ssm.inner_size", m.inner);
        b.u32("ssm.state_size", m.state);
        b.u32("ssm.time_step_rank", m.heads);
        b.u32("ssm.group_count", m.groups);
    }
    if (f.rope) b.u32("rope.dimension_count", head_dim);  // llama: must equal key_length
    if (f.embed) {
        b.boolean("attention.causal", false);
        b.u32("pooling_type", 1);  // MEAN
    }
    switch (f.scalars) {
        case Scalars::kNone:
            break;
        case Scalars::kMinicpm:  // the loader's defaults, written out as the maker did
            b.f32("embedding_scale", 12.0);
            b.f32("residual_scale", 1.4 / std::sqrt(static_cast<double>(s.blocks)));
            b.f32("logit_scale", 256.0 / static_cast<double>(s.embd));
            break;
        case Scalars::kGranite:
            b.f32("logit_scale", 8.0);
            b.f32("residual_scale", 0.22);
            b.f32("embedding_scale", 12.0);
            b.f32("attention.scale", 1.0 / static_cast<double>(head_dim));
            break;
    }
    if (moe) {
        ModelBuilder::ExpertKeys k;
        k.width = false;  // read from feed_forward_length
        k.groups = true;  // build_moe_ffn's group-limited routing is generic
        b.expert_keys(k);
        if (shared > 0) b.u32("expert_shared_feed_forward_length", shexp_ff);
    }

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd, FillKind::kSmall, "--embd");
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        if (recurrent(i))
            ssm_tensors(b, i, m);
        else
            b.attention(i, head_dim, s.heads, heads_kv);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (!moe) {
            b.dense_ffn(i, s.ff);
            continue;
        }
        b.experts(i, {.allow_fused = false});
        if (shared > 0) b.shared_experts(i, shexp_ff);
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

}  // namespace

void build_llama(ModelBuilder& b) {
    build_llama_like(b, {.arch = "llama"});
}

void build_llama_embed(ModelBuilder& b) {
    build_llama_like(b, {.arch = "llama-embed", .embed = true});
}

void build_mistral3(ModelBuilder& b) {
    build_llama_like(b, {.arch = "mistral3"});
}

void build_minicpm(ModelBuilder& b) {
    build_llama_like(b, {.arch = "minicpm", .scalars = Scalars::kMinicpm});
}

void build_granite(ModelBuilder& b) {
    build_llama_like(b, {.arch = "granite", .scalars = Scalars::kGranite, .shared = Shared::kIfGiven});
}

void build_granitemoe(ModelBuilder& b) {
    build_llama_like(b, {.arch = "granitemoe", .scalars = Scalars::kGranite, .shared = Shared::kDefault});
}

void build_granitehybrid(ModelBuilder& b) {
    build_llama_like(
        b,
        {.arch = "granitehybrid", .scalars = Scalars::kGranite, .shared = Shared::kDefault, .hybrid = true});
}

void build_refact(ModelBuilder& b) {
    build_llama_like(b, {.arch = "refact", .rope = false});
}

void build_llama4(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    refuse_llama_common(s, "llama4", /*leading_dense_ok=*/true);
    if (s.experts == 0) throw UsageError("--experts 0: llama4's loader refuses a model with zero experts");
    // Interleaved, not leading: block i is MoE iff (i + 1) % step == 0. Step 2 (Maverick) by default;
    // --dense-blocks 0 asks for no dense block at all: step 1 (Scout).
    if (s.given.count("--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(fmt::format(
            "--dense-blocks {}: llama4 has no leading dense blocks; it interleaves dense and MoE blocks "
            "(interleave_moe_layer_step 2 by default, 1 with --dense-blocks 0)",
            s.dense_blocks));
    const int64_t step = s.given.count("--dense-blocks") ? 1 : 2;
    if (s.given.count("--shared") && s.shared != 1)
        throw UsageError(fmt::format(
            "--shared {}: llama4 has exactly one shared expert in every MoE block, as wide as the routed "
            "ones (expert_feed_forward_length)",
            s.shared));
    const int64_t head_dim = s.embd / s.heads, heads_kv = std::max<int64_t>(1, s.heads / 2);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;  // feed_forward_length: the dense blocks' width
    g.heads_kv = heads_kv;
    b.generic_keys(g);
    b.u32("rope.dimension_count", head_dim);
    ModelBuilder::ExpertKeys k;  // expert_feed_forward_length: the routed and the shared experts' width
    k.groups = true;
    b.expert_keys(k);
    b.u32("interleave_moe_layer_step", step);
    // No attention.sliding_window: chunked attention (8192) with the temperature scaling NoPE blocks need.

    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd, FillKind::kSmall, "--embd");
    for (int64_t i = 0; i < s.blocks; ++i) {
        b.norm(ModelBuilder::blk(i, "attn_norm.weight"), s.embd);
        b.attention(i, head_dim, s.heads, heads_kv);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if ((i + 1) % step != 0) {
            b.dense_ffn(i, s.ff);
            continue;
        }
        b.experts(i, {.allow_fused = false});
        b.shared_experts(i, s.expert_ff);
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

}  // namespace gguf_reap::gen
