// Where the experts are: for every MoE block of a model, every expert-indexed tensor (as the tensor
// table classifies it), its expert axis and the byte slab each expert occupies (reference §5).
// Everything else is untouched by pruning.
//
// In a contiguous tensor whose expert axis is the outermost non-trivial dimension (ne[a] = E and
// ne[j] = 1 for j > a), expert e occupies bytes [e*slab, (e+1)*slab) of the tensor's data, whatever the
// quantisation: slab = nbytes / E. That holds for stacked [ne0, ne1, E] weights (a = 2), router rows
// and gpt-oss expert biases [n, E] (a = 1), and per-expert vectors [E] (a = 0, block size 1 only).
//
// The layout is plain data (its builder, build_moe_layout, is src/model/moe_layout.h). What each tensor is
// (ExpertTensorKind, below) is one row of the tensor table (src/model/tensor_table.h), which holds every
// kind gguf-reap knows and classifies tensor names; a layout points into it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gguf_reap {

// The FFN projection a tensor belongs to (a bias or scale belongs to the projection it is added to).
enum class Projection : uint8_t { kNone, kGate, kUp, kDown, kGateUp };

// What an expert-indexed tensor is to pruning.
enum class ExpertRole : uint8_t {
    kWeight,      // ffn_{gate,up,down,gate_up}_exps.weight: one matrix per expert, [.., .., E]
    kBias,        // ffn_*_exps.bias (gpt-oss): one vector per expert, [n, E]
    kScale,       // ffn_*_exps.scale / .input_scale: one value per expert, [E]
    kRouter,      // ffn_gate_inp.weight: one router row per expert, [n_embd, E]
    kRouterBias,  // ffn_gate_inp.bias: [E]
    kProbsBias,   // exp_probs_b.bias: the selection bias of aux-loss-free routing, [E]
};

// One kind of expert-indexed tensor: a (base, suffix) name pattern and every fact about its axes.
struct ExpertTensorKind {
    std::string_view base;    // "ffn_down_exps"
    std::string_view suffix;  // "weight"
    ExpertRole role;
    Projection projection;
    int expert_axis;   // the ne[] index that holds the experts (the outermost non-trivial one)
    int width_axis;    // the ne[] index that holds the expert's FFN channels, -1 when it has none:
                       // gate/up rows are channels (ne[1]), a down row's elements are (ne[0])
    int width_factor;  // channels along width_axis per unit of FFN width (fused gate_up: 2)

    // Expert weights and their biases and scales are read once per routed token; router tensors are
    // read whole for every token.
    bool read_per_token() const {
        return role == ExpertRole::kRouter || role == ExpertRole::kRouterBias ||
               role == ExpertRole::kProbsBias;
    }
    bool is_weight() const { return role == ExpertRole::kWeight; }
    // Whether a width cut keeps only K (× width_factor) of its elements along width_axis.
    bool width_cut() const { return width_axis >= 0; }
    // Whether a width cut selects elements inside rows (byte-exact only in float types, or by whole
    // quant blocks) rather than whole rows (byte-exact in any type).
    bool width_cuts_inside_rows() const { return width_axis == 0; }
};

struct ExpertTensor {
    std::string name;
    size_t tensor = 0;                       // index into ShardSet::tensors()
    const ExpertTensorKind* kind = nullptr;  // what it is: role, projection, axes (a table row)
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
