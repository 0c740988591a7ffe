#include "model/moe_layout.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gguf_reap/error.h"

namespace gguf_reap {

ExpertRole ExpertTensor::role() const {
    return kind->role;
}
int ExpertTensor::axis() const {
    return kind->expert_axis;
}

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

namespace {

std::string shape_str(const TensorInfo& t) {
    return fmt::format("{{{}, {}, {}, {}}}", t.ne[0], t.ne[1], t.ne[2], t.ne[3]);
}

// What the loader of a listed architecture reads beyond the generic keys, its flags say (MTP blocks,
// token → expert tables, chunk experts): a key or tensor of that kind in another architecture's file
// is one its loader never looks at. An architecture the table does not list is read by the generic
// rules: every such key and tensor name counts.
struct LoaderReads {
    bool nextn = true;
    bool hash_tables = true;
    bool chunk_experts = true;
};

LoaderReads loader_reads(std::string_view arch) {
    auto reads = [&](uint8_t flag) { return gguf_reap::loader_reads(arch, flag); };
    return {reads(ArchFlag::kNextn), reads(ArchFlag::kHashRouting), reads(ArchFlag::kChunkExperts)};
}

// <arch>.<suffix> as an unsigned integer, 0 where the key is absent.
uint64_t uint_key(const ShardSet& model, const std::string& arch, std::string_view suffix) {
    const std::string key = arch_key(arch, suffix);
    const Kv* kv = model.find_kv(key);
    if (!kv) return 0;
    auto v = kv->as_uint();
    if (!v)
        throw InputError(model.shards().front().path, kv->file_offset, fmt::format("kv '{}'", key),
                         fmt::format("must be a non-negative integer, found {} {}", gguf_type_name(kv->type),
                                     kv->display()));
    return *v;
}

// The expert and block counts, checked as llama.cpp asserts them at load time (reference §5.4):
// everything downstream (keeplist checks, per-group counts) relies on them, so a model that breaks
// them is refused here, by name.
void read_counts(const ShardSet& model, const LoaderReads& reads, MoeLayout& L) {
    L.expert_count = uint_key(model, L.arch, kExpertCountKey);
    L.expert_used_count = uint_key(model, L.arch, kExpertUsedCountKey);
    L.expert_shared_count = uint_key(model, L.arch, kExpertSharedCountKey);
    L.expert_group_count = uint_key(model, L.arch, kExpertGroupCountKey);
    L.expert_group_used_count = uint_key(model, L.arch, kExpertGroupUsedCountKey);
    L.leading_dense_block_count = uint_key(model, L.arch, kLeadingDenseBlockCountKey);
    L.block_count = uint_key(model, L.arch, kBlockCountKey);
    L.nextn_predict_layers = reads.nextn ? uint_key(model, L.arch, kNextnPredictLayersKey) : 0;

    auto refuse_kv = [&](std::string_view suffix, const std::string& msg) {
        const std::string key = arch_key(L.arch, suffix);
        throw InputError(model.shards().front().path, model.find_kv(key)->file_offset,
                         fmt::format("kv '{}'", key), msg);
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
}

// deepseek4 routes some tokens through a token-id → expert-id table whose *values* are expert ids
// (splice rewrites them); its shape must be what the loader checks. Returns them by block; refuses
// grovemoe's chunk experts.
std::map<int, size_t> find_hash_tables(const ShardSet& model, const LoaderReads& reads, const MoeLayout& L) {
    std::map<int, size_t> hash_tables;
    for (size_t i = 0; i < model.tensors().size(); ++i) {
        const TensorRef& r = model.tensors()[i];
        const TensorInfo& t = model.info(r);
        if (reads.hash_tables && is_hash_routing_table(t.name)) {
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
        if (reads.chunk_experts && is_chunk_expert_tensor(t.name))
            throw InputError(
                model.shards()[r.shard].path, t.info_offset, fmt::format("tensor '{}'", t.name),
                fmt::format("architecture '{}' pairs each chunk expert with a group of routed experts "
                            "(experts_per_group); the loader derives the chunk count from expert_count, so "
                            "only whole groups could be removed, with their chunk experts, which gguf-reap "
                            "refuses",
                            L.arch));
    }
    return hash_tables;
}

// Every expert-indexed tensor, by block, each checked to have expert_count on its expert axis and
// to be sliceable byte-exactly there.
std::map<int, MoeBlock> find_expert_tensors(const ShardSet& model, const MoeLayout& L) {
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
    return blocks;
}

// Sums block b's slab bytes (and the layout's expert tensor bytes); refuses a block without both a
// router and expert weights.
void total_block(const ShardSet& model, MoeBlock& b, MoeLayout& L) {
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
                                     b.block, has_router ? "a router" : "expert tensors",
                                     has_router ? "expert weights" : "router"));
    }
}

// The blocks in ascending order, each with its token → expert table; refuses a table in a block
// without routed experts.
void add_blocks(const ShardSet& model, std::map<int, MoeBlock>& blocks, std::map<int, size_t>& hash_tables,
                MoeLayout& L) {
    for (auto& [id, b] : blocks) {
        total_block(model, b, L);
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
}

}  // namespace

MoeLayout build_moe_layout(const ShardSet& model) {
    MoeLayout L;
    L.arch = model.architecture();
    const LoaderReads reads = loader_reads(L.arch);
    // The counts, as the loader reads and asserts them.
    read_counts(model, reads, L);
    // The tensors a loader reads besides the expert tensors: token → expert tables, chunk experts.
    std::map<int, size_t> hash_tables = find_hash_tables(model, reads, L);
    if (L.expert_count == 0) return L;
    // The expert-indexed tensors, by block, then the blocks with their sizes and tables.
    std::map<int, MoeBlock> blocks = find_expert_tensors(model, L);
    add_blocks(model, blocks, hash_tables, L);
    return L;
}

}  // namespace gguf_reap
