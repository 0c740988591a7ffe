// The BERT family of encoders: post-norm blocks (attention → attn_output_norm → FFN → layer_output_norm),
// a WordPiece vocabulary, token types, mean pooling, no KV cache (llama-embedding runs them). Loaders:
// src/models/{bert,jina-bert-v3,nomic-bert,nomic-bert-moe}.cpp, one graph (llama_model_bert::graph).
//
// Only nomic-bert and nomic-bert-moe can hold experts: their loaders read <arch>.moe_every_n_layers and
// make every block i with i % N == 1 MoE (N = 2 here: blocks 1, 3, …), with ungated GELU experts
// (ffn_up_exps, ffn_down_exps) of feed_forward_length, the one FFN width of the model. bert and
// jina-bert-v3 never read that key, so their expert branch is dead code and an expert layout fails to
// load (`check_tensor_dims: tensor 'blk.1.ffn_up.weight' not found`): their presets are dense.
#include <fmt/format.h>

#include "gen/archs.h"
#include "gen/archs/refuse.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

namespace {

constexpr int64_t kEncoderContext = 512;  // n_ctx_train: bert's position_embd has this many rows
constexpr int64_t kMoeEveryNLayers = 2;
constexpr int64_t kTokenTypes = 2;

// The smallest WordPiece vocabulary llama.cpp's WPM tokenizer takes, in the "phantom space" form
// convert_hf_to_gguf writes: a word-initial piece "foo" as "▁foo", a continuation "##oo" as "oo",
// the CONTROL specials verbatim. [PAD] [UNK] [CLS] [SEP] and the mask token, then "▁" + every letter,
// digit and common punctuation mark, every letter and digit as a continuation, continuation bigrams,
// and "[unusedN]" up to --vocab. bos/sep/unk/pad/mask ids are given (the WPM defaults 100-103 would be
// out of range; WPM tokenising asserts a bos).
void wpm_tokenizer(ModelBuilder& b, const char* mask) {
    const int64_t n = b.spec().vocab;
    const std::string lower = "abcdefghijklmnopqrstuvwxyz", upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                      digits = "0123456789", punct = ".,!?;:'\"-()";
    const int64_t minimum =
        5 + static_cast<int64_t>(2 * (lower.size() + upper.size() + digits.size()) + punct.size());
    if (n < minimum)
        throw UsageError(fmt::format(
            "--vocab {}: the WordPiece vocabulary needs at least {} (5 specials, every letter, digit and "
            "punctuation mark as a word start, every letter and digit as a continuation)",
            n, minimum));
    std::vector<std::string> tokens{"[PAD]", "[UNK]", "[CLS]", "[SEP]", mask};
    std::vector<int64_t> types(tokens.size(), 3);  // CONTROL
    const auto add = [&](const std::string& t) {
        if (static_cast<int64_t>(tokens.size()) >= n) return;
        tokens.push_back(t);
        types.push_back(1);
    };
    const std::string phantom = "\xE2\x96\x81";  // U+2581
    for (char c : lower + upper + digits + punct) add(phantom + c);
    for (char c : lower + upper + digits) add(std::string(1, c));
    const std::string freq = "etaoinshrdlucmfwypvbgkjqxz";
    for (char x : freq)
        for (char y : freq) add(std::string{x, y});
    while (static_cast<int64_t>(tokens.size()) < n) add(fmt::format("[unused{}]", tokens.size()));
    b.raw(Kv::make_string("tokenizer.ggml.model", "bert"));
    b.raw(Kv::make_string_array("tokenizer.ggml.tokens", tokens));
    b.i32_array("tokenizer.ggml.token_type", types);
    b.u32("tokenizer.ggml.token_type_count", kTokenTypes);  // the loaders throw when it is 0
    b.u32("tokenizer.ggml.bos_token_id", 2);                // [CLS]
    b.u32("tokenizer.ggml.seperator_token_id", 3);          // [SEP] (llama.cpp's spelling)
    b.u32("tokenizer.ggml.unknown_token_id", 1);
    b.u32("tokenizer.ggml.padding_token_id", 0);
    b.u32("tokenizer.ggml.mask_token_id", 4);
}

struct Encoder {
    bool position = false;     // position_embd (bert only); the others rope Q and K
    bool fused_qkv = false;    // attn_qkv instead of attn_q/k/v
    bool qkv_bias = true;      // biases on the attention inputs
    bool out_bias = true;      // attn_output.bias
    bool gated_dense = false;  // dense blocks SwiGLU (nomic-bert) rather than GELU
    bool dense_bias = true;    // ffn_up.bias / ffn_down.bias
    bool moe = false;          // the loader reads moe_every_n_layers
    const char* mask = "[MASK]";
};

// The options an encoder with experts cannot honour.
void refuse_moe_encoder(const ModelSpec& s, const char* arch) {
    if (s.given.count("--dense-blocks"))
        throw UsageError(fmt::format(
            "--dense-blocks {}: {}'s MoE blocks are every second one ({}.moe_every_n_layers {}: blocks 1, 3, "
            "…), not after leading dense blocks",
            s.dense_blocks, arch, arch, kMoeEveryNLayers));
    if (s.given.count("--shared") && s.shared > 0)
        throw UsageError(fmt::format("--shared {}: {} has no shared experts", s.shared, arch));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
    if (s.given.count("--groups") && s.groups > 1)
        throw UsageError(fmt::format("--groups {}: {}'s router has no expert groups", s.groups, arch));
    if (s.experts > 0 && s.blocks < 2)
        throw UsageError(fmt::format("--blocks {}: {}'s first MoE block is block 1 (i % {} == 1)", s.blocks,
                                     arch, kMoeEveryNLayers));
    if (s.experts > 0 && s.given.count("--ff") && s.ff != s.expert_ff)
        throw UsageError(fmt::format(
            "--ff {}: {}'s loader sizes the dense blocks and the experts with one feed_forward_length; set "
            "it with --expert-ff (now {})",
            s.ff, arch, s.expert_ff));
}

// The options of an architecture whose loader never creates expert tensors (bert, jina-bert-v3, lfm2).

void build_encoder(ModelBuilder& b, const Encoder& e) {
    const ModelSpec& s = b.spec();
    const char* arch = s.arch.c_str();
    if (s.given.count("--tied"))
        throw UsageError(fmt::format("--tied: {} is an encoder, it has no output.weight", arch));
    const bool moe = e.moe && s.experts > 0;
    // One FFN width: --expert-ff when there are experts (refuse_moe_encoder refuses a different --ff).
    const int64_t ff = moe ? s.expert_ff : s.ff;
    const int64_t n = s.embd;
    wpm_tokenizer(b, e.mask);
    b.u32("context_length", kEncoderContext);
    b.u32("embedding_length", n);
    b.u32("block_count", s.blocks);
    b.u32("feed_forward_length", ff);
    b.u32("attention.head_count", s.heads);
    b.f32("attention.layer_norm_epsilon", 1e-12);
    b.boolean("attention.causal", false);
    b.u32("pooling_type", 1);  // MEAN
    if (!e.position) b.f32("rope.freq_base", 1000.0);
    if (moe) {
        b.u32("moe_every_n_layers", kMoeEveryNLayers);
        b.u32("expert_count", s.experts);
        b.u32("expert_used_count", s.used);
    }
    b.tensor("token_embd.weight", {n, s.vocab, 1, 1}, TypeClass::kEmbd);
    // Added as a row-0 view to every embedding: kept F32.
    b.tensor("token_types.weight", {n, kTokenTypes, 1, 1}, TypeClass::kF32);
    if (e.position) b.tensor("position_embd.weight", {n, kEncoderContext, 1, 1}, TypeClass::kF32);
    b.norm("token_embd_norm.weight", n);
    b.bias("token_embd_norm.bias", n);
    for (int64_t i = 0; i < s.blocks; ++i) {
        if (e.fused_qkv) {
            b.tensor(ModelBuilder::blk(i, "attn_qkv.weight"), {n, 3 * n, 1, 1}, TypeClass::kAttn);
            if (e.qkv_bias) b.bias(ModelBuilder::blk(i, "attn_qkv.bias"), 3 * n);
        } else {
            for (const char* x : {"attn_q", "attn_k", "attn_v"}) {
                b.tensor(ModelBuilder::blk(i, fmt::format("{}.weight", x)), {n, n, 1, 1}, TypeClass::kAttn);
                if (e.qkv_bias) b.bias(ModelBuilder::blk(i, fmt::format("{}.bias", x)), n);
            }
        }
        b.tensor(ModelBuilder::blk(i, "attn_output.weight"), {n, n, 1, 1}, TypeClass::kAttn);
        if (e.out_bias) b.bias(ModelBuilder::blk(i, "attn_output.bias"), n);
        b.norm(ModelBuilder::blk(i, "attn_output_norm.weight"), n);
        b.bias(ModelBuilder::blk(i, "attn_output_norm.bias"), n);
        if (moe && i % kMoeEveryNLayers == 1) {
            ModelBuilder::Experts x;
            x.gate = false;  // GELU(up) → down
            b.experts(i, x);
        } else {
            b.dense_ffn(i, ff, e.gated_dense);
            if (e.dense_bias) {
                b.bias(ModelBuilder::blk(i, "ffn_up.bias"), ff);
                b.bias(ModelBuilder::blk(i, "ffn_down.bias"), n);
            }
        }
        b.norm(ModelBuilder::blk(i, "layer_output_norm.weight"), n);
        b.bias(ModelBuilder::blk(i, "layer_output_norm.bias"), n);
    }
}

}  // namespace

