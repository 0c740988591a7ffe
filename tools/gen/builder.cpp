#include "gen/builder.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gguf_reap/error.h"
#include "io/checked.h"

namespace gguf_reap::gen {

namespace {

// ggml_n_dims: trailing 1-dims are not written (how ggml's writer stores shapes).
uint32_t n_dims_of(const std::array<int64_t, 4>& ne) {
    for (int d = 3; d > 0; --d)
        if (ne[static_cast<size_t>(d)] > 1) return static_cast<uint32_t>(d + 1);
    return 1;
}

const char* option_of(TypeClass c) {
    switch (c) {
        case TypeClass::kEmbd:
            return "--type-embd";
        case TypeClass::kOutput:
            return "--type-output";
        case TypeClass::kAttn:
            return "--type-attn";
        case TypeClass::kDense:
            return "--type-dense";
        case TypeClass::kExps:
            return "--type-exps";
        case TypeClass::kDown:
            return "--type-down";
        case TypeClass::kShexp:
            return "--type-shexp";
        case TypeClass::kRouter:
            return "--type-router";
        case TypeClass::kF32:
        case TypeClass::kI32:
            return "(fixed)";
    }
    return "?";
}

// bytes_to_unicode of GPT-2's tokenizer: printable bytes map to themselves, the others to U+0100...
std::vector<std::string> byte_tokens() {
    std::vector<int> printable;
    for (int b = '!'; b <= '~'; ++b) printable.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b) printable.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b) printable.push_back(b);
    std::vector<std::string> out(256);
    int extra = 0;
    const auto utf8 = [](int cp) {
        std::string s;
        if (cp < 0x80) {
            s += static_cast<char>(cp);
        } else {
            s += static_cast<char>(0xC0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3F));
        }
        return s;
    };
    for (int b = 0; b < 256; ++b) {
        const bool keep = std::find(printable.begin(), printable.end(), b) != printable.end();
        out[static_cast<size_t>(b)] = utf8(keep ? b : 256 + extra++);
    }
    return out;
}

}  // namespace

ModelBuilder::ModelBuilder(const ModelSpec& spec) : spec_(spec) {
    plan_.spec = spec;
    raw(Kv::make_string("general.architecture", spec.arch));
    raw(Kv::make_string("general.name",
                        spec.name.empty() ? "gguf-reap synthetic " + spec.preset : spec.name));
    if (spec.alignment) raw(Kv::make_u32("general.alignment", *spec.alignment));
}

void ModelBuilder::raw(Kv kv) {
    plan_.kvs.push_back(std::move(kv));
}

namespace {
std::string full_key(const std::string& arch, const std::string& suffix) {
    if (suffix.starts_with("general.") || suffix.starts_with("tokenizer.")) return suffix;
    return arch + "." + suffix;
}
Kv array_kv(std::string key, GgufType et, size_t elem, size_t n,
            const std::function<void(uint8_t*, size_t)>& put) {
    Kv kv;
    kv.key = std::move(key);
    kv.type = GgufType::kArray;
    kv.elem_type = et;
    kv.count = n;
    kv.raw.resize(12 + elem * n);
    const auto t = static_cast<int32_t>(et);
    const uint64_t count = n;
    std::memcpy(kv.raw.data(), &t, 4);
    std::memcpy(kv.raw.data() + 4, &count, 8);
    for (size_t i = 0; i < n; ++i) put(kv.raw.data() + 12 + elem * i, i);
    return kv;
}
}  // namespace

