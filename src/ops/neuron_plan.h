// A width-pruning ("neuron") plan: which FFN channels every (MoE block, expert) pair keeps.
//
// On disk (docs/formats.md): an .npz with
//   channels  [pairs, k] integer (uint16 when written by `plan-width`): channel ids of the native-width
//             expert, in rank order (best first) as `plan-width` writes them
//   block, expert  [pairs] integer (optional): which pair each row is; without them rows are block-major
//             over the MoE blocks in ascending order, experts 0..E-1
//   k         [1] integer (optional): must equal channels.shape[1] when present
// In memory every row is sorted ascending: that is the order in which a width splice writes the kept
// channels (rows of ffn_gate/up_exps, columns of ffn_down_exps, entries of the pruned imatrix), so
// column j of a width-pruned model is row(b, e)[j] of the native one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gguf_reap {

struct NeuronPlan {
    int64_t k = 0;
    int64_t expert_count = 0;
    std::vector<int> blocks;        // MoE block ids, ascending
    std::vector<int32_t> channels;  // [block index][expert][k], each row ascending

    const int32_t* row(size_t block_index, int64_t expert) const {
        return channels.data() +
               (block_index * static_cast<size_t>(expert_count) + static_cast<size_t>(expert)) *
                   static_cast<size_t>(k);
    }
};

// Reads a plan for a model whose MoE blocks are `blocks` (ascending) with `expert_count` experts each.
// `width` is the native expert FFN width (channel ids must be below it; 0 = not checked). Every pair
// must have exactly one row; ids must be unique within a row. Throws InputError naming the file and
// the row or array at fault, or IoError.
NeuronPlan read_neuron_plan(const std::string& path, const std::vector<int>& blocks, int64_t expert_count,
                            int64_t width);

}  // namespace gguf_reap
