#include "gen/model.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gen/random.h"
#include "io/checked.h"
#include "io/error.h"
#include "io/output_file.h"
#include "io/signals.h"
#include "model/shard_set.h"
#include "model/tensor_table.h"

namespace gguf_reap::gen {

namespace {

constexpr uint32_t kContextLength = 4096;
constexpr float kRmsEps = 1e-6f;
constexpr uint32_t kGatingSigmoid = 2;  // llama.cpp LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID

int32_t resolve_type(const std::string& option, const std::string& name) {
    auto id = ggml_type_from_name(name);
    if (!id)
        throw UsageError(
            fmt::format("{} {}: unknown ggml type (use names like F32, F16, BF16, Q8_0, Q4_K, "
                        "IQ2_XXS, MXFP4)",
                        option, name));
    return *id;
}

void require(bool ok, const std::string& message) {
    if (!ok) throw UsageError(message);
}

// ggml_n_dims: trailing 1-dims are not written (how ggml's writer stores shapes).
uint32_t n_dims_of(const std::array<int64_t, 4>& ne) {
    for (int d = 3; d > 0; --d)
        if (ne[static_cast<size_t>(d)] > 1) return static_cast<uint32_t>(d + 1);
    return 1;
}

// Collects tensors in model order, checking each row against its type's block size.
class TensorList {
  public:
    explicit TensorList(std::vector<PlannedTensor>& out) : out_(out) {}

    // `type_option` / `dim_option` name the options that chose the type and the row width, for the
    // message when the row is not a whole number of blocks.
    void add(const std::string& name, std::array<int64_t, 4> ne, int32_t type, FillKind fill,
             const std::string& type_option, const std::string& dim_option) {
        const GgmlType* gt = ggml_type(type);
        auto row = ggml_row_size(type, ne[0]);
        if (!row)
            throw UsageError(
                fmt::format("{} {}: {} has rows of {} elements ({}), not a multiple of the {}-element "
                            "blocks of {}",
                            type_option, ggml_type_display(type), name, ne[0], dim_option, gt->block_size,
                            ggml_type_display(type)));
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
        t.fill = fill;
        out_.push_back(std::move(t));
    }

