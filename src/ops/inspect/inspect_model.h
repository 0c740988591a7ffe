// inspect's summary of an opened model (include/gguf_reap/inspect.h has the result type).
#pragma once

#include "gguf_reap/inspect.h"
#include "model/shard_set.h"

namespace gguf_reap {

ModelSummary summarize_model(const ShardSet& model);

}  // namespace gguf_reap
