// rank's --model (rank_model.h).
#include "ops/rank/rank_model.h"

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "model/keeplist_file.h"
#include "model/tensor_table.h"

namespace gguf_reap {

namespace {

// deepseek4's hash-routed blocks: how many (token, slot) entries of each one's token → expert table
// name each expert (services/hash_routing.h).
std::map<int, std::vector<uint64_t>> count_hash_entries(const ShardSet& set, const MoeLayout& L) {
    std::map<int, std::vector<uint64_t>> entries;
    for (const auto& b : L.blocks) {
        if (!b.hash_table) continue;
        const TensorRef& r = set.tensors()[*b.hash_table];
        std::vector<int32_t> ids(r.nbytes / 4);
        set.shards()[r.shard].file->read(r.abs_offset, ids.data(), 4 * ids.size());
        auto& count = entries[b.block];
        count.assign(L.expert_count, 0);
        for (size_t i = 0; i < ids.size(); ++i) {
            if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= L.expert_count)
                throw InputError(set.shards()[r.shard].path, r.abs_offset + 4 * i,
                                 fmt::format("tensor '{}' entry {}", set.info(r).name, i),
                                 fmt::format("expert id {} is outside 0..{}", ids[i], L.expert_count - 1));
            ++count[static_cast<size_t>(ids[i])];
        }
    }
    return entries;
}

}  // namespace

RankModel read_rank_model(const std::string& path, bool down_needed) {
    RankModel model;
    model.path = path;
    model.set.emplace(ShardSet::open(path));
    model.layout = build_moe_layout(*model.set);
    const MoeLayout& L = model.layout;
    if (L.blocks.empty())
        throw UsageError(
            fmt::format("{}: the model has no MoE blocks (no {}.expert_count or no expert tensors): "
                        "there are no experts to rank",
                        path, L.arch.empty() ? "<arch>" : L.arch));
    if (const Kv* n = model.set->find_kv("general.name"))
        if (const auto s = n->as_string()) model.name = *s;
    for (const auto& b : L.blocks) {
        model.blocks.push_back(b.block);
        if (L.is_nextn_block(b.block)) model.nextn_blocks.push_back(b.block);
        for (const auto& t : b.tensors)
            if (t.kind == &down_projection_kind()) model.down[b.block] = &model.set->tensors()[t.tensor];
        if (!model.down.count(b.block) && down_needed)
            throw UsageError(
                fmt::format("{}: MoE block {} has no ffn_down_exps.weight, the tensor whose imatrix "
                            "entry rank reads",
                            path, b.block));
    }
    model.hash_entries = count_hash_entries(*model.set, L);
    model.source = keeplist_source_of(*model.set, L);
    return model;
}

}  // namespace gguf_reap
