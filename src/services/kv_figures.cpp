// The KV cache a model keeps per token (include/gguf_reap/estimate.h, KvFigures): its kind (standard, MLA or
// none), the layers that keep one, and llama.cpp's cache types. estimate's fit rows and the card use it.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "format/gguf.h"
#include "gguf_reap/error.h"
#include "gguf_reap/estimate.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "model/tensor_table.h"
#include "services/llama_cpp/llama_recipes.h"
#include "services/model_figures.h"

namespace gguf_reap {

namespace {

// Attention figures come from KVs that nothing else checks: bound them, so that a hostile header gives
// an error instead of a wrapped product or a huge per-layer table. llama.cpp allows 512 layers.
constexpr uint64_t kMaxLayers = uint64_t{1} << 16;
constexpr uint64_t kMaxDim = uint64_t{1} << 24;

InputError implausible(const ShardSet& model, const Kv& kv, uint64_t v, uint64_t max) {
    return InputError(model.shards().front().path, kv.file_offset, kv.key,
                      fmt::format("{} is more than {}: not a plausible value", v, max));
}

// "<arch>.<suffix>" as an integer no larger than `max`, or `fallback` when absent or not an integer.
uint64_t bounded(const ShardSet& model, const std::string& suffix, uint64_t fallback, uint64_t max) {
    const Kv* kv = model.find_kv(model.architecture() + "." + suffix);
    const auto v = kv ? kv->as_uint() : std::nullopt;
    if (!v) return fallback;
    if (*v > max) throw implausible(model, *kv, *v, max);
    return *v;
}

// A KV that llama.cpp reads with get_key_or_arr: a scalar for every layer, or one value per layer.
std::optional<std::vector<uint64_t>> per_layer(const ShardSet& model, const std::string& key,
                                               uint64_t n_layer) {
    const Kv* kv = model.find_kv(key);
    if (!kv) return std::nullopt;
    const std::string file = model.shards().front().path;
    if (kv->type != GgufType::kArray) {
        auto v = kv->as_uint();
        if (!v) throw InputError(file, kv->file_offset, key, "expected a non-negative integer");
        if (*v > kMaxDim) throw implausible(model, *kv, *v, kMaxDim);
        return std::vector<uint64_t>(n_layer, *v);
    }
    if (kv->count != n_layer)
        throw InputError(file, kv->file_offset, key,
                         fmt::format("array of {} values, but block_count is {}", kv->count, n_layer));
    // raw = i32 element type, u64 count, elements.
    size_t width = 0;
    bool is_signed = false;
    switch (kv->elem_type) {
        case GgufType::kUint8:
            width = 1;
            break;
        case GgufType::kInt8:
            width = 1;
            is_signed = true;
            break;
        case GgufType::kUint16:
            width = 2;
            break;
        case GgufType::kInt16:
            width = 2;
            is_signed = true;
            break;
        case GgufType::kUint32:
            width = 4;
            break;
        case GgufType::kInt32:
            width = 4;
            is_signed = true;
            break;
        case GgufType::kUint64:
            width = 8;
            break;
        case GgufType::kInt64:
            width = 8;
            is_signed = true;
            break;
        default:
            throw InputError(file, kv->file_offset, key, "expected an array of integers");
    }
    std::vector<uint64_t> out;
    for (uint64_t i = 0; i < kv->count; ++i) {
        uint64_t u = 0;
        std::memcpy(&u, kv->raw.data() + 12 + i * width, width);
        if (is_signed && (u >> (8 * width - 1)) & 1)
            throw InputError(file, kv->file_offset, key, fmt::format("element {} is negative", i));
        if (u > kMaxDim) throw implausible(model, *kv, u, kMaxDim);
        out.push_back(u);
    }
    return out;
}

}  // namespace

const char* kv_kind_name(KvKind k) {
    switch (k) {
        case KvKind::kMla:
            return "mla";
        case KvKind::kStandard:
            return "standard";
        case KvKind::kNone:
            break;
    }
    return "none";
}

namespace {
// One token's K (or V) row of `elements` in the cache type: ggml's row size (checked by kv_cache_figures).
uint64_t kv_row(int32_t type, uint64_t elements) {
    return elements ? ggml_row_size(type, static_cast<int64_t>(elements)).value_or(0) : 0;
}
}  // namespace

uint64_t KvFigures::bytes_per_token_per_rank(uint64_t n) const {
    if (kind != KvKind::kStandard) return bytes_per_token;
    uint64_t total = 0;
    for (uint64_t h : heads_kv_per_layer) {
        const uint64_t heads = (h + n - 1) / n;
        total += kv_row(types.k, heads * key_length) + kv_row(types.v, heads * value_length);
    }
    return total;
}

// llama.cpp's -ctk/-ctv types (common/arg.cpp, kv_cache_types), in its order.
namespace {
constexpr std::pair<const char*, int32_t> kKvCacheTypes[] = {{"f32", 0},     {"f16", 1},  {"bf16", 30},
                                                             {"q8_0", 8},    {"q4_0", 2}, {"q4_1", 3},
                                                             {"iq4_nl", 20}, {"q5_0", 6}, {"q5_1", 7}};
}  // namespace

std::optional<int32_t> parse_kv_cache_type(std::string_view name) {
    for (const auto& [n, id] : kKvCacheTypes)
        if (name == n) return id;
    return std::nullopt;
}

const char* kv_cache_type_name(int32_t type) {
    for (const auto& [n, id] : kKvCacheTypes)
        if (id == type) return n;
    return "?";
}

std::string kv_cache_type_choices() {
    std::string s;
    const size_t n = std::size(kKvCacheTypes);
    for (size_t i = 0; i < n; ++i)
        s += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") + kKvCacheTypes[i].first;
    return s;
}

KvFigures kv_cache_figures(const ShardSet& model, const KvCacheTypes& types) {
    KvFigures kv;
    kv.types = types;
    // A quantized cache stores whole blocks per row (llama.cpp refuses other head sizes).
    const auto row = [&](int32_t type, uint64_t elements, const char* option) {
        const auto b = ggml_row_size(type, static_cast<int64_t>(elements));
        if (!b)
            throw UsageError(
                fmt::format("{} {}: a KV row of {} elements is not a whole number of its blocks "
                            "({}); llama.cpp cannot use it for this model",
                            option, kv_cache_type_name(type), elements, ggml_type(type)->block_size));
        return *b;
    };
    const std::string arch = model.architecture();
    const uint64_t n_layer = bounded(model, "block_count", 0, kMaxLayers);
    // MTP blocks keep no KV cache, where the architecture's loader reads them (its table entry's flag).
    const uint64_t nextn = loader_reads(arch, ArchFlag::kNextn)
                               ? std::min(model.arch_uint(kNextnPredictLayersKey).value_or(0), n_layer)
                               : 0;
    const uint64_t decode_layers = n_layer - nextn;
    if (decode_layers == 0) return kv;

    // Which decode blocks keep a KV cache: head_count_kv 0 marks a layer without attention (llama.cpp's
    // per-layer arrays); qwen3next-style hybrids put full attention on every full_attention_interval-th
    // block and a recurrent layer elsewhere.
    const auto heads = per_layer(model, arch + ".attention.head_count", n_layer);
    auto heads_kv = per_layer(model, arch + ".attention.head_count_kv", n_layer);
    if (!heads_kv) heads_kv = heads;
    std::vector<bool> has_kv(decode_layers, true);
    if (heads_kv)
        for (uint64_t l = 0; l < decode_layers; ++l) has_kv[l] = (*heads_kv)[l] > 0;
    if (auto interval = model.arch_uint("full_attention_interval"); interval && *interval > 0)
        for (uint64_t l = 0; l < decode_layers; ++l) has_kv[l] = has_kv[l] && (l + 1) % *interval == 0;
    kv.attention_layers = static_cast<uint64_t>(std::count(has_kv.begin(), has_kv.end(), true));
    kv.stateful_layers = decode_layers - kv.attention_layers;

    // MLA caches the compressed latent (kv_lora_rank) and the shared rope key (n_rot) per token and layer,
    // in F16; the value is a view of the same cache, so nothing else is stored.
    if (const uint64_t rank = bounded(model, "attention.kv_lora_rank", 0, kMaxDim); rank > 0) {
        kv.kind = KvKind::kMla;
        kv.kv_lora_rank = rank;
        kv.rope_dims = bounded(model, "rope.dimension_count", 0, kMaxDim);
        kv.bytes_per_token = row(types.k, kv.kv_lora_rank + kv.rope_dims, llama_cpp::kv_cache_option(false)) *
                             kv.attention_layers;
        return kv;
    }
    if (!heads || kv.attention_layers == 0) {
        kv.attention_layers = 0;
        kv.stateful_layers = decode_layers;
        return kv;
    }
    kv.kind = KvKind::kStandard;
    const uint64_t embd = bounded(model, "embedding_length", 0, kMaxDim);
    uint64_t first = 0;
    while (!has_kv[first]) ++first;
    const uint64_t head_dim = (*heads)[first] ? embd / (*heads)[first] : 0;
    kv.key_length = bounded(model, "attention.key_length", head_dim, kMaxDim);
    kv.value_length = bounded(model, "attention.value_length", head_dim, kMaxDim);
    kv.heads_kv = (*heads_kv)[first];
    for (uint64_t l = 0; l < decode_layers; ++l) {
        const uint64_t h = has_kv[l] ? (*heads_kv)[l] : 0;
        kv.heads_kv_per_layer.push_back(h);
        if (h)
            kv.bytes_per_token += row(types.k, h * kv.key_length, llama_cpp::kv_cache_option(false)) +
                                  row(types.v, h * kv.value_length, llama_cpp::kv_cache_option(true));
    }
    return kv;
}

}  // namespace gguf_reap
