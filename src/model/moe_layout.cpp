#include "model/moe_layout.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gguf_reap/error.h"

namespace gguf_reap {

namespace {

std::string shape_str(const TensorInfo& t) {
    return fmt::format("{{{}, {}, {}, {}}}", t.ne[0], t.ne[1], t.ne[2], t.ne[3]);
}

}  // namespace

const MoeBlock* MoeLayout::find_block(int block) const {
    for (const auto& b : blocks)
        if (b.block == block) return &b;
    return nullptr;
}

bool MoeLayout::is_expert_tensor(size_t tensor) const {
    for (const auto& b : blocks)
        for (const auto& t : b.tensors)
            if (t.tensor == tensor) return true;
    return false;
}

bool MoeLayout::is_nextn_block(int block) const {
    return nextn_predict_layers > 0 && block_count >= nextn_predict_layers && block >= 0 &&
           static_cast<uint64_t>(block) >= block_count - nextn_predict_layers;
}

MoeLayout build_moe_layout(const ShardSet& model) {
    MoeLayout L;
    L.arch = model.architecture();
    const Shard& first = model.shards().front();
    auto uint_key = [&](std::string_view suffix) -> uint64_t {
        const std::string key = arch_key(L.arch, suffix);
        const Kv* kv = model.find_kv(key);
        if (!kv) return 0;
        auto v = kv->as_uint();
        if (!v)
            throw InputError(first.path, kv->file_offset, fmt::format("kv '{}'", key),
                             fmt::format("must be a non-negative integer, found {} {}",
                                         gguf_type_name(kv->type), kv->display()));
        return *v;
    };
    // What the loader of a listed architecture reads beyond the generic keys, its flags say (MTP blocks,
    // token → expert tables, chunk experts): a key or tensor of that kind in another architecture's file
    // is one its loader never looks at. An architecture the table does not list is read by the generic
    // rules: every such key and tensor name counts.
    const ArchInfo* info = arch_info(L.arch);
    auto loader_reads = [&](uint8_t flag) { return info == nullptr || info->has(flag); };
    const bool reads_nextn = loader_reads(ArchFlag::kNextn);
    const bool reads_hash_tables = loader_reads(ArchFlag::kHashRouting);
    const bool reads_chunk_experts = loader_reads(ArchFlag::kChunkExperts);
    L.expert_count = uint_key(kExpertCountKey);
    L.expert_used_count = uint_key(kExpertUsedCountKey);
    L.expert_shared_count = uint_key(kExpertSharedCountKey);
    L.expert_group_count = uint_key(kExpertGroupCountKey);
    L.expert_group_used_count = uint_key(kExpertGroupUsedCountKey);
    L.leading_dense_block_count = uint_key(kLeadingDenseBlockCountKey);
    L.block_count = uint_key(kBlockCountKey);
    L.nextn_predict_layers = reads_nextn ? uint_key(kNextnPredictLayersKey) : 0;

    // llama.cpp asserts both at load time (reference §5.4); everything downstream (keeplist checks,
    // per-group counts) relies on them, so a model that breaks them is refused here, by name.
    auto refuse_kv = [&](std::string_view suffix, const std::string& msg) {
        const std::string key = arch_key(L.arch, suffix);
        throw InputError(first.path, model.find_kv(key)->file_offset, fmt::format("kv '{}'", key), msg);
    };
    if (L.expert_used_count > L.expert_count)
        refuse_kv(kExpertUsedCountKey,
                  fmt::format("{} experts used per token, but the model has only {} (llama.cpp "
                              "refuses such a model)",
                              L.expert_used_count, L.expert_count));
    if (L.expert_count > 0 && L.expert_group_count > 1 && L.expert_count % L.expert_group_count != 0)
        refuse_kv(kExpertGroupCountKey,
                  fmt::format("{} experts do not split into {} equal groups (llama.cpp refuses "
                              "such a model)",
                              L.expert_count, L.expert_group_count));

    // deepseek4 routes some tokens through a token-id → expert-id table whose *values* are expert ids
    // (splice rewrites them); its shape must be what the loader checks.
    std::map<int, size_t> hash_tables;
    for (size_t i = 0; i < model.tensors().size(); ++i) {
        const TensorRef& r = model.tensors()[i];
        const TensorInfo& t = model.info(r);
        if (reads_hash_tables && is_hash_routing_table(t.name)) {
            const auto split = split_block_name(t.name);
            if (!split || t.type != kGgmlI32 || t.n_dims != 2 ||
                static_cast<uint64_t>(t.ne[0]) != L.expert_used_count)
                throw InputError(model.shards()[r.shard].path, t.info_offset,
                                 fmt::format("tensor '{}'", t.name),
                                 fmt::format("has shape {} and type {}, but a token → expert table is I32 "
                                             "[expert_used_count = {}, n_vocab] inside a block",
                                             shape_str(t), ggml_type_display(t.type), L.expert_used_count));
            hash_tables[split->first] = i;
        }
        if (reads_chunk_experts && is_chunk_expert_tensor(t.name))
            throw InputError(
                model.shards()[r.shard].path, t.info_offset, fmt::format("tensor '{}'", t.name),
                fmt::format("architecture '{}' pairs each chunk expert with a group of routed experts "
                            "(experts_per_group); the loader derives the chunk count from expert_count, so "
                            "only whole groups could be removed, with their chunk experts, which gguf-reap "
                            "refuses",
                            L.arch));
    }
    if (L.expert_count == 0) return L;

    std::map<int, MoeBlock> blocks;
    const auto& refs = model.tensors();
    for (size_t i = 0; i < refs.size(); ++i) {
        const TensorInfo& t = model.info(refs[i]);
        const std::string& path = model.shards()[refs[i].shard].path;
        auto split = split_block_name(t.name);
        if (!split) continue;
        const BlockTensorClass c = classify_block_tensor(L.arch, split->second);
        const std::string field = fmt::format("tensor '{}'", t.name);
        if (!c.expert) {
            if (c.unknown_expert_like)
                throw InputError(
                    path, t.info_offset, field,
                    "looks expert-indexed but matches no tensor layout gguf-reap knows; refusing "
                    "rather than copying it unsliced");
            continue;
        }
        const int64_t E = static_cast<int64_t>(L.expert_count);
        const int axis = c.expert->expert_axis;
        bool ok = t.ne[axis] == E;
        for (int j = axis + 1; j < 4; ++j) ok = ok && t.ne[j] == 1;
        if (!ok)
            throw InputError(path, t.info_offset, field,
                             fmt::format("has shape {} but {} tensors must have ne[{}] = expert_count = {}{}",
                                         shape_str(t), expert_kind_label(*c.expert), axis, E,
                                         axis < 3 ? " as their outermost dimension" : ""));
        const GgmlType* gt = ggml_type(t.type);
        if (axis == 0 && gt->block_size != 1)
            throw InputError(path, t.info_offset, field,
                             fmt::format("per-expert vector of type {} packs several experts into one block; "
                                         "it cannot be sliced byte-exactly",
                                         ggml_type_display(t.type)));
        ExpertTensor et;
        et.name = t.name;
        et.tensor = i;
        et.kind = c.expert;
        et.slab = E > 0 ? t.nbytes / static_cast<uint64_t>(E) : 0;
        MoeBlock& b = blocks[split->first];
        b.block = split->first;
        b.tensors.push_back(et);
    }

    for (auto& [id, b] : blocks) {
        bool has_router = false, has_weights = false;
        for (const auto& et : b.tensors) {
            has_router |= et.role() == ExpertRole::kRouter;
            const bool weight = et.kind->is_weight();
            has_weights |= weight;
            if (weight) b.slab_bytes += et.slab;
            b.slab_bytes_all += et.slab;
            L.expert_tensor_bytes += model.tensors()[et.tensor].nbytes;
        }
        if (!has_router || !has_weights) {
            const ExpertTensor& any = b.tensors.front();
            const TensorRef& r = model.tensors()[any.tensor];
            throw InputError(model.shards()[r.shard].path, model.info(r).info_offset,
                             fmt::format("tensor '{}'", any.name),
                             fmt::format("block {} has {} but no {}: an MoE block needs both a router "
                                         "(ffn_gate_inp.weight) and expert weights (ffn_*_exps.weight)",
                                         id, has_router ? "a router" : "expert tensors",
                                         has_router ? "expert weights" : "router"));
        }
        if (auto h = hash_tables.find(id); h != hash_tables.end()) {
            b.hash_table = h->second;
            hash_tables.erase(h);
        }
        L.blocks.push_back(std::move(b));
    }
    for (const auto& [block, i] : hash_tables) {
        const TensorRef& r = model.tensors()[i];
        throw InputError(
            model.shards()[r.shard].path, model.info(r).info_offset,
            fmt::format("tensor '{}'", model.info(r).name),
            fmt::format("a token → expert table in block {}, which has no routed experts", block));
    }
    return L;
}

}  // namespace gguf_reap
