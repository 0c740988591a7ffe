// Reading width-pruning plans (ops/neuron_plan.h).
#include "ops/neuron_plan.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "io/error.h"
#include "ops/npz.h"

namespace gguf_reap {

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
    const auto arrays = read_npz(path);
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
