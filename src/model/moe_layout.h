// Where the experts are: for every MoE block of a model, every expert-indexed tensor (as the tensor
// table classifies it), its expert axis and the byte slab each expert occupies (reference §5).
// Everything else is untouched by pruning.
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

#include "gguf_reap/moe_layout.h"
#include "model/shard_set.h"
#include "model/tensor_table.h"

namespace gguf_reap {

// Builds the layout from general.architecture and <arch>.expert_count. Throws InputError naming the
// tensor when something looks expert-indexed but has the wrong shape, a deepseek4 token → expert table
// that is not I32 [expert_used_count, n_vocab] in an MoE block, and grovemoe's chunk experts. MTP blocks,
// token → expert tables and chunk experts are looked for only where the architecture's flags say its
// loader reads them (ArchFlag; every architecture the table does not list is read for all three). A
// model without experts (no expert_count, or 0) gives an empty layout.
MoeLayout build_moe_layout(const ShardSet& model);

}  // namespace gguf_reap
