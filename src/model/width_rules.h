// Width rules of an opened model, and a neuron plan from its .npz arrays (include/gguf_reap/width.h has
// the rules and the plan).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "format/npz.h"
#include "gguf_reap/moe_layout.h"
#include "gguf_reap/width.h"
#include "model/shard_set.h"

namespace gguf_reap {

// The rules for `model`. Throws InputError (naming the model file and tensor) when the expert widths
// disagree between blocks or tensors, and UsageError when the architecture's expert width cannot be
// changed by gguf-reap (say which, and why).
WidthRules width_rules(const ShardSet& model, const MoeLayout& layout);

NeuronPlan neuron_plan_from_arrays(const std::map<std::string, NpyArray>& arrays, const std::string& path,
                                   const std::vector<int>& blocks, int64_t expert_count, int64_t width);

}  // namespace gguf_reap
