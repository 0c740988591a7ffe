#include "gen/model.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gen/archs.h"
#include "gen/builder.h"
#include "gen/random.h"
#include "gguf_reap/error.h"
#include "io/checked.h"
#include "io/output_file.h"
#include "io/signals.h"
#include "model/shard_set.h"
#include "model/tensor_table.h"

namespace gguf_reap::gen {

namespace {

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

// The options that write an optional expert tensor, each refused where the architecture table says the
// loader creates no such tensor (ArchInfo::takes). An architecture that can never hold experts is left
// to its preset, which refuses every expert option given and writes none.
void refuse_untaken_tensors(const ModelSpec& s) {
    const ArchInfo* info = arch_info(s.arch);
    if (!info || info->status == ArchStatus::kNoExperts) return;
    using T = ArchTakes;
    const auto kind = [](ExpertRole r, Projection p = Projection::kNone) {
        const ExpertTensorKind& k = expert_kind(r, p);
        return k.suffix.empty() ? std::string(k.base) : fmt::format("{}.{}", k.base, k.suffix);
    };
    if (s.router_bias && !info->takes_tensor(T::kRouterBias))
        throw UsageError(
            fmt::format("--router-bias: {}'s loader creates no {}", s.arch, kind(ExpertRole::kRouterBias)));
    if (s.exps_bias && !info->takes_tensor(T::kExpsBias))
        throw UsageError(fmt::format("--exps-bias: {}'s loader creates no expert biases ({}, ...)", s.arch,
                                     kind(ExpertRole::kBias, Projection::kGate)));
    if (s.probs_bias && !info->takes_tensor(T::kProbsBias))  // given, or a --preset's default (demo, kimi-k3)
        throw UsageError(fmt::format(
            "--probs-bias: {}'s loader creates no {}{}", s.arch, kind(ExpertRole::kProbsBias),
            s.given.count("--probs-bias") ? "" : fmt::format(" (--preset {} sets it)", s.preset)));
    if (s.fused_gate_up && !info->takes_tensor(T::kFusedGateUp))
        throw UsageError(fmt::format("--fused-gate-up: {}'s loader creates no {}: it takes gate and up apart",
                                     s.arch, kind(ExpertRole::kWeight, Projection::kGateUp)));
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
    resolve_types(spec);  // a bad type name fails here, whichever tensor would have used it
    const ArchPreset* preset = spec.skeleton ? nullptr : find_arch_preset(spec.arch);
    if (!spec.skeleton && !preset)
        throw UsageError(
            fmt::format("--arch {}: no preset for this architecture (gguf-reap-gen model "
                        "--list-archs lists them; --skeleton writes the test layout under any name)",
                        spec.arch));
    if (preset) refuse_untaken_tensors(spec);
    ModelBuilder b(spec);
    (preset ? preset->build : build_skeleton)(b);
    // Not llama.cpp tensors (it would refuse them): only for testing tensor counts near and above 100k.
    for (int64_t i = 0; i < spec.filler; ++i)
        b.tensor(fmt::format("filler.{}.weight", i), {1, 1, 1, 1}, TypeClass::kF32);
    return b.finish();
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
        // A prefix written with its ".gguf" ("-o m.gguf --shards 2") names m-00001-of-00002.gguf.
        const std::string prefix = out.ends_with(".gguf") ? out.substr(0, out.size() - 5) : out;
        sp.path = N == 1 ? out : split_path(prefix, static_cast<int>(k + 1), static_cast<int>(N));
        // Only the first shard carries the model KVs (and so general.alignment); the others use 32.
        if (k == 0) sp.kvs = plan.kvs;
        sp.alignment = k == 0 ? first_alignment : kGgufDefaultAlignment;
        if (N > 1) {
            // Appended last, as gguf_set_val_* appends them in every llama.cpp writer (reference §4.3).
            sp.kvs.push_back(Kv::make_u16(kSplitNo, static_cast<uint16_t>(k)));
            sp.kvs.push_back(Kv::make_u16(kSplitCount, static_cast<uint16_t>(N)));
            sp.kvs.push_back(Kv::make_i32(kSplitTensorsCount, static_cast<int32_t>(n)));
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
            const TensorFill fill(derive(plan.spec.seed, t.info.name), t.info.type, t.info.nbytes, t.fill,
                                  t.ids);
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

void set_key(std::vector<Kv>& kvs, const std::string& arch, const std::string& assignment) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0)
        throw UsageError(fmt::format("--set-key {}: expected KEY=VALUE", assignment));
    std::string key = assignment.substr(0, eq);
    const std::string value = assignment.substr(eq + 1);
    auto find = [&](const std::string& k) {
        return std::find_if(kvs.begin(), kvs.end(), [&](const Kv& kv) { return kv.key == k; });
    };
    auto it = find(key);
    if (it == kvs.end() && find(arch + "." + key) != kvs.end()) key = arch + "." + key;
    if (it == kvs.end()) it = find(key);
    if (value.empty()) {
        if (it == kvs.end())
            throw UsageError(fmt::format("--set-key {}: the model has no {}", assignment, key));
        kvs.erase(it);
        return;
    }
    std::vector<int64_t> values;
    for (size_t at = 0; at <= value.size();) {
        const size_t comma = std::min(value.find(',', at), value.size());
        const std::string item = value.substr(at, comma - at);
        size_t used = 0;
        int64_t v = -1;
        try {
            v = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (item.empty() || used != item.size() || v < 0)
            throw UsageError(
                fmt::format("--set-key {}: '{}' is not a non-negative integer", assignment, item));
        values.push_back(v);
        at = comma + 1;
    }
    const bool array = values.size() > 1 || (it != kvs.end() && it->type == GgufType::kArray);
    Kv kv;
    if (array) {
        const GgufType elem =
            it != kvs.end() && it->type == GgufType::kArray ? it->elem_type : GgufType::kUint32;
        if (elem == GgufType::kInt32)
            kv = Kv::make_i32_array(key, values);
        else if (elem == GgufType::kUint32)
            kv = Kv::make_u32_array(key, values);
        else
            throw UsageError(fmt::format("--set-key {}: {} is an array of {}, not of u32 or i32", assignment,
                                         key, gguf_type_name(elem)));
    } else if (it != kvs.end()) {
        const auto made = Kv::make_int_like(*it, static_cast<uint64_t>(values[0]));
        if (!made)
            throw UsageError(fmt::format("--set-key {}: {} is {}, which cannot hold {}", assignment, key,
                                         gguf_type_name(it->type), values[0]));
        kv = *made;
    } else {
        if (values[0] > UINT32_MAX)
            throw UsageError(fmt::format("--set-key {}: {} does not fit a u32", assignment, values[0]));
        kv = Kv::make_u32(key, static_cast<uint32_t>(values[0]));
    }
    kv.key = key;
    if (it != kvs.end())
        *it = std::move(kv);
    else
        kvs.push_back(std::move(kv));
}

}  // namespace gguf_reap::gen
