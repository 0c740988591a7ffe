// Width (neuron) pruning rules (model/width.h): which expert FFN widths a model can be cut
// to, read from the tensors themselves and from how llama.cpp's loader reads the widths (reference §5).
#include "model/width.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "io/error.h"

namespace gguf_reap {

namespace {

// Architectures whose loader reads the routed-expert width from <arch>.expert_feed_forward_length
// (required for most; qwen2moe/qwen3moe/qwen3next/qwen35moe fall back to feed_forward_length /
// expert_used_count when it is absent).
bool has_expert_width_key(std::string_view arch) {
    static constexpr std::array<std::string_view, 10> kArchs{
        "deepseek", "deepseek2", "deepseek32", "glm4moe",   "glm-dsa",
        "gpt-oss",  "qwen2moe",  "qwen3moe",   "qwen3next", "qwen35moe"};
    return std::find(kArchs.begin(), kArchs.end(), arch) != kArchs.end() || arch.substr(0, 5) == "kimi-";
}

// Architectures whose loader sizes the shared experts as expert_feed_forward_length ×
// expert_shared_count: cutting K changes the shared tensors' expected shape unless the count follows.
bool derives_shared_width(std::string_view arch) {
    static constexpr std::array<std::string_view, 5> kArchs{"deepseek", "deepseek2", "deepseek32", "glm4moe",
                                                            "glm-dsa"};
    return std::find(kArchs.begin(), kArchs.end(), arch) != kArchs.end() || arch.substr(0, 5) == "kimi-";
}

// Architectures that take the expert width from feed_forward_length, the key dense FFNs use too.
bool uses_dense_width_key(std::string_view arch) {
    return arch == "llama" || arch == "olmoe";
}

bool is_gate_or_up_bias(const std::string& name) {
    return name.size() > 5 && name.substr(name.size() - 5) == ".bias" &&
           (name.find(".ffn_gate_exps.") != std::string::npos ||
            name.find(".ffn_up_exps.") != std::string::npos);
}

// "{256, 512, 768}" for short lists; long ones (block size 1 gives every integer up to n_ff) show both
// ends and say what the rule is.
std::string legal_list(const WidthRules& r) {
    const auto& v = r.legal;
    if (v.size() <= 24) return fmt::format("{{{}}}", fmt::join(v, ", "));
    std::vector<int64_t> head(v.begin(), v.begin() + 4), tail(v.end() - 2, v.end());
    std::string s =
        fmt::format("{{{}, …, {}}} ({} values", fmt::join(head, ", "), fmt::join(tail, ", "), v.size());
    if (r.shared_width == 0 || !r.shared_derived)
        s += r.block_size == 1 ? fmt::format(": every width up to {}", r.native_width)
                               : fmt::format(": every multiple of {} up to {}", r.block_size, r.native_width);
    return s + ")";
}

}  // namespace

WidthRules width_rules(const ShardSet& model, const MoeLayout& layout) {
    WidthRules r;
    const std::string& arch = layout.arch;
    const std::string& path = model.shards().front().path;
    if (layout.blocks.empty())
        throw UsageError(
            fmt::format("{} has no routed experts (architecture '{}'): there is no expert width "
                        "to cut",
                        path, arch));
    if (uses_dense_width_key(arch))
        throw UsageError(fmt::format(
            "{}: architecture '{}' takes the expert FFN width from {}.feed_forward_length, the key its dense "
            "feed-forward layers share; gguf-reap cannot change the expert width alone",
            path, arch, arch));
    // llama4's loader sizes its shared expert as expert_feed_forward_length itself, with no count that
    // could absorb the change (`n_ff_shexp = n_ff_exp`): any K < n_ff would break the shared tensors.
    if (arch == "llama4")
        throw UsageError(fmt::format(
            "{}: architecture 'llama4' sizes its shared expert with {}.expert_feed_forward_length too, so "
            "cutting the routed experts would change the shape llama.cpp expects of the shared expert",
            path, arch));
    if (!has_expert_width_key(arch))
        throw UsageError(
            fmt::format("{}: gguf-reap does not know how llama.cpp reads the expert FFN width of "
                        "architecture '{}', so it cannot cut it",
                        path, arch));

    // The native width from every expert weight: ffn_down_exps rows are n_ff long, gate/up have n_ff
    // rows per expert (a fused gate_up 2·n_ff), gpt-oss gate/up biases n_ff elements per expert.
    auto refuse = [&](size_t tensor, const std::string& msg) {
        const TensorRef& ref = model.tensors()[tensor];
        throw InputError(model.shards()[ref.shard].path, model.info(ref).info_offset,
                         fmt::format("tensor '{}'", model.info(ref).name), msg);
    };
    int64_t lcm = 1;
    for (const MoeBlock& b : layout.blocks) {
        const ExpertTensor* down = nullptr;
        for (const auto& et : b.tensors)
            if (et.role == ExpertRole::kDownExps) down = &et;
        if (!down)
            refuse(b.tensors.front().tensor,
                   fmt::format("block {} has no ffn_down_exps.weight, so its expert FFN width is unknown",
                               b.block));
        const TensorInfo& dt = model.info(model.tensors()[down->tensor]);
        if (r.native_width == 0) r.native_width = dt.ne[0];
        if (dt.ne[0] != r.native_width)
            refuse(down->tensor,
                   fmt::format("rows of {} elements, but the expert FFN width of block {} is {}: "
                               "every MoE block must have the same width",
                               dt.ne[0], layout.blocks.front().block, r.native_width));
        for (const auto& et : b.tensors) {
            const TensorInfo& t = model.info(model.tensors()[et.tensor]);
            int64_t got = -1, want = r.native_width;
            std::string what;
            if (et.role == ExpertRole::kGateExps || et.role == ExpertRole::kUpExps) {
                got = t.ne[1], what = "rows per expert";
            } else if (et.role == ExpertRole::kGateUpExps) {
                got = t.ne[1], want = 2 * r.native_width, what = "rows per expert (gate then up)";
            } else if (et.role == ExpertRole::kDownExps) {
                lcm = std::lcm(lcm, ggml_type(t.type)->block_size);
            } else if (et.role == ExpertRole::kExpsBias && is_gate_or_up_bias(et.name)) {
                got = t.ne[0], what = "elements per expert";
                lcm = std::lcm(lcm, ggml_type(t.type)->block_size);
            }
            if (got >= 0 && got != want)
                refuse(et.tensor, fmt::format("has {} {}, but ffn_down_exps of block {} says the expert FFN "
                                              "width is {} (expected {})",
                                              got, what, b.block, r.native_width, want));
        }
    }
    r.block_size = lcm;

    r.width_key = arch + ".expert_feed_forward_length";
    if (const Kv* kv = model.find_kv(r.width_key)) {
        const auto v = kv->as_uint();
        if (!v)
            throw InputError(path, kv->file_offset, fmt::format("kv '{}'", r.width_key),
                             fmt::format("must be an unsigned integer (llama.cpp reads a u32), found {} {}",
                                         gguf_type_name(kv->type), kv->display()));
        if (*v != static_cast<uint64_t>(r.native_width))
            throw InputError(path, kv->file_offset, fmt::format("kv '{}'", r.width_key),
                             fmt::format("says {} but ffn_down_exps rows are {} wide", *v, r.native_width));
        r.width_key_present = true;
    }

    // The shared experts' actual width W, from ffn_down_shexp (ne0) of the MoE blocks.
    std::optional<size_t> w_from;
    for (const MoeBlock& b : layout.blocks) {
        const TensorRef* ref = model.find_tensor(fmt::format("blk.{}.ffn_down_shexp.weight", b.block));
        if (!ref) continue;
        const int64_t w = model.info(*ref).ne[0];
        const size_t idx = static_cast<size_t>(ref - model.tensors().data());
        if (r.shared_width != 0 && w != r.shared_width)
            refuse(idx,
                   fmt::format("rows of {} elements, but the shared experts of an earlier block are {} wide",
                               w, r.shared_width));
        r.shared_width = w;
        if (!w_from) w_from = idx;
    }
    r.shared_derived = derives_shared_width(arch);
    if (r.shared_derived) {
        r.shared_count_key = arch + ".expert_shared_count";
        const Kv* kv = model.find_kv(r.shared_count_key);
        const uint64_t count = kv && kv->as_uint() ? *kv->as_uint() : 0;
        // The loader sizes the shared tensors as n_ff × count (kimi-*: × max(count, 1)); a model that
        // disagrees would not load, and the W / K rule would be computed from a wrong premise.
        const uint64_t expect = static_cast<uint64_t>(r.native_width) *
                                (arch.substr(0, 5) == "kimi-" ? std::max<uint64_t>(count, 1) : count);
        if (w_from && static_cast<uint64_t>(r.shared_width) != expect)
            refuse(*w_from,
                   fmt::format("shared experts are {} wide, but {} × {} = {} ({} × {})", r.shared_width,
                               r.width_key, r.shared_count_key, expect, r.native_width, count));
    }

    for (int64_t k = r.block_size; k <= r.native_width; k += r.block_size)
        if (!r.shared_derived || r.shared_width == 0 || r.shared_width % k == 0) r.legal.push_back(k);
    return r;
}

void check_width(const WidthRules& rules, int64_t k, const std::string& model_name) {
    std::string reason;
    if (k < 1)
        reason = "an expert keeps at least one channel";
    else if (k > rules.native_width)
        reason = fmt::format("it exceeds the native expert width {}", rules.native_width);
    else if (k % rules.block_size != 0)
        reason = fmt::format(
            "rows of ffn_down_exps hold whole blocks of {} elements, so K must be a multiple of {}",
            rules.block_size, rules.block_size);
    else if (rules.shared_derived && rules.shared_width != 0 && rules.shared_width % k != 0)
        reason = fmt::format(
            "the loader sizes the shared experts as {} × {}, so {} must become W / K = {} / {}, "
            "which is not a whole number",
            rules.width_key, rules.shared_count_key, rules.shared_count_key, rules.shared_width, k);
    if (reason.empty()) return;
    throw UsageError(fmt::format("K = {} is not a legal expert width for {}: {}; legal widths are {}", k,
                                 model_name, reason, legal_list(rules)));
}

}  // namespace gguf_reap
