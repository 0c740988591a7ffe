// Where the experts are: for every MoE block of a model, every expert-indexed tensor (as the tensor
// table classifies it), its expert axis and the byte slab each expert occupies (reference §5).
// Everything else is untouched by pruning.
//
// In a contiguous tensor whose expert axis is the outermost non-trivial dimension (ne[a] = E and
// ne[j] = 1 for j > a), expert e occupies bytes [e*slab, (e+1)*slab) of the tensor's data, whatever the
// quantisation: slab = nbytes / E. That holds for stacked [ne0, ne1, E] weights (a = 2), router rows
// and gpt-oss expert biases [n, E] (a = 1), and per-expert vectors [E] (a = 0, block size 1 only).
//
// The layout is plain data (its builder, build_moe_layout, is src/model/moe_layout.h); what each tensor is
// (ExpertTensorKind) is the tensor table's (src/model/tensor_table.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gguf_reap {

struct ExpertTensorKind;
enum class ExpertRole : uint8_t;

struct ExpertTensor {
    std::string name;
    size_t tensor = 0;                       // index into ShardSet::tensors()
    const ExpertTensorKind* kind = nullptr;  // what it is: role, projection, axes (tensor_table.h)
    uint64_t slab = 0;                       // bytes per expert

    ExpertRole role() const;  // kind->role
    int axis() const;         // kind->expert_axis: which ne[] is the expert axis
};

struct MoeBlock {
    int block = 0;                      // N of blk.N
    std::vector<ExpertTensor> tensors;  // in model tensor order
    uint64_t slab_bytes = 0;            // bytes of one expert's weight slabs (ExpertRole::kWeight)
    uint64_t slab_bytes_all = 0;        // bytes of one expert across every expert-indexed tensor
    // deepseek4's hash-routed blocks: the ffn_gate_tid2eid tensor (I32 [expert_used_count, n_vocab],
    // values = source expert ids), whose values splice rewrites (services/hash_routing.h).
    std::optional<size_t> hash_table;
};

struct MoeLayout {
    std::string arch;
    uint64_t expert_count = 0;
    uint64_t expert_used_count = 0;
    uint64_t expert_shared_count = 0;
    uint64_t expert_group_count = 0;
    uint64_t expert_group_used_count = 0;
    uint64_t leading_dense_block_count = 0;
    uint64_t block_count = 0;
    uint64_t nextn_predict_layers = 0;  // 0 for a listed architecture whose loader has no MTP blocks
    std::vector<MoeBlock> blocks;       // ascending block id

    // Bytes of every expert-indexed tensor, and the share of them that the expert weights hold.
    uint64_t expert_tensor_bytes = 0;
    const MoeBlock* find_block(int block) const;
    bool is_expert_tensor(size_t tensor) const;
    // Whether blk.N is an MTP (nextn) block: one of the last nextn_predict_layers of block_count
    // (reference §5.2). Plain decoding never reads them.
    bool is_nextn_block(int block) const;
};

}  // namespace gguf_reap
