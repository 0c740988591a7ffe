// The estimate's figures of an opened model (include/gguf_reap/estimate.h has the request, the result and
// the types; these take the model itself, which include/ does not define).
#pragma once

#include <string>

#include "gguf_reap/estimate.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/moe_layout.h"
#include "model/shard_set.h"

namespace gguf_reap {

AfterPlan load_after_plan(const ShardSet& model, const MoeLayout& layout, const std::string& neuron_plan_path,
                          bool drop_mtp, std::string tool_version);

// The figures of the model splice writes from `keeplist` (validated; its first block's count is the
// kept count) and `plan`; the file size is plan_splice's, exact unless plan.requantised().
ModelFigures after_figures(const ShardSet& model, const MoeLayout& layout, const KeepList& keeplist,
                           const std::string& keeplist_sha256, const AfterPlan& plan);

// Reads, validates (validate_keeplist; read_neuron_plan and check_width) and computes. Throws
// UsageError / InputError / IoError.
EstimateResult estimate_model(const ShardSet& model, const EstimateRequest& inputs);

// The per-token KV cache of `model` (exposed for tests). A quantized cache type needs rows that are
// whole quant blocks (llama.cpp's own rule): UsageError naming the option otherwise.
KvFigures kv_cache_figures(const ShardSet& model, const KvCacheTypes& types = {});

}  // namespace gguf_reap
