// weighted-energy's weights: the squared norm of every column of each expert's down projection.
#pragma once

#include <vector>

#include "model/shard_set.h"

namespace gguf_reap {

// ||W_down[:, c]||² for every expert of one block's ffn_down_exps ([n_ff, n_embd, E] in ggml order):
// [E][n_ff] floats, accumulated in double, read 4 MiB at a time. Precondition: can_dequantize(type).
std::vector<float> down_column_norms(const ShardSet& model, const TensorRef& down);

}  // namespace gguf_reap