void ModelBuilder::u32(const std::string& s, int64_t v) {
    raw(Kv::make_u32(full_key(arch(), s), static_cast<uint32_t>(v)));
}
void ModelBuilder::i32(const std::string& s, int64_t v) {
    raw(Kv::make_i32(full_key(arch(), s), static_cast<int32_t>(v)));
}
void ModelBuilder::f32(const std::string& s, double v) {
    raw(Kv::make_f32(full_key(arch(), s), static_cast<float>(v)));
}
void ModelBuilder::boolean(const std::string& s, bool v) {
    raw(Kv::make_bool(full_key(arch(), s), v));
}
void ModelBuilder::str(const std::string& s, const std::string& v) {
    raw(Kv::make_string(full_key(arch(), s), v));
}
void ModelBuilder::u32_array(const std::string& s, const std::vector<int64_t>& v) {
    raw(array_kv(full_key(arch(), s), GgufType::kUint32, 4, v.size(), [&](uint8_t* p, size_t i) {
        const auto x = static_cast<uint32_t>(v[i]);
        std::memcpy(p, &x, 4);
    }));
}
void ModelBuilder::i32_array(const std::string& s, const std::vector<int64_t>& v) {
    raw(array_kv(full_key(arch(), s), GgufType::kInt32, 4, v.size(), [&](uint8_t* p, size_t i) {
        const auto x = static_cast<int32_t>(v[i]);
        std::memcpy(p, &x, 4);
    }));
}
void ModelBuilder::f32_array(const std::string& s, const std::vector<double>& v) {
    raw(array_kv(full_key(arch(), s), GgufType::kFloat32, 4, v.size(), [&](uint8_t* p, size_t i) {
        const auto x = static_cast<float>(v[i]);
        std::memcpy(p, &x, 4);
    }));
}
void ModelBuilder::bool_array(const std::string& s, const std::vector<bool>& v) {
    raw(array_kv(full_key(arch(), s), GgufType::kBool, 1, v.size(),
                 [&](uint8_t* p, size_t i) { *p = v[i] ? 1 : 0; }));
}

