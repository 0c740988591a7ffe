// The loader's FFN rules (model/loader_ffn.h), evaluated from the architecture table's columns.
#include "model/loader_ffn.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "format/le_bytes.h"

namespace gguf_reap {

namespace {

struct Keys {
    std::string_view arch;
    const KvLookup& kv;

    std::string name(std::string_view suffix) const { return arch_key(arch, suffix); }
    const Kv* find(std::string_view suffix) const { return kv(name(suffix)); }
    std::optional<uint64_t> uint(std::string_view suffix) const {
        const Kv* k = find(suffix);
        return k ? k->as_uint() : std::nullopt;
    }
    // "<key> = <value>", or "<key> absent".
    std::string said(std::string_view suffix) const {
        const Kv* k = find(suffix);
        return k ? fmt::format("{} = {}", name(suffix), k->display())
                 : fmt::format("{} absent", name(suffix));
    }
};

// Element `i` of an integer array KV; nullopt when it is not one or has no such element.
std::optional<uint64_t> array_element(const Kv& kv, size_t i) {
    if (kv.type != GgufType::kArray || i >= kv.count) return std::nullopt;
    const size_t size = gguf_scalar_size(kv.elem_type);
    const size_t at = 12 + i * size;  // element type (4 bytes) and count (8 bytes) come first
    if (size == 0 || at + size > kv.raw.size()) return std::nullopt;
    const uint8_t* p = kv.raw.data() + at;
    switch (kv.elem_type) {
        case GgufType::kUint32:
            return le::load_le<uint32_t>(p);
        case GgufType::kInt32: {
            const int32_t v = le::load_le<int32_t>(p);
            return v < 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(v));
        }
        case GgufType::kUint64:
            return le::load_le<uint64_t>(p);
        case GgufType::kUint16:
            return le::load_le<uint16_t>(p);
        default:
            return std::nullopt;
    }
}

std::string shape(const TensorInfo& t) {
    std::string s;
    for (uint32_t d = 0; d < t.n_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", t.ne[d]);
    return "{" + s + "}";
}

// `t`'s shape with ne[axis] = v.
std::string shape_with(const TensorInfo& t, int axis, uint64_t v) {
    TensorInfo u = t;
    u.ne[static_cast<size_t>(axis)] = static_cast<int64_t>(v);
    return shape(u);
}

void required_keys(const ArchInfo& info, const Keys& k, std::vector<FfnMismatch>& out) {
    auto need = [&](std::string_view suffix, bool positive, std::string_view what) {
        const Kv* kv = k.find(suffix);
        if (!kv)
            out.push_back(
                {"", k.name(suffix), fmt::format("is absent: llama.cpp's {} loader {}", info.name, what)});
        else if (positive && kv->as_uint().value_or(0) == 0)
            out.push_back(
                {"", k.name(suffix),
                 fmt::format("is {}: llama.cpp's {} loader requires it > 0", kv->display(), info.name)});
    };
    if (info.width_key == ExpertWidthKey::kExpertKey || info.width_key == ExpertWidthKey::kExpertKeyZeroIsFf)
        need(kExpertWidthKey, false, "requires it (the routed experts' width)");
    if ((info.width_key == ExpertWidthKey::kFfKey || info.width_key == ExpertWidthKey::kDenseKey) &&
        k.uint(kExpertCountKey).value_or(0) > 0)
        need(kDenseWidthKey, false, "sizes the routed experts with it, and without it as 0 wide");
    for (const RequiredKey& r : info.required_keys) need(r.suffix, r.positive, "requires it");
}

// The FFN tensors of one block.
struct Block {
    std::vector<const TensorInfo*> dense;    // ffn_gate / ffn_up / ffn_down .weight
    std::vector<const TensorInfo*> experts;  // routed expert weights and routers
    std::vector<const TensorInfo*> shared;   // ffn_{gate,up,down}_shexp.weight
    std::vector<const TensorInfo*> chunks;   // grovemoe's ffn_*_chexps.weight
    const TensorInfo* hash_table = nullptr;  // deepseek4's ffn_gate_tid2eid.weight
};

// Whether the keys make block `b` an MoE block, and which key says so; nullopt where no key decides.
std::optional<std::pair<bool, std::string>> moe_by_keys(const ArchInfo& info, const Keys& k, int b) {
    const auto ub = static_cast<uint64_t>(b);
    switch (info.moe_blocks) {
        case MoeBlocks::kLeadingDense: {
            const uint64_t lead = k.uint(kLeadingDenseBlockCountKey).value_or(0);
            return std::make_pair(ub >= lead, k.said(kLeadingDenseBlockCountKey));
        }
        case MoeBlocks::kEveryN: {
            const uint64_t n = k.uint(kMoeEveryNLayersKey).value_or(0);
            return std::make_pair(n > 0 && ub % n == 1, k.said(kMoeEveryNLayersKey));
        }
        case MoeBlocks::kInterleave: {
            const uint64_t n = k.uint(kInterleaveMoeStepKey).value_or(0);
            return std::make_pair(n > 0 && (ub + 1) % n == 0, k.said(kInterleaveMoeStepKey));
        }
        case MoeBlocks::kFromTensors:
            return std::nullopt;
    }
    return std::nullopt;
}

class Checker {
  public:
    Checker(const ArchInfo& info, const KvLookup& kv, std::vector<FfnMismatch>& out)
        : info_(info), k_{info.name, kv}, out_(out) {}

    void block(int b, const Block& t) {
        if (const auto moe = moe_by_keys(info_, k_, b); moe && k_.uint(kExpertCountKey).value_or(0) > 0) {
            if (moe->first && t.experts.empty() && !t.dense.empty())
                add(*t.dense.front(),
                    fmt::format(
                        "has shape {}: block {} has a dense FFN and no routed experts, but {} makes it "
                        "an MoE block (llama.cpp requires blk.{}.ffn_gate_inp.weight there)",
                        shape(*t.dense.front()), b, moe->second, b));
            if (!moe->first && !t.experts.empty())
                add(*t.experts.front(),
                    fmt::format("has shape {}: block {} holds routed experts, but {} makes it a dense block "
                                "(llama.cpp requires blk.{}.ffn_down.weight there and no expert tensors)",
                                shape(*t.experts.front()), b, moe->second, b));
        }
        if (info_.has(ArchFlag::kFfLayerPattern)) {
            const Derived ff = dense_width(info_.name, k_.kv, b);
            const TensorInfo* any = !t.experts.empty() ? t.experts.front()
                                    : !t.dense.empty() ? t.dense.front()
                                                       : nullptr;
            if (any && ff.value == 0)
                add(*any,
                    fmt::format("has shape {}: block {} has an FFN, but {} makes it a Mamba block without "
                                "one (llama.cpp looks for blk.{}.ssm_in.weight there)",
                                shape(*any), b, ff.why, b));
        }
        if (info_.dense_ff) {
            const Derived ff = dense_width(info_.name, k_.kv, b);
            for (const TensorInfo* d : t.dense) width(*d, axis_of(*d), ff, "the dense FFN");
        }
        if (!t.shared.empty())
            if (const auto sh = shared_width(info_, k_.kv, routed_width(info_, k_.kv, b), b))
                for (const TensorInfo* s : t.shared) width(*s, axis_of(*s), *sh, "the shared experts");
        if (info_.has(ArchFlag::kChunkExperts)) chunk_experts(t);
        if (info_.has(ArchFlag::kHashRouting)) hash_routing(b, t);
    }

  private:
    // Where a gate/up/down weight holds its FFN channels: a down matrix along ne[0], gate and up ne[1].
    static int axis_of(const TensorInfo& t) { return t.name.find("_down") != std::string::npos ? 0 : 1; }

    void width(const TensorInfo& t, int axis, const Derived& want, std::string_view what) {
        const int64_t got = t.ne[static_cast<size_t>(axis)];
        if (static_cast<uint64_t>(got) == want.value) return;
        if (want.value == 0)
            add(t, fmt::format(
                       "has shape {}: the loader creates no {} here ({}), so llama.cpp refuses the tensor",
                       shape(t), what, want.why));
        else
            add(t, fmt::format("has shape {}: ne[{}] is {}, but {} makes {} {} wide, shape {}", shape(t),
                               axis, got, want.why, what, want.value, shape_with(t, axis, want.value)));
    }

    void chunk_experts(const Block& t) {
        const Derived w = [&] {
            if (const auto v = k_.uint(kChunkWidthKey); v && *v > 0)
                return Derived{*v, k_.said(kChunkWidthKey)};
            // The fallback is the attention head width n_embd_head_k.
            if (const auto v = k_.uint(kHeadKeyLengthKey); v && *v > 0)
                return Derived{*v, fmt::format("{} (no {}) gives {}", k_.said(kHeadKeyLengthKey),
                                               k_.name(kChunkWidthKey), *v)};
            const uint64_t embd = k_.uint(kEmbeddingLengthKey).value_or(0),
                           heads = k_.uint(kHeadCountKey).value_or(0);
            return Derived{heads ? embd / heads : 0,
                           fmt::format("{} / {} (no {})", k_.said(kEmbeddingLengthKey),
                                       k_.said(kHeadCountKey), k_.name(kChunkWidthKey))};
        }();
        const uint64_t e = k_.uint(kExpertCountKey).value_or(0),
                       per = k_.uint(kExpertsPerGroupKey).value_or(0);
        const Derived n{per ? e / per : 0,
                        fmt::format("{} / {}", k_.said(kExpertCountKey), k_.said(kExpertsPerGroupKey))};
        for (const TensorInfo* c : t.chunks) {
            width(*c, axis_of(*c), w, "the chunk experts");
            if (per && static_cast<uint64_t>(c->ne[2]) != n.value)
                add(*c, fmt::format("has shape {}: ne[2] is {} chunk experts, but {} makes {}, shape {}",
                                    shape(*c), c->ne[2], n.why, n.value, shape_with(*c, 2, n.value)));
        }
    }

    void hash_routing(int b, const Block& t) {
        const uint64_t hash = k_.uint(kHashLayerCountKey).value_or(0);
        const bool hashed = static_cast<uint64_t>(b) < hash;
        if (t.hash_table && !hashed)
            add(*t.hash_table,
                fmt::format(
                    "has shape {}: block {} is not hash-routed ({}), so llama.cpp refuses its token → "
                    "expert table",
                    shape(*t.hash_table), b, k_.said(kHashLayerCountKey)));
        if (!t.hash_table && hashed && !t.experts.empty())
            add(*t.experts.front(),
                fmt::format(
                    "has shape {}: block {} has no ffn_gate_tid2eid.weight, but {} makes it hash-routed",
                    shape(*t.experts.front()), b, k_.said(kHashLayerCountKey)));
        if (t.hash_table && hashed) {
            const uint64_t used = k_.uint(kExpertUsedCountKey).value_or(0);
            if (static_cast<uint64_t>(t.hash_table->ne[0]) != used)
                add(*t.hash_table,
                    fmt::format(
                        "has shape {}: ne[0] is {}, but {} makes the token → expert table {} wide, shape {}",
                        shape(*t.hash_table), t.hash_table->ne[0], k_.said(kExpertUsedCountKey), used,
                        shape_with(*t.hash_table, 0, used)));
        }
    }

    void add(const TensorInfo& t, std::string message) { out_.push_back({t.name, "", std::move(message)}); }

    const ArchInfo& info_;
    Keys k_;
    std::vector<FfnMismatch>& out_;
};

}  // namespace

Derived dense_width(std::string_view arch, const KvLookup& kv, int block) {
    const Keys k{arch, kv};
    const Kv* ff = k.find(kDenseWidthKey);
    if (!ff) return {0, k.said(kDenseWidthKey)};
    if (ff->type == GgufType::kArray) {
        const auto v = array_element(*ff, static_cast<size_t>(block));
        return {v.value_or(0), fmt::format("{}[{}] = {}", k.name(kDenseWidthKey), block,
                                           v ? fmt::format("{}", *v) : std::string("(none)"))};
    }
    return {ff->as_uint().value_or(0), k.said(kDenseWidthKey)};
}

std::optional<Derived> routed_width(const ArchInfo& info, const KvLookup& kv, int block) {
    const Keys k{info.name, kv};
    const Kv* ff = k.find(kDenseWidthKey);
    const bool array = ff && ff->type == GgufType::kArray;
    const bool has_ff =
        ff && (array ? block >= 0 && array_element(*ff, static_cast<size_t>(block)) : ff->as_uint());
    const uint64_t n_ff = !has_ff ? 0
                          : array ? *array_element(*ff, static_cast<size_t>(block))
                                  : *ff->as_uint();
    const std::string ff_said =
        array ? fmt::format("{}[{}] = {}", k.name(kDenseWidthKey), block, n_ff) : k.said(kDenseWidthKey);
    switch (info.width_key) {
        case ExpertWidthKey::kFfKey:
        case ExpertWidthKey::kDenseKey:
            if (!has_ff) return std::nullopt;
            return Derived{n_ff, ff_said};
        case ExpertWidthKey::kExpertKey:
        case ExpertWidthKey::kExpertKeyOrFf:
        case ExpertWidthKey::kExpertKeyOrWholeFf:
        case ExpertWidthKey::kExpertKeyZeroIsFf:
            break;
        case ExpertWidthKey::kUnknown:
            return std::nullopt;
    }
    const Kv* own = k.find(kExpertWidthKey);
    if (own && own->type == GgufType::kArray) return std::nullopt;
    const uint64_t v = own ? own->as_uint().value_or(0) : 0;
    const bool required =
        info.width_key == ExpertWidthKey::kExpertKey || info.width_key == ExpertWidthKey::kExpertKeyZeroIsFf;
    if (!own && required) return std::nullopt;  // the loader refuses the file before any tensor
    if (v > 0 || info.width_key == ExpertWidthKey::kExpertKey) return Derived{v, k.said(kExpertWidthKey)};
    if (!has_ff) return std::nullopt;
    if (info.width_key == ExpertWidthKey::kExpertKeyOrWholeFf)
        return Derived{n_ff, fmt::format("{} ({})", ff_said, k.said(kExpertWidthKey))};
    const uint64_t used = k.uint(kExpertUsedCountKey).value_or(0);
    if (used == 0) return std::nullopt;
    return Derived{n_ff / used, fmt::format("{} / {} ({})", ff_said, k.said(kExpertUsedCountKey),
                                            k.said(kExpertWidthKey))};
}

std::optional<Derived> shared_width(const ArchInfo& info, const KvLookup& kv,
                                    const std::optional<Derived>& routed_w, int block) {
    const Keys k{info.name, kv};
    const uint64_t routed = routed_w ? routed_w->value : 0;
    const std::optional<uint64_t> count_key = k.uint(kExpertSharedCountKey);
    const uint64_t own = k.uint(kSharedWidthKey).value_or(0);
    const std::string count_said = k.said(kExpertSharedCountKey), own_said = k.said(kSharedWidthKey);
    const std::string rw = routed_w ? routed_w->why : std::string();
    // The count as the loader reads it (SharedCount), and how the sentence says it.
    uint64_t count = count_key.value_or(0);
    std::string count_term = count_said;
    bool defaulted = false;
    switch (info.shared_count) {
        case SharedCount::kAsRead:
            break;
        case SharedCount::kAtLeastOne:
            count = std::max<uint64_t>(count, 1);
            count_term = fmt::format("max({}, 1)", count_said);
            break;
        case SharedCount::kDefaultOne:
            if (!count_key) {
                count = 1;
                count_term = "1 (default)";
                defaulted = true;
            }
            break;
        case SharedCount::kGatesShared:
            if (count == 0) return Derived{0, count_said};
            break;
    }
    auto times = [&](std::string_view note) {
        return Derived{routed * count, fmt::format("{} × {}{}", rw, count_term, defaulted ? "" : note)};
    };
    if (own > 0) {
        switch (info.shared_width) {
            case SharedWidthRule::kOwnKey:
            case SharedWidthRule::kOwnKeyElseWidthTimesCount:
            case SharedWidthRule::kOwnKeyElseWidth:
            case SharedWidthRule::kOwnKeyElseFf:
                return Derived{own, own_said};
            case SharedWidthRule::kOwnKeyOrWidthTimesCount:
                return Derived{own * count, fmt::format("{} × {}", own_said, count_term)};
            default:
                break;
        }
    }
    if (info.shared_width == SharedWidthRule::kFromTensors) return std::nullopt;
    if (info.shared_width == SharedWidthRule::kOwnKey) return Derived{0, own_said};
    if (info.shared_width == SharedWidthRule::kOwnKeyElseFf) {
        const Derived ff = dense_width(info.name, kv, block);
        return Derived{ff.value, fmt::format("{} ({})", ff.why, own_said)};
    }
    if (!routed_w) return std::nullopt;
    switch (info.shared_width) {
        case SharedWidthRule::kWidthTimesCount:
            return times("");
        case SharedWidthRule::kEqualsWidth:
            return Derived{routed, rw};
        case SharedWidthRule::kOwnKeyOrWidthTimesCount:
        case SharedWidthRule::kOwnKeyElseWidthTimesCount:
            return times(fmt::format(" ({})", own_said));
        case SharedWidthRule::kOwnKeyElseWidth:
            return Derived{routed, fmt::format("{} ({})", rw, own_said)};
        default:
            return std::nullopt;
    }
}

SharedWidthUnderCut shared_width_under_cut(const ArchInfo& info) {
    SharedWidthUnderCut c;
    switch (info.shared_width) {
        case SharedWidthRule::kFromTensors:
        case SharedWidthRule::kOwnKey:
            break;
        case SharedWidthRule::kWidthTimesCount:
            c.count_absorbs = true;
            break;
        case SharedWidthRule::kEqualsWidth:
            c.equals_routed = true;
            break;
        case SharedWidthRule::kOwnKeyOrWidthTimesCount:
            c.own_key_times_count = true;
            c.own_key_needed = true;
            break;
        case SharedWidthRule::kOwnKeyElseWidthTimesCount:
        case SharedWidthRule::kOwnKeyElseWidth:
            c.own_key_needed = true;
            break;
        case SharedWidthRule::kOwnKeyElseFf:
            // The fallback is feed_forward_length, which a cut changes only where it is the expert width.
            c.own_key_needed = info.width_key == ExpertWidthKey::kFfKey;
            break;
    }
    return c;
}

std::vector<FfnMismatch> check_loader_ffn(const ArchInfo& info, const KvLookup& kv,
                                          std::span<const TensorInfo* const> tensors) {
    std::map<int, Block> blocks;
    for (const TensorInfo* t : tensors) {
        const auto split = split_block_name(t->name);
        if (!split || split->first < 0) continue;
        const std::string_view rest = split->second;
        Block& b = blocks[split->first];
        if (rest == "ffn_gate.weight" || rest == "ffn_up.weight" || rest == "ffn_down.weight")
            b.dense.push_back(t);
        else if (shared_expert_width_axis(rest))
            b.shared.push_back(t);
        else if (is_chunk_expert_tensor(t->name))
            b.chunks.push_back(t);
        else if (is_hash_routing_table(t->name))
            b.hash_table = t;
        else if (const ExpertTensorKind* kind = classify_block_tensor(info.name, rest).expert;
                 kind && (kind->is_weight() || kind->role == ExpertRole::kRouter))
            b.experts.push_back(t);
    }
    std::vector<FfnMismatch> out;
    required_keys(info, Keys{info.name, kv}, out);
    Checker check(info, kv, out);
    for (const auto& [b, t] : blocks) check.block(b, t);
    return out;
}

}  // namespace gguf_reap
