// Width (neuron) pruning rules (gguf_reap/width.h): which expert FFN widths a model can be cut
// to, read from the tensors themselves and from how llama.cpp's loader reads the widths (reference §5).
#include "gguf_reap/width.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "format/npz.h"
#include "gguf_reap/error.h"
#include "model/loader_ffn.h"
#include "model/shard_set.h"
#include "model/tensor_table.h"
#include "model/width_rules.h"

namespace gguf_reap {

namespace {

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

// Refuses a width cut for what the tensor at `tensor` (an index into model.tensors()) says.
[[noreturn]] void refuse(const ShardSet& model, size_t tensor, const std::string& msg) {
    const TensorRef& ref = model.tensors()[tensor];
    throw InputError(model.shards()[ref.shard].path, model.info(ref).info_offset,
                     fmt::format("tensor '{}'", model.info(ref).name), msg);
}

// The architecture, if llama.cpp's loader lets its expert width be cut alone; refuses it otherwise.
const ArchInfo& cuttable_arch(const ShardSet& model, const MoeLayout& layout) {
    const std::string& arch = layout.arch;
    const std::string& path = model.shards().front().path;
    if (layout.blocks.empty())
        throw UsageError(
            fmt::format("{} has no routed experts (architecture '{}'): there is no expert width "
                        "to cut",
                        path, arch));
    const ArchInfo* info = arch_info(arch);
    const ExpertWidthKey width_key = info ? info->width_key : ExpertWidthKey::kUnknown;
    if (width_key == ExpertWidthKey::kDenseKey)
        throw UsageError(fmt::format(
            "{}: architecture '{}' takes the expert FFN width from {}.feed_forward_length, the key its dense "
            "feed-forward layers share; gguf-reap cannot change the expert width alone",
            path, arch, arch));
    // llama4's loader sizes its shared expert as expert_feed_forward_length itself, with no count that
    // could absorb the change (`n_ff_shexp = n_ff_exp`): any K < n_ff would break the shared tensors.
    if (info && shared_width_under_cut(*info).equals_routed)
        throw UsageError(fmt::format(
            "{}: architecture '{}' sizes its shared expert with {}.expert_feed_forward_length too, so "
            "cutting the routed experts would change the shape llama.cpp expects of the shared expert",
            path, arch, arch));
    if (width_key == ExpertWidthKey::kUnknown)
        throw UsageError(
            fmt::format("{}: gguf-reap does not know how llama.cpp reads the expert FFN width of "
                        "architecture '{}', so it cannot cut it",
                        path, arch));
    return *info;
}

// The native width from every expert tensor with a width axis (tensor_table.h): ffn_down_exps rows
// are n_ff long, gate/up have n_ff rows per expert (a fused gate_up 2·n_ff), gpt-oss gate/up biases
// n_ff elements per expert (fused: 2·n_ff). Sets native_width, block_size and row_types.
void read_expert_widths(const ShardSet& model, const MoeLayout& layout, WidthRules& r) {
    int64_t lcm = 1;
    for (const MoeBlock& b : layout.blocks) {
        const ExpertTensor* down = nullptr;
        for (const auto& et : b.tensors)
            if (et.kind == &down_projection_kind()) down = &et;
        if (!down)
            refuse(model, b.tensors.front().tensor,
                   fmt::format("block {} has no ffn_down_exps.weight, so its expert FFN width is unknown",
                               b.block));
        const TensorInfo& dt = model.info(model.tensors()[down->tensor]);
        if (r.native_width == 0) r.native_width = dt.ne[0];
        if (dt.ne[0] != r.native_width)
            refuse(model, down->tensor,
                   fmt::format("rows of {} elements, but the expert FFN width of block {} is {}: "
                               "every MoE block must have the same width",
                               dt.ne[0], layout.blocks.front().block, r.native_width));
        for (const auto& et : b.tensors) {
            const TensorInfo& t = model.info(model.tensors()[et.tensor]);
            const ExpertTensorKind& kind = *et.kind;
            if (!kind.width_cut()) continue;
            // Rows become K long: they must stay whole blocks of their type.
            if (kind.width_cuts_inside_rows()) {
                lcm = std::lcm(lcm, ggml_type(t.type)->block_size);
                if (std::none_of(r.row_types.begin(), r.row_types.end(),
                                 [&](const WidthRules::RowType& x) { return x.type == t.type; }))
                    r.row_types.push_back({t.type, t.name});
            }
            if (&kind == &down_projection_kind()) continue;  // the width is defined by it
            const int64_t got = t.ne[static_cast<size_t>(kind.width_axis)];
            const int64_t want = kind.width_factor * r.native_width;
            const std::string what =
                kind.width_axis == 1
                    ? (kind.width_factor == 2 ? "rows per expert (gate then up)" : "rows per expert")
                    : "elements per expert";
            if (got != want)
                refuse(model, et.tensor,
                       fmt::format("has {} {}, but ffn_down_exps of block {} says the expert FFN "
                                   "width is {} (expected {})",
                                   got, what, b.block, r.native_width, want));
        }
    }
    r.block_size = lcm;
}

// The key llama.cpp reads the width from, which must say the native width where it is present. Sets
// width_key, width_key_present and unused_width_key.
void read_width_key(const ShardSet& model, const ArchInfo& info, WidthRules& r) {
    const std::string arch(info.name);
    const std::string& path = model.shards().front().path;
    const bool ff_key = info.width_key == ExpertWidthKey::kFfKey;
    r.width_key = arch_key(arch, ff_key ? kDenseWidthKey : kExpertWidthKey);
    const Kv* width_kv = model.find_kv(r.width_key);
    if (ff_key && !width_kv)
        throw UsageError(
            fmt::format("{}: has no {}, the key llama.cpp reads the expert FFN width of "
                        "architecture '{}' from",
                        path, r.width_key, arch));
    if (ff_key && width_kv->type == GgufType::kArray)
        throw UsageError(
            fmt::format("{}: {} is a per-layer array; gguf-reap cuts the expert width only "
                        "where it is one value",
                        path, r.width_key));
    if (ff_key && model.find_kv(arch_key(arch, kExpertWidthKey)))
        r.unused_width_key = arch_key(arch, kExpertWidthKey);
    if (const Kv* kv = width_kv) {
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
}

// The shared experts' actual width W, from ffn_down_shexp (ne0) of the MoE blocks. Sets shared_width;
// returns the first such tensor (an index into model.tensors()), nullopt without shared experts.
std::optional<size_t> read_shared_width(const ShardSet& model, const MoeLayout& layout, WidthRules& r) {
    std::optional<size_t> w_from;
    for (const MoeBlock& b : layout.blocks) {
        const TensorRef* ref = model.find_tensor(shared_expert_down_name(b.block));
        if (!ref) continue;
        const int64_t w = model.info(*ref).ne[0];
        const size_t idx = static_cast<size_t>(ref - model.tensors().data());
        if (r.shared_width != 0 && w != r.shared_width)
            refuse(model, idx,
                   fmt::format("rows of {} elements, but the shared experts of an earlier block are {} wide",
                               w, r.shared_width));
        r.shared_width = w;
        if (!w_from) w_from = idx;
    }
    return w_from;
}

// How the cut keeps the shared experts W wide: by the shared count (shared_derived) or by the own
// shared-width key, where the loader falls back to a width the cut changes. `w_from` is the first
// ffn_down_shexp (read_shared_width). Sets shared_derived, shared_count_key, shared_width_key and
// shared_width_value.
void plan_shared_width(const ShardSet& model, const MoeLayout& layout, const ArchInfo& info,
                       std::optional<size_t> w_from, WidthRules& r) {
    const std::string arch(info.name);
    const std::string& path = model.shards().front().path;
    // What the loader's shared-width rule makes of the cut (model/loader_ffn.h, where the rules are read).
    const SharedWidthUnderCut cut = shared_width_under_cut(info);
    r.shared_derived = cut.count_absorbs;
    if (r.shared_derived) r.shared_count_key = arch_key(arch, kExpertSharedCountKey);
    // The own shared-width key, where the loader falls back to a width the cut changes.
    const bool times_count = cut.own_key_times_count;
    const bool own_key_needed = cut.own_key_needed;
    const std::string own_key = arch_key(arch, kSharedWidthKey);
    const Kv* own = model.find_kv(own_key);
    // The loader's shared width (model/loader_ffn.h, the evaluator audit uses too) must be the tensors'
    // W: a model that disagrees would not load, and W / K would be computed from a wrong premise.
    if (w_from && (r.shared_derived || (own_key_needed && own))) {
        const KvLookup kv = [&](const std::string& key) { return model.find_kv(key); };
        const Derived routed{static_cast<uint64_t>(r.native_width),
                             fmt::format("{} = {}", r.width_key, r.native_width)};
        const auto want = shared_width(info, kv, routed, layout.blocks.front().block);
        if (want && want->value != static_cast<uint64_t>(r.shared_width)) {
            if (!r.shared_derived)
                throw InputError(path, own->file_offset, fmt::format("kv '{}'", own_key),
                                 fmt::format("says {} but ffn_down_shexp rows are {} wide ({} = {})",
                                             own->display(), r.shared_width, want->why, want->value));
            refuse(model, *w_from,
                   fmt::format("shared experts are {} wide, but the loader sizes them as {} = {}",
                               r.shared_width, want->why, want->value));
        }
    }
    if (own_key_needed && r.shared_width > 0 && !own) {
        uint64_t count = 1;
        if (times_count) {
            const Kv* c = model.find_kv(arch_key(arch, kExpertSharedCountKey));
            count = c && c->as_uint() ? *c->as_uint() : 0;
        }
        if (count == 0 || static_cast<uint64_t>(r.shared_width) % count != 0)
            refuse(model, *w_from,
                   fmt::format("shared experts are {} wide, not a multiple of {} = {}", r.shared_width,
                               arch_key(arch, kExpertSharedCountKey), count));
        r.shared_width_key = own_key;
        r.shared_width_value = r.shared_width / static_cast<int64_t>(count);
    }
}

}  // namespace

WidthRules width_rules(const ShardSet& model, const MoeLayout& layout) {
    // Refuse the architectures whose expert width llama.cpp does not let a cut change alone.
    const ArchInfo& info = cuttable_arch(model, layout);
    WidthRules r;
    // The native width and the block size its rows are cut in, from the expert tensors.
    read_expert_widths(model, layout, r);
    // The key llama.cpp reads it from.
    read_width_key(model, info, r);
    // The shared experts' width, and how the cut keeps it.
    const std::optional<size_t> w_from = read_shared_width(model, layout, r);
    plan_shared_width(model, layout, info, w_from, r);
    // Every K that keeps the rows whole blocks (and, where derived, the shared width a multiple of K).
    for (int64_t k = r.block_size; k <= r.native_width; k += r.block_size)
        if (!r.shared_derived || r.shared_width == 0 || r.shared_width % k == 0) r.legal.push_back(k);
    return r;
}

std::vector<WidthKv> width_kvs(const WidthRules& rules, int64_t k) {
    std::vector<WidthKv> kvs{{rules.width_key, static_cast<uint64_t>(k),
                              fmt::format("the expert FFN width becomes K = {} (the neuron plan)", k)}};
    if (rules.shared_derived && rules.shared_width > 0)
        kvs.push_back({rules.shared_count_key, static_cast<uint64_t>(rules.shared_width / k),
                       fmt::format("the shared experts stay {} wide, so the count becomes W / K = {} / {}",
                                   rules.shared_width, rules.shared_width, k)});
    if (!rules.unused_width_key.empty())
        kvs.push_back({rules.unused_width_key, static_cast<uint64_t>(k),
                       fmt::format("kept equal to the expert FFN width K = {}", k)});
    if (!rules.shared_width_key.empty())
        kvs.push_back({rules.shared_width_key, static_cast<uint64_t>(rules.shared_width_value),
                       fmt::format("the shared experts stay {} wide, which the loader would otherwise "
                                   "derive from the expert width",
                                   rules.shared_width)});
    return kvs;
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

std::variant<NeuronPlan, PartialBlock> plan_in_blocks(const NeuronPlan& plan, int64_t bs) {
    NeuronPlan units;
    units.k = plan.k / bs;
    units.expert_count = plan.expert_count;
    units.blocks = plan.blocks;
    units.channels.reserve(plan.channels.size() / static_cast<size_t>(bs));
    for (size_t bi = 0; bi < plan.blocks.size(); ++bi)
        for (int64_t e = 0; e < plan.expert_count; ++e) {
            const int32_t* r = plan.row(bi, e);  // ascending and unique: a group's channels are adjacent
            for (int64_t j = 0; j < plan.k;) {
                const int64_t q = r[j] / bs;
                int64_t n = 0;
                while (j + n < plan.k && r[j + n] / bs == q) ++n;
                if (n != bs) return PartialBlock{plan.blocks[bi], e, n, q};
                units.channels.push_back(static_cast<int32_t>(q));
                j += n;
            }
        }
    return units;
}

std::variant<std::map<int64_t, NeuronPlan>, PartialRowBlock> plan_in_row_blocks(const WidthRules& rules,
                                                                                const NeuronPlan& plan) {
    std::map<int64_t, NeuronPlan> plans;
    for (const WidthRules::RowType& rt : rules.row_types) {
        const int64_t bs = ggml_type(rt.type)->block_size;
        if (bs == 1 || plans.count(bs)) continue;
        auto units = plan_in_blocks(plan, bs);
        if (const auto* p = std::get_if<PartialBlock>(&units)) return PartialRowBlock{&rt, bs, *p};
        plans.emplace(bs, std::move(std::get<NeuronPlan>(units)));
    }
    return plans;
}

// ---- the plan file ----------------------------------------------------------------------------

namespace {

const NpyArray* find_array(const std::map<std::string, NpyArray>& m,
                           std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (auto it = m.find(n); it != m.end()) return &it->second;
    return nullptr;
}

// An id array's elements; a float or string array is bad input naming the file (to_int64's own
// UsageError knows neither the file nor the array).
std::vector<int64_t> integers(const NpyArray& a, const std::string& path, const char* name) {
    const char kind = a.descr.size() > 1 ? a.descr[1] : '?';
    if (kind != 'i' && kind != 'u' && kind != 'b')
        throw InputError(path, std::nullopt, name,
                         fmt::format("must be an integer array, found dtype '{}'", a.descr));
    return a.to_int64();
}

}  // namespace

NeuronPlan read_neuron_plan(const std::string& path, const std::vector<int>& blocks, int64_t E,
                            int64_t width) {
    return neuron_plan_from_arrays(read_npz(path), path, blocks, E, width);
}

NeuronPlan parse_neuron_plan(std::span<const uint8_t> bytes, const std::string& name,
                             const std::vector<int>& blocks, int64_t E, int64_t width) {
    return neuron_plan_from_arrays(read_npz(bytes, name), name, blocks, E, width);
}

namespace {

// The plan's [pairs, k] array of channel ids: 'channels', or else the one 2-D integer array there is.
const NpyArray& channels_array(const std::map<std::string, NpyArray>& arrays, const std::string& path) {
    const NpyArray* ch = find_array(arrays, {"channels"});
    if (!ch) {
        for (const auto& [name, a] : arrays) {
            const char kind = a.descr.size() > 1 ? a.descr[1] : '?';
            if (a.shape.size() == 2 && (kind == 'u' || kind == 'i')) {
                if (ch)
                    throw InputError(
                        path, std::nullopt, "channels",
                        "has no 'channels' array and several 2-D integer arrays: which one is the plan?");
                ch = &a;
            }
        }
    }
    if (!ch)
        throw InputError(path, std::nullopt, "channels",
                         "no [pairs, k] integer array of channel ids (expected 'channels')");
    return *ch;
}

}  // namespace

NeuronPlan neuron_plan_from_arrays(const std::map<std::string, NpyArray>& arrays, const std::string& path,
                                   const std::vector<int>& blocks, int64_t E, int64_t width) {
    const NpyArray* ch = &channels_array(arrays, path);
    if (ch->shape.size() != 2) throw InputError(path, std::nullopt, "channels", "must be 2-D [pairs, k]");
    const int64_t rows = ch->shape[0], k = ch->shape[1];
    if (k < 1) throw InputError(path, std::nullopt, "channels", "keeps no channels (k = 0)");
    // Every (block, expert) pair has exactly one row, so any other row count is wrong whatever the id
    // arrays say; checking it first also bounds k (rows × k elements were read) before k sizes anything.
    const int64_t pairs = static_cast<int64_t>(blocks.size()) * E;
    if (rows != pairs)
        throw InputError(path, std::nullopt, "channels",
                         fmt::format("has {} rows but the model has {} MoE blocks × {} experts = {}: a plan "
                                     "has one row per (block, expert) pair",
                                     rows, blocks.size(), E, pairs));
    if (width > 0 && k > width)
        throw InputError(
            path, std::nullopt, "channels",
            fmt::format("keeps {} channels per expert, more than the expert width {}", k, width));
    const std::vector<int64_t> ids = integers(*ch, path, "channels");
    const NpyArray* ba = find_array(arrays, {"block", "blocks", "block_ids"});
    const NpyArray* ea = find_array(arrays, {"expert", "experts", "expert_ids"});
    std::vector<int64_t> bid, eid;
    if (ba && ea) {
        bid = integers(*ba, path, "block");
        eid = integers(*ea, path, "expert");
        if (static_cast<int64_t>(bid.size()) != rows || static_cast<int64_t>(eid.size()) != rows)
            throw InputError(path, std::nullopt, "block/expert",
                             fmt::format("must have one entry per plan row ({})", rows));
    } else {
        // Without id arrays, rows are block-major over the MoE blocks in ascending order (the row count
        // was checked above).
        for (size_t b = 0; b < blocks.size(); ++b)
            for (int64_t e = 0; e < E; ++e) {
                bid.push_back(blocks[b]);
                eid.push_back(e);
            }
    }
    if (const NpyArray* ka = find_array(arrays, {"k"})) {
        const std::vector<int64_t> kv = integers(*ka, path, "k");
        if (kv.size() != 1 || kv[0] != k)
            throw InputError(path, std::nullopt, "k",
                             fmt::format("says {} but 'channels' has {} columns",
                                         kv.empty() ? std::string("nothing") : std::to_string(kv[0]), k));
    }
    NeuronPlan p;
    p.k = k;
    p.expert_count = E;
    p.blocks = blocks;
    p.channels.assign(blocks.size() * static_cast<size_t>(E) * static_cast<size_t>(k), -1);
    std::vector<uint8_t> seen(blocks.size() * static_cast<size_t>(E), 0);
    for (int64_t r = 0; r < rows; ++r) {
        auto it = std::lower_bound(blocks.begin(), blocks.end(), bid[static_cast<size_t>(r)]);
        if (it == blocks.end() || *it != bid[static_cast<size_t>(r)] || eid[static_cast<size_t>(r)] < 0 ||
            eid[static_cast<size_t>(r)] >= E)
            throw InputError(path, std::nullopt, fmt::format("row {}", r),
                             fmt::format("names block {} expert {}, which the model does not have",
                                         bid[static_cast<size_t>(r)], eid[static_cast<size_t>(r)]));
        const size_t b = static_cast<size_t>(it - blocks.begin());
        const size_t pair = b * static_cast<size_t>(E) + static_cast<size_t>(eid[static_cast<size_t>(r)]);
        if (seen[pair]++)
            throw InputError(path, std::nullopt, fmt::format("row {}", r),
                             fmt::format("block {} expert {} appears twice", bid[static_cast<size_t>(r)],
                                         eid[static_cast<size_t>(r)]));
        std::set<int64_t> uniq;
        for (int64_t j = 0; j < k; ++j) {
            const int64_t c = ids[static_cast<size_t>(r * k + j)];
            if (c < 0 || (width > 0 && c >= width))
                throw InputError(
                    path, std::nullopt, fmt::format("row {}", r),
                    fmt::format("channel {} is outside the expert width {} of the imatrix", c, width));
            if (!uniq.insert(c).second)
                throw InputError(path, std::nullopt, fmt::format("row {}", r),
                                 fmt::format("channel {} is listed twice", c));
            p.channels[pair * static_cast<size_t>(k) + static_cast<size_t>(j)] = static_cast<int32_t>(c);
        }
    }
    for (size_t pair = 0; pair < seen.size(); ++pair)
        if (!seen[pair])
            throw InputError(
                path, std::nullopt, "channels",
                fmt::format("has no row for block {} expert {}", blocks[pair / static_cast<size_t>(E)],
                            pair % static_cast<size_t>(E)));
    for (size_t pair = 0; pair < seen.size(); ++pair)
        std::sort(p.channels.begin() + static_cast<std::ptrdiff_t>(pair * static_cast<size_t>(k)),
                  p.channels.begin() + static_cast<std::ptrdiff_t>((pair + 1) * static_cast<size_t>(k)));
    return p;
}

}  // namespace gguf_reap