void build_bert(ModelBuilder& b) {
    refuse_expert_options(b.spec(), "bert", "its loader never reads bert.moe_every_n_layers");
    Encoder e;
    e.position = true;
    build_encoder(b, e);
}

void build_jina_bert_v3(ModelBuilder& b) {
    refuse_expert_options(b.spec(), "jina-bert-v3", "its loader never reads jina-bert-v3.moe_every_n_layers");
    Encoder e;
    e.mask = "<mask>";  // its real vocabulary is XLM-R's; llama.cpp warns without a "<mask>" token
    build_encoder(b, e);
}

// nomic-embed-text v1/v1.5 are dense; the loader takes experts all the same (as nomic-bert-moe does).
void build_nomic_bert(ModelBuilder& b) {
    refuse_moe_encoder(b.spec(), "nomic-bert");
    Encoder e;
    e.fused_qkv = true;
    e.qkv_bias = false;
    e.out_bias = false;
    e.gated_dense = true;  // required: the loader creates ffn_gate for nomic-bert
    e.dense_bias = false;  // loaded when present, but the graph ignores them
    e.moe = true;
    build_encoder(b, e);
}

void build_nomic_bert_moe(ModelBuilder& b) {
    refuse_moe_encoder(b.spec(), "nomic-bert-moe");
    Encoder e;
    e.fused_qkv = true;  // with bias, as nomic-embed-text-v2-moe
    e.moe = true;
    e.mask = "<mask>";
    build_encoder(b, e);
}

}  // namespace gguf_reap::gen
