// Internal to splice: how a width cut (--neuron-plan) reshapes and copies one expert tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "format/gguf.h"
#include "io/copy_engine.h"
#include "model/moe_layout.h"
#include "ops/splice.h"

namespace gguf_reap::splice_width {

// `t` (already expert-sliced) with its width axis cut to k (× the kind's width factor): ne and nbytes.
void cut_info(TensorInfo& t, const ExpertTensorKind& kind, int64_t k);

// Appends the data of expert tensor `et` (source data at `abs_offset` of source `src`, shape `source`)
// for the kept experts `keep` of MoE block `block_index`. Returns the source extents it added.
size_t append_data(CopyJob& job, uint32_t src, uint64_t abs_offset, const TensorInfo& source,
                   const ExpertTensor& et, const std::vector<int64_t>& keep, const WidthCut& width,
                   size_t block_index);

}  // namespace gguf_reap::splice_width