void ModelBuilder::generic_keys(const Generic& g) {
    const ModelSpec& s = spec_;
    u32("context_length", 4096);
    u32("embedding_length", s.embd);
    u32("block_count", s.blocks + s.nextn);
    if (g.ff >= 0) u32("feed_forward_length", g.ff ? g.ff : s.ff);
    u32("attention.head_count", s.heads);
    u32("attention.head_count_kv", g.heads_kv >= 0 ? g.heads_kv : s.heads);
    f32(g.layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon", 1e-6);
    if (g.rope) f32("rope.freq_base", 10000.0);
    if (g.vocab_size) u32("vocab_size", s.vocab);
}

void ModelBuilder::expert_keys(const ExpertKeys& k) {
    const ModelSpec& s = spec_;
    u32("expert_count", s.experts);
    u32("expert_used_count", s.used);
    if (k.shared) u32("expert_shared_count", s.shared);
    if (k.width) u32("expert_feed_forward_length", s.expert_ff);
    if (k.leading_dense) u32("leading_dense_block_count", s.dense_blocks);
    if (k.gating >= 0) u32("expert_gating_func", k.gating);
    if (k.weights_norm) boolean("expert_weights_norm", true);
    if (k.weights_scale) f32("expert_weights_scale", s.weights_scale);
    if (k.groups && s.groups > 1) {
        u32("expert_group_count", s.groups);
        u32("expert_group_used_count", s.group_used);
    }
    if (s.nextn > 0) u32("nextn_predict_layers", s.nextn);
}

void ModelBuilder::gpt2_tokenizer() {
    const int64_t n = spec_.vocab;
    if (n < 260)
        throw UsageError(fmt::format("--vocab {}: a GPT-2 byte-level vocabulary needs at least 260", n));
    std::vector<std::string> tokens = byte_tokens();
    std::set<std::string> seen(tokens.begin(), tokens.end());
    std::vector<std::string> merges;
    const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
    const std::string space = tokens[' '];
    std::vector<std::pair<std::string, std::string>> cands;
    for (char c : letters) cands.push_back({space, std::string(1, c)});
    for (char a : letters)
        for (char b : letters) cands.push_back({std::string(1, a), std::string(1, b)});
    for (const auto& [a, b] : cands) {
        if (static_cast<int64_t>(tokens.size()) >= n - 1) break;
        if (!seen.insert(a + b).second) continue;
        merges.push_back(a + " " + b);
        tokens.push_back(a + b);
    }
    while (static_cast<int64_t>(tokens.size()) < n - 1)
        tokens.push_back(fmt::format("<|unused{}|>", tokens.size()));
    tokens.push_back("<|endoftext|>");
    std::vector<int64_t> types(tokens.size(), 1);
    types.back() = 3;  // CONTROL
    raw(Kv::make_string("tokenizer.ggml.model", "gpt2"));
    raw(Kv::make_string("tokenizer.ggml.pre", "gpt-2"));
    raw(Kv::make_string_array("tokenizer.ggml.tokens", tokens));
    i32_array("tokenizer.ggml.token_type", types);
    raw(Kv::make_string_array("tokenizer.ggml.merges", merges));
    u32("tokenizer.ggml.bos_token_id", n - 1);
    u32("tokenizer.ggml.eos_token_id", n - 1);
}

// The option a message names for a tensor's type (what the old generator said, word for word).
std::string type_option_of(TypeClass c, const ModelSpec& s) {
    if (c == TypeClass::kDown && s.type_down.empty()) return "--type-exps (used for --type-down)";
    return option_of(c);
}

int32_t ModelBuilder::type_of(TypeClass c) const {
    const auto resolve = [](const char* option, const std::string& name) {
        auto id = ggml_type_from_name(name);
        if (!id)
            throw UsageError(fmt::format(
                "{} {}: unknown ggml type (use names like F32, F16, BF16, Q8_0, Q4_K, IQ2_XXS, MXFP4)",
                option, name));
        return *id;
    };
    const ModelSpec& s = spec_;
    switch (c) {
        case TypeClass::kEmbd:
            return resolve("--type-embd", s.type_embd);
        case TypeClass::kOutput:
            return resolve("--type-output", s.type_output);
        case TypeClass::kAttn:
            return resolve("--type-attn", s.type_attn);
        case TypeClass::kDense:
            return resolve("--type-dense", s.type_dense);
        case TypeClass::kExps:
            return resolve("--type-exps", s.type_exps);
        case TypeClass::kDown:
            return s.type_down.empty() ? resolve("--type-exps", s.type_exps)
                                       : resolve("--type-down", s.type_down);
        case TypeClass::kShexp:
            return resolve("--type-shexp", s.type_shexp);
        case TypeClass::kRouter:
            return resolve("--type-router", s.type_router);
        case TypeClass::kF32:
            return kGgmlF32;
        case TypeClass::kI32:
            return kGgmlI32;
    }
    return kGgmlF32;
}

void ModelBuilder::tensor(const std::string& name, std::array<int64_t, 4> ne, TypeClass cls, FillKind fill,
                          const std::string& dim_option) {
    const int32_t type = type_of(cls);
    const GgmlType* gt = ggml_type(type);
    auto row = ggml_row_size(type, ne[0]);
    if (!row)
        throw UsageError(fmt::format(
            "{} {}: {} has rows of {} elements{}, not a multiple of the {}-element blocks of {}",
            type_option_of(cls, spec_), ggml_type_display(type), name, ne[0],
            dim_option.empty() ? "" : " (" + dim_option + ")", gt->block_size, ggml_type_display(type)));
    uint64_t nbytes = *row;
    for (size_t d = 1; d < 4; ++d) {
        auto n = checked_mul(nbytes, static_cast<uint64_t>(ne[d]));
        if (!n) throw UsageError(fmt::format("{} would be larger than 2^64 bytes", name));
        nbytes = *n;
    }
    PlannedTensor t;
    t.info.name = name;
    t.info.ne = ne;
    t.info.n_dims = n_dims_of(ne);
    t.info.type = type;
    t.info.nbytes = nbytes;
    // The presets' models must run in llama.cpp: small block scales too (fill.h). The skeleton keeps
    // the bytes it has always had.
    t.fill = fill == FillKind::kSmall && !spec_.skeleton ? FillKind::kBounded : fill;
    plan_.tensors.push_back(std::move(t));
}

void ModelBuilder::nextn_head(int64_t b) {
    nextn_block(b);
    tensor(blk(b, "nextn.eh_proj.weight"), {2 * spec_.embd, spec_.embd, 1, 1}, TypeClass::kAttn);
    for (const char* w : {"nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight"})
        norm(blk(b, w), spec_.embd);
}

std::string ModelBuilder::blk(int64_t b, const std::string& rest) {
    return fmt::format("blk.{}.{}", b, rest);
}

void ModelBuilder::experts(int64_t b, const Experts& e) {
    const ModelSpec& s = spec_;
    using R = ExpertRole;
    using P = Projection;
    const int64_t in = e.in ? e.in : s.embd, rin = e.router_in ? e.router_in : s.embd, E = s.experts,
                  F = s.expert_ff;
    const auto name = [b](const ExpertTensorKind& k) { return block_tensor_name(static_cast<int>(b), k); };
    tensor(name(expert_kind(R::kRouter)), {rin, E, 1, 1}, TypeClass::kRouter);
    if (s.router_bias)
        tensor(name(expert_kind(R::kRouterBias)), {E, 1, 1, 1}, TypeClass::kF32, FillKind::kZero);
    if (s.probs_bias || e.probs_bias) {
        const ExpertTensorKind& pb = expert_kind(R::kProbsBias);
        tensor(block_tensor_name(static_cast<int>(b), pb.base, e.probs_bias_suffix), {E, 1, 1, 1},
               TypeClass::kF32, FillKind::kZero);
    }
    const bool fused = s.fused_gate_up && e.allow_fused && e.gate;
    std::vector<P> ins = fused    ? std::vector<P>{P::kGateUp}
                         : e.gate ? std::vector<P>{P::kGate, P::kUp}
                                  : std::vector<P>{P::kUp};
    for (P p : ins)
        tensor(name(expert_kind(R::kWeight, p)), {in, F * expert_kind(R::kWeight, p).width_factor, E, 1},
               TypeClass::kExps);
    tensor(name(expert_kind(R::kWeight, P::kDown)), {F, in, E, 1}, TypeClass::kDown);
    if (s.exps_bias && e.allow_exps_bias) {
        for (P p : ins)
            tensor(name(expert_kind(R::kBias, p)), {F * expert_kind(R::kBias, p).width_factor, E, 1, 1},
                   TypeClass::kF32, FillKind::kZero);
        tensor(name(expert_kind(R::kBias, P::kDown)), {in, E, 1, 1}, TypeClass::kF32, FillKind::kZero);
    }
    if (s.scales && e.scales) {
        for (P p : ins)
            tensor(name(expert_kind(R::kScale, p)), {E, 1, 1, 1}, TypeClass::kF32, FillKind::kNearOne);
        tensor(name(expert_kind(R::kScale, P::kDown)), {E, 1, 1, 1}, TypeClass::kF32, FillKind::kNearOne);
    }
    moe_block(b);
}

void ModelBuilder::shared_experts(int64_t b, int64_t w, bool gate) {
    const int64_t n = spec_.embd;
    if (gate) tensor(blk(b, "ffn_gate_shexp.weight"), {n, w, 1, 1}, TypeClass::kShexp);
    tensor(blk(b, "ffn_up_shexp.weight"), {n, w, 1, 1}, TypeClass::kShexp);
    tensor(blk(b, "ffn_down_shexp.weight"), {w, n, 1, 1}, TypeClass::kShexp);
}

void ModelBuilder::dense_ffn(int64_t b, int64_t ff, bool gate) {
    const int64_t n = spec_.embd;
    if (gate) tensor(blk(b, "ffn_gate.weight"), {n, ff, 1, 1}, TypeClass::kDense);
    tensor(blk(b, "ffn_up.weight"), {n, ff, 1, 1}, TypeClass::kDense);
    tensor(blk(b, "ffn_down.weight"), {ff, n, 1, 1}, TypeClass::kDense);
}

void ModelBuilder::attention(int64_t b, int64_t head_dim, int64_t heads, int64_t heads_kv, bool qk_norm) {
    const int64_t n = spec_.embd;
    tensor(blk(b, "attn_q.weight"), {n, head_dim * heads, 1, 1}, TypeClass::kAttn);
    tensor(blk(b, "attn_k.weight"), {n, head_dim * heads_kv, 1, 1}, TypeClass::kAttn);
    tensor(blk(b, "attn_v.weight"), {n, head_dim * heads_kv, 1, 1}, TypeClass::kAttn);
    tensor(blk(b, "attn_output.weight"), {head_dim * heads, n, 1, 1}, TypeClass::kAttn);
    if (qk_norm) {
        norm(blk(b, "attn_q_norm.weight"), head_dim);
        norm(blk(b, "attn_k_norm.weight"), head_dim);
    }
}

ModelPlan ModelBuilder::finish() {
    plan_.moe_blocks = moe_blocks_;
    plan_.nextn_blocks = nextn_blocks_;
    std::sort(plan_.moe_blocks.begin(), plan_.moe_blocks.end());
    plan_.moe_blocks.erase(std::unique(plan_.moe_blocks.begin(), plan_.moe_blocks.end()),
                           plan_.moe_blocks.end());
    for (const auto& t : plan_.tensors) {
        auto sum = checked_add(plan_.tensor_bytes, t.info.nbytes);
        if (!sum) throw UsageError("the model would be larger than 2^64 bytes");
        plan_.tensor_bytes = *sum;
    }
    return std::move(plan_);
}

}  // namespace gguf_reap::gen