  private:
    std::vector<PlannedTensor>& out_;
};

struct Types {
    int32_t exps, down, attn, embd, output, shexp, dense, router;
};

Types resolve_types(const ModelSpec& s) {
    Types t{};
    t.exps = resolve_type("--type-exps", s.type_exps);
    t.down = s.type_down.empty() ? t.exps : resolve_type("--type-down", s.type_down);
    t.attn = resolve_type("--type-attn", s.type_attn);
    t.embd = resolve_type("--type-embd", s.type_embd);
    t.output = resolve_type("--type-output", s.type_output);
    t.shexp = resolve_type("--type-shexp", s.type_shexp);
    t.dense = resolve_type("--type-dense", s.type_dense);
    t.router = resolve_type("--type-router", s.type_router);
    return t;
}

void validate_shape(const ModelSpec& s) {
    require(!s.arch.empty(), "--arch must not be empty");
    if (s.alignment)
        require(*s.alignment != 0 && (*s.alignment & (*s.alignment - 1)) == 0,
                fmt::format("--alignment {}: must be a power of two", *s.alignment));
    require(s.blocks >= 1 && s.blocks <= 4096, fmt::format("--blocks {}: must be 1..4096", s.blocks));
    require(s.nextn >= 0 && s.nextn <= 64, fmt::format("--nextn {}: must be 0..64", s.nextn));
    for (auto [opt, v] : {std::pair{"--embd", s.embd},
                          {"--ff", s.ff},
                          {"--expert-ff", s.expert_ff},
                          {"--vocab", s.vocab},
                          {"--heads", s.heads}})
        require(v >= 1 && v <= (int64_t{1} << 30), fmt::format("{} {}: must be 1..2^30", opt, v));
    require(s.embd % s.heads == 0, fmt::format("--embd {} is not a multiple of --heads {}", s.embd, s.heads));
    require(s.experts >= 0 && s.experts <= 65535, fmt::format("--experts {}: must be 0..65535", s.experts));
    require(s.filler >= 0 && s.filler <= 1'000'000, fmt::format("--filler {}: must be 0..1000000", s.filler));
    if (s.experts == 0) {
        require(s.nextn == 0, "--nextn needs routed experts (--experts > 0)");
        return;
    }
    require(s.dense_blocks >= 0 && s.dense_blocks <= s.blocks,
            fmt::format("--dense-blocks {}: must be 0..--blocks ({})", s.dense_blocks, s.blocks));
    require(s.dense_blocks < s.blocks || s.nextn > 0,
            fmt::format("--dense-blocks {} leaves no MoE block (--blocks {})", s.dense_blocks, s.blocks));
    require(s.used >= 1 && s.used <= s.experts,
            fmt::format("--used {}: must be 1..--experts ({})", s.used, s.experts));
    require(s.shared >= 0 && s.shared <= 64, fmt::format("--shared {}: must be 0..64", s.shared));
    require(s.groups >= 1, fmt::format("--groups {}: must be at least 1", s.groups));
    if (s.groups > 1) {
        // llama.cpp's load_hparams asserts exactly these (reference §5.4).
        require(s.groups < s.experts && s.experts % s.groups == 0,
                fmt::format("--groups {}: must divide --experts ({}) and be smaller", s.groups, s.experts));
        require(s.group_used >= 1 && s.group_used < s.groups,
                fmt::format("--group-used {}: must be 1..--groups-1 ({})", s.group_used, s.groups - 1));
    }
}

std::vector<Kv> model_kvs(const ModelSpec& s) {
    const std::string a = s.arch + ".";
    auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
    std::vector<Kv> kvs;
    kvs.push_back(Kv::make_string("general.architecture", s.arch));
    kvs.push_back(
        Kv::make_string("general.name", s.name.empty() ? "gguf-reap synthetic " + s.preset : s.name));
    if (s.alignment) kvs.push_back(Kv::make_u32("general.alignment", *s.alignment));
    kvs.push_back(Kv::make_u32(a + "block_count", u32(s.blocks + s.nextn)));
    kvs.push_back(Kv::make_u32(a + "context_length", kContextLength));
    kvs.push_back(Kv::make_u32(a + "embedding_length", u32(s.embd)));
    kvs.push_back(Kv::make_u32(a + "feed_forward_length", u32(s.ff)));
    kvs.push_back(Kv::make_u32(a + "attention.head_count", u32(s.heads)));
    kvs.push_back(Kv::make_u32(a + "attention.head_count_kv", u32(s.heads)));
    kvs.push_back(Kv::make_f32(a + "attention.layer_norm_rms_epsilon", kRmsEps));
    if (s.experts > 0) {
        kvs.push_back(Kv::make_u32(a + "expert_count", u32(s.experts)));
        kvs.push_back(Kv::make_u32(a + "expert_used_count", u32(s.used)));
        kvs.push_back(Kv::make_u32(a + "expert_shared_count", u32(s.shared)));
        kvs.push_back(Kv::make_u32(a + "expert_feed_forward_length", u32(s.expert_ff)));
        kvs.push_back(Kv::make_u32(a + "leading_dense_block_count", u32(s.dense_blocks)));
        if (s.groups > 1) {
            kvs.push_back(Kv::make_u32(a + "expert_group_count", u32(s.groups)));
            kvs.push_back(Kv::make_u32(a + "expert_group_used_count", u32(s.group_used)));
        }
        kvs.push_back(Kv::make_u32(a + "expert_gating_func", kGatingSigmoid));
        kvs.push_back(Kv::make_bool(a + "expert_weights_norm", true));
        kvs.push_back(Kv::make_f32(a + "expert_weights_scale", s.weights_scale));
        if (s.nextn > 0) kvs.push_back(Kv::make_u32(a + "nextn_predict_layers", u32(s.nextn)));
    }
    kvs.push_back(Kv::make_u32(a + "vocab_size", u32(s.vocab)));
    kvs.push_back(Kv::make_string("tokenizer.ggml.model", "gpt2"));
    std::vector<std::string> tokens;
    tokens.reserve(static_cast<size_t>(s.vocab));
    for (int64_t i = 0; i < s.vocab; ++i) tokens.push_back(fmt::format("t{}", i));
    kvs.push_back(Kv::make_string_array("tokenizer.ggml.tokens", tokens));
    kvs.push_back(Kv::make_u32("general.quantization_version", 2));
    return kvs;
}

}  // namespace

ModelSpec preset_spec(const std::string& preset) {
    ModelSpec s;  // the defaults are the tiny preset
    s.preset = preset;
    if (preset == "tiny") return s;
    if (preset == "demo") {
        // Kimi-K2's layout (1 dense block, sigmoid gating, exp_probs_b, one shared expert) at a size that
        // builds in well under a second: ~8.5 MB.
        s.blocks = 6;
        s.experts = 64;
        s.used = 8;
        s.embd = 256;
        s.ff = 512;
        s.expert_ff = 32;
        s.vocab = 1024;
        s.probs_bias = true;
        s.weights_scale = 2.827f;
        s.type_exps = "Q4_K";
        s.type_down = "Q8_0";  // Q4_K_M-style: down one step up (rows of 32 also rule K-quants out)
        return s;
    }
    if (preset == "kimi-k3") {
        // Kimi-K3's expert grid (93 blocks, the first dense; 896 experts, 16 used, 1 shared) with tiny
        // matrices: 92 × 896 × 3 = 247,296 expert slabs. ~1.1 GB as is; see docs/fixture-generator.md
        // for the ≥ 4 GB and ≥ 10 GB benchmark variants.
        s.blocks = 93;
        s.experts = 896;
        s.used = 16;
        s.embd = 128;
        s.ff = 256;
        s.expert_ff = 32;
        s.vocab = 1024;
        s.probs_bias = true;
        s.weights_scale = 2.827f;
        return s;
    }
    throw UsageError(fmt::format("--preset {}: unknown preset (tiny, demo, kimi-k3)", preset));
}

ModelPlan plan_model(const ModelSpec& spec) {
    validate_shape(spec);
    const Types ty = resolve_types(spec);
    ModelPlan plan;
    plan.spec = spec;
    plan.kvs = model_kvs(spec);
    TensorList L(plan.tensors);
    const int64_t embd = spec.embd, E = spec.experts, eff = spec.expert_ff;
    const auto kSmall = FillKind::kSmall, kOne = FillKind::kNearOne;
    const std::string kNorm = "(norms are F32)", kBias = "(biases are F32)";

    L.add("token_embd.weight", {embd, spec.vocab, 1, 1}, ty.embd, kSmall, "--type-embd", "--embd");
    const int64_t total = spec.blocks + spec.nextn;
    for (int64_t b = 0; b < total; ++b) {
        const std::string p = fmt::format("blk.{}.", b);
        const bool moe = E > 0 && b >= spec.dense_blocks;
        const bool nextn = b >= spec.blocks;
        if (moe) plan.moe_blocks.push_back(b);
        if (nextn) plan.nextn_blocks.push_back(b);
        L.add(p + "attn_norm.weight", {embd, 1, 1, 1}, kGgmlF32, kOne, kNorm, "--embd");
        for (const char* w : {"attn_q", "attn_k", "attn_v", "attn_output"})
            L.add(p + w + ".weight", {embd, embd, 1, 1}, ty.attn, kSmall, "--type-attn", "--embd");
        L.add(p + "ffn_norm.weight", {embd, 1, 1, 1}, kGgmlF32, kOne, kNorm, "--embd");
        if (!moe) {
            L.add(p + "ffn_gate.weight", {embd, spec.ff, 1, 1}, ty.dense, kSmall, "--type-dense", "--embd");
            L.add(p + "ffn_up.weight", {embd, spec.ff, 1, 1}, ty.dense, kSmall, "--type-dense", "--embd");
            L.add(p + "ffn_down.weight", {spec.ff, embd, 1, 1}, ty.dense, kSmall, "--type-dense", "--ff");
            continue;
        }
        using R = ExpertRole;
        using P = Projection;
        const auto name = [b](const ExpertTensorKind& k) {
            return block_tensor_name(static_cast<int>(b), k);
        };
        L.add(name(expert_kind(R::kRouter)), {embd, E, 1, 1}, ty.router, kSmall, "--type-router", "--embd");
        if (spec.router_bias)
            L.add(name(expert_kind(R::kRouterBias)), {E, 1, 1, 1}, kGgmlF32, kSmall, kBias, "--experts");
        if (spec.probs_bias)
            L.add(name(expert_kind(R::kProbsBias)), {E, 1, 1, 1}, kGgmlF32, kSmall, kBias, "--experts");
        // The projections that read the block input, then down.
        std::vector<P> in_exps =
            spec.fused_gate_up ? std::vector<P>{P::kGateUp} : std::vector<P>{P::kGate, P::kUp};
        for (P pr : in_exps)
            L.add(name(expert_kind(R::kWeight, pr)), {embd, pr == P::kGateUp ? 2 * eff : eff, E, 1}, ty.exps,
                  kSmall, "--type-exps", "--embd");
        L.add(name(expert_kind(R::kWeight, P::kDown)), {eff, embd, E, 1}, ty.down, kSmall,
              spec.type_down.empty() ? "--type-exps (used for --type-down)" : "--type-down", "--expert-ff");
        if (spec.exps_bias) {  // gpt-oss: one bias row per expert, expert = ne[1]
            for (P pr : in_exps)
                L.add(name(expert_kind(R::kBias, pr)), {pr == P::kGateUp ? 2 * eff : eff, E, 1, 1}, kGgmlF32,
                      kSmall, kBias, "");
            L.add(name(expert_kind(R::kBias, P::kDown)), {embd, E, 1, 1}, kGgmlF32, kSmall, kBias, "");
        }
        if (spec.scales) {  // NVFP4-style per-expert scales
            for (P pr : in_exps)
                L.add(name(expert_kind(R::kScale, pr)), {E, 1, 1, 1}, kGgmlF32, kOne, kBias, "");
            L.add(name(expert_kind(R::kScale, P::kDown)), {E, 1, 1, 1}, kGgmlF32, kOne, kBias, "");
        }
        if (spec.shared > 0) {
            const int64_t sff = eff * spec.shared;
            L.add(p + "ffn_gate_shexp.weight", {embd, sff, 1, 1}, ty.shexp, kSmall, "--type-shexp", "--embd");
            L.add(p + "ffn_up_shexp.weight", {embd, sff, 1, 1}, ty.shexp, kSmall, "--type-shexp", "--embd");
            L.add(p + "ffn_down_shexp.weight", {sff, embd, 1, 1}, ty.shexp, kSmall, "--type-shexp",
                  "--expert-ff × --shared");
        }
        if (nextn) {  // the MTP head's own tensors (llama.cpp loads them with the block)
            L.add(p + "nextn.eh_proj.weight", {2 * embd, embd, 1, 1}, ty.attn, kSmall, "--type-attn",
                  "2 × --embd");
            for (const char* w : {"nextn.enorm", "nextn.hnorm", "nextn.shared_head_norm"})
                L.add(p + w + ".weight", {embd, 1, 1, 1}, kGgmlF32, kOne, kNorm, "--embd");
        }
    }
    L.add("output_norm.weight", {embd, 1, 1, 1}, kGgmlF32, kOne, kNorm, "--embd");
    if (!spec.tied)
        L.add("output.weight", {embd, spec.vocab, 1, 1}, ty.output, kSmall, "--type-output", "--embd");
    // Not llama.cpp tensors (it would refuse them): only for testing tensor counts near and above 100k.
    for (int64_t i = 0; i < spec.filler; ++i)
        L.add(fmt::format("filler.{}.weight", i), {1, 1, 1, 1}, kGgmlF32, kSmall, "(filler is F32)", "");

    for (const auto& t : plan.tensors) {
        auto sum = checked_add(plan.tensor_bytes, t.info.nbytes);
        if (!sum) throw UsageError("the model would be larger than 2^64 bytes");
        plan.tensor_bytes = *sum;
    }
    return plan;
}

std::vector<ShardPlan> plan_shards(const ModelPlan& plan, const std::string& out, int64_t shards) {
    const size_t n = plan.tensors.size();
    require(shards >= 1 && shards <= 65535, fmt::format("--shards {}: must be 1..65535", shards));
    require(static_cast<size_t>(shards) <= n,
            fmt::format("--shards {}: the model has only {} tensors and every shard needs one", shards, n));
    const uint32_t first_alignment = plan.spec.alignment.value_or(kGgufDefaultAlignment);

    // Cut points balance the data bytes: cut k sits at the tensor boundary nearest k/N of the total.
    std::vector<uint64_t> prefix(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
        auto padded = pad_to(plan.tensors[i].info.nbytes, kGgufDefaultAlignment);
        if (!padded) throw UsageError("the model would be larger than 2^64 bytes");
        prefix[i + 1] = prefix[i] + *padded;
    }
    const auto N = static_cast<size_t>(shards);
    std::vector<size_t> cuts{0};
    for (size_t k = 1; k < N; ++k) {
        const double target =
            static_cast<double>(prefix[n]) * static_cast<double>(k) / static_cast<double>(N);
        const size_t lo = cuts.back() + 1, hi = n - (N - k);
        size_t c = lo;
        while (c < hi && static_cast<double>(prefix[c]) < target) ++c;
        if (c > lo && target - static_cast<double>(prefix[c - 1]) < static_cast<double>(prefix[c]) - target)
            --c;
        cuts.push_back(c);
    }
    cuts.push_back(n);

    std::vector<ShardPlan> out_shards(N);
    for (size_t k = 0; k < N; ++k) {
        ShardPlan& sp = out_shards[k];
        sp.path = N == 1 ? out : split_path(out, static_cast<int>(k + 1), static_cast<int>(N));
        // Only the first shard carries the model KVs (and so general.alignment); the others use 32.
        if (k == 0) sp.kvs = plan.kvs;
        sp.alignment = k == 0 ? first_alignment : kGgufDefaultAlignment;
        if (N > 1) {
            // Appended last, as gguf_set_val_* appends them in every llama.cpp writer (reference §4.3).
            sp.kvs.push_back(Kv::make_u16("split.no", static_cast<uint16_t>(k)));
            sp.kvs.push_back(Kv::make_u16("split.count", static_cast<uint16_t>(N)));
            sp.kvs.push_back(Kv::make_i32("split.tensors.count", static_cast<int32_t>(n)));
        }
        for (size_t i = cuts[k]; i < cuts[k + 1]; ++i) {
            sp.tensors.push_back(i);
            sp.infos.push_back(plan.tensors[i].info);
        }
        uint64_t data = 0;
        try {
            data = assign_offsets(sp.infos, sp.alignment);
        } catch (const std::overflow_error&) {
            throw UsageError("the model would be larger than 2^64 bytes");
        }
        sp.header = serialize_header(3, sp.kvs, sp.infos, sp.alignment);
        auto size = checked_add(sp.header.size(), data);
        if (!size) throw UsageError("the model would be larger than 2^64 bytes");
        sp.file_size = *size;
    }
    return out_shards;
}

namespace {

// Streams a file front to back through one buffer, writing it in large blocks at offsets that are
// multiples of the buffer size: page-aligned sequential writes run at disk speed, where scattered
// 1 MiB writes at unaligned tensor offsets ran at half of it.
class SequentialWriter {
  public:
    explicit SequentialWriter(OutputFile& f) : f_(f), buf_(kBlock) {}

