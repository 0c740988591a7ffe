// Internal to splice: how a width cut (--neuron-plan) reshapes and copies one expert tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "format/gguf.h"
#include "io/copy_engine.h"
#include "model/moe_layout.h"
#include "ops/splice.h"

namespace gguf_reap::splice_width {

enum class Cut {
    kNone,       // only expert-sliced (down bias, router, probs bias, scales)
    kRows,       // ffn_gate_exps / ffn_up_exps: rows c of each expert [n_embd, n_ff, E]
    kFusedRows,  // ffn_gate_up_exps: rows c, then rows n_ff + c [n_embd, 2·n_ff, E]
    kColumns,    // ffn_down_exps [n_ff, n_embd, E] and gate/up biases [n_ff, E]: elements c of each row
};
Cut cut_of(const ExpertTensor& et);

// `t` (already expert-sliced) with its channel axis cut to k: ne and nbytes.
void cut_info(TensorInfo& t, Cut cut, int64_t k);

// Appends the data of expert tensor `et` (source data at `abs_offset` of source `src`, shape `source`)
// for the kept experts `keep` of MoE block `block_index`. Returns the source extents it added.
size_t append_data(CopyJob& job, uint32_t src, uint64_t abs_offset, const TensorInfo& source,
                   const ExpertTensor& et, const std::vector<int64_t>& keep, const WidthCut& width,
                   size_t block_index);

}  // namespace gguf_reap::splice_width
