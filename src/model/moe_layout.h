// Where the experts are: for every MoE block of a model, every expert-indexed tensor, its expert axis
// and the byte slab each expert occupies (reference §5). Everything else is untouched by pruning.
//
// In a contiguous tensor whose expert axis is the outermost non-trivial dimension (ne[a] = E and
// ne[j] = 1 for j > a), expert e occupies bytes [e*slab, (e+1)*slab) of the tensor's data, whatever the
// quantisation: slab = nbytes / E. That holds for stacked [ne0, ne1, E] weights (a = 2), router rows
// and gpt-oss expert biases [n, E] (a = 1), and per-expert vectors [E] (a = 0, block size 1 only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/shard_set.h"

namespace gguf_reap {

enum class ExpertRole {
    kGateExps,    // ffn_gate_exps.weight   [n_embd, n_ff, E]
    kUpExps,      // ffn_up_exps.weight     [n_embd, n_ff, E]
    kDownExps,    // ffn_down_exps.weight   [n_ff, n_embd, E]
    kGateUpExps,  // ffn_gate_up_exps.weight [n_embd, 2*n_ff, E]
    kExpsBias,    // ffn_*_exps.bias        [n, E]      (gpt-oss)
    kExpsScale,   // ffn_*_exps.scale / .input_scale [E]
    kRouter,      // ffn_gate_inp.weight    [n_embd, E] (one row per expert)
    kRouterBias,  // ffn_gate_inp.bias      [E]
    kProbsBias,   // exp_probs_b.bias       [E]
};
const char* expert_role_name(ExpertRole r);
// Expert weights and their per-expert biases/scales are read once per routed token; router tensors
// are read whole for every token.
bool is_router_role(ExpertRole r);

struct ExpertTensor {
    std::string name;
    size_t tensor = 0;  // index into ShardSet::tensors()
    ExpertRole role;
    int axis = 2;       // which ne[] is the expert axis
    uint64_t slab = 0;  // bytes per expert
};

struct MoeBlock {
    int block = 0;                      // N of blk.N
    std::vector<ExpertTensor> tensors;  // in model tensor order
    uint64_t slab_bytes = 0;            // bytes of one expert's weight slabs (kGate/Up/Down/GateUpExps)
    uint64_t slab_bytes_all = 0;        // bytes of one expert across every expert-indexed tensor
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
    uint64_t nextn_predict_layers = 0;
    std::vector<MoeBlock> blocks;  // ascending block id

    // Bytes of every expert-indexed tensor, and the share of them that the expert weights hold.
    uint64_t expert_tensor_bytes = 0;
    const MoeBlock* find_block(int block) const;
    bool is_expert_tensor(size_t tensor) const;
    // Whether blk.N is an MTP (nextn) block: one of the last nextn_predict_layers of block_count
    // (reference §5.2). Plain decoding never reads them.
    bool is_nextn_block(int block) const;
};

// "blk.N.<rest>" → N and rest; nullopt for tensors outside the blocks.
std::optional<std::pair<int, std::string_view>> split_block_name(std::string_view name);

// Builds the layout from general.architecture and <arch>.expert_count. Throws InputError naming the
// tensor when something looks expert-indexed but has the wrong shape, and refuses architectures whose
// expert ids appear inside tensor values (deepseek4's ffn_gate_tid2eid). A model without experts
// (no expert_count, or 0) gives an empty layout.
MoeLayout build_moe_layout(const ShardSet& model);

}  // namespace gguf_reap