    // A span of the buffer to fill with the next n <= kBlock bytes (flushing first if needed).
    uint8_t* reserve(size_t n) {
        if (used_ + n > buf_.size()) flush();
        uint8_t* p = buf_.data() + used_;
        used_ += n;
        return p;
    }
    void append(const uint8_t* p, size_t n) {
        while (n > 0) {
            const size_t k = std::min(n, kBlock);
            std::memcpy(reserve(k), p, k);
            p += k;
            n -= k;
        }
    }
    void zeros(size_t n) { std::memset(reserve(n), 0, n); }
    void flush() {
        f_.write_at(pos_, buf_.data(), used_);
        pos_ += used_;
        used_ = 0;
    }
    uint64_t position() const { return pos_ + used_; }

  private:
    static constexpr size_t kBlock = size_t{8} << 20;
    OutputFile& f_;
    std::vector<uint8_t> buf_;
    size_t used_ = 0;
    uint64_t pos_ = 0;
};

}  // namespace

void write_model(const ModelPlan& plan, const std::vector<ShardPlan>& shards) {
    std::vector<std::unique_ptr<OutputFile>> files;
    for (const ShardPlan& sp : shards) {
        auto f = std::make_unique<OutputFile>(sp.path);
        SequentialWriter w(*f);
        w.append(sp.header.data(), sp.header.size());
        const uint64_t data_start = sp.header.size();
        for (size_t j = 0; j < sp.tensors.size(); ++j) {
            const PlannedTensor& t = plan.tensors[sp.tensors[j]];
            const TensorFill fill(derive(plan.spec.seed, t.info.name), t.info.type, t.info.nbytes, t.fill);
            w.zeros(data_start + sp.infos[j].offset - w.position());  // padding after the previous tensor
            for (uint64_t c = 0; c < fill.chunk_count(); ++c) {
                check_interrupted();
                fill.fill(c, w.reserve(fill.chunk_size(c)));
            }
        }
        w.zeros(sp.file_size - w.position());
        w.flush();
        files.push_back(std::move(f));
    }
    // All shards exist under temporary names before any takes its final name.
    for (auto& f : files) f->commit();
}

nlohmann::ordered_json model_truth(const ModelPlan& plan, const std::vector<ShardPlan>& shards) {
    using nlohmann::ordered_json;
    const ModelSpec& s = plan.spec;
    ordered_json j;
    j["generator"] = "gguf-reap-gen";
    j["preset"] = s.preset;
    j["arch"] = s.arch;
    j["name"] = s.name.empty() ? "gguf-reap synthetic " + s.preset : s.name;
    j["seed"] = s.seed;
    j["block_count"] = s.blocks + s.nextn;
    j["blocks"] = s.blocks;
    j["leading_dense_block_count"] = s.experts > 0 ? s.dense_blocks : s.blocks;
    ordered_json dense = ordered_json::array();
    for (int64_t b = 0; b < s.blocks + s.nextn; ++b)
        if (std::find(plan.moe_blocks.begin(), plan.moe_blocks.end(), b) == plan.moe_blocks.end())
            dense.push_back(b);
    j["dense_blocks"] = dense;
    j["moe_blocks"] = plan.moe_blocks;
    j["nextn_blocks"] = plan.nextn_blocks;
    j["experts"] = s.experts;
    j["used"] = s.used;
    j["shared"] = s.shared;
    j["groups"] = s.groups;
    j["group_used"] = s.groups > 1 ? s.group_used : 0;
    j["embd"] = s.embd;
    j["ff"] = s.ff;
    j["expert_ff"] = s.expert_ff;
    j["vocab"] = s.vocab;
    j["heads"] = s.heads;
    j["options"] = {{"probs_bias", s.probs_bias},       {"router_bias", s.router_bias},
                    {"exps_bias", s.exps_bias},         {"scales", s.scales},
                    {"fused_gate_up", s.fused_gate_up}, {"tied", s.tied}};
    const Types ty = resolve_types(s);
    j["types"] = {{"exps", ggml_type_display(ty.exps)},     {"down", ggml_type_display(ty.down)},
                  {"attn", ggml_type_display(ty.attn)},     {"embd", ggml_type_display(ty.embd)},
                  {"output", ggml_type_display(ty.output)}, {"shexp", ggml_type_display(ty.shexp)},
                  {"dense", ggml_type_display(ty.dense)},   {"router", ggml_type_display(ty.router)}};
    j["expert_slabs"] = static_cast<uint64_t>(plan.moe_blocks.size()) * static_cast<uint64_t>(s.experts) * 3;
    j["tensor_count"] = plan.tensors.size();
    j["tensor_bytes"] = plan.tensor_bytes;
    ordered_json files = ordered_json::array();
    ordered_json tensors = ordered_json::array();
    uint64_t total = 0;
    for (size_t k = 0; k < shards.size(); ++k) {
        const ShardPlan& sp = shards[k];
        total += sp.file_size;
        files.push_back({{"path", sp.path},
                         {"file_size", sp.file_size},
                         {"tensor_count", sp.tensors.size()},
                         {"alignment", sp.alignment},
                         {"data_start", sp.header.size()}});
        for (size_t i = 0; i < sp.infos.size(); ++i) {
            const TensorInfo& t = sp.infos[i];
            ordered_json ne = ordered_json::array();
            for (uint32_t d = 0; d < t.n_dims; ++d) ne.push_back(t.ne[d]);
            tensors.push_back({{"name", t.name},
                               {"type", ggml_type_display(t.type)},
                               {"ne", ne},
                               {"nbytes", t.nbytes},
                               {"shard", k},
                               {"offset", t.offset}});
        }
    }
    j["file_bytes"] = total;
    j["files"] = files;
    j["tensors"] = tensors;
    return j;
}

}  // namespace gguf_reap::gen
