// A keeplist's identity of an opened model (include/gguf_reap/keeplist.h has the keeplist itself).
#pragma once

#include "gguf_reap/keeplist.h"
#include "gguf_reap/moe_layout.h"
#include "model/shard_set.h"

namespace gguf_reap {

// The identity `rank --model` records as the keeplist's `source`: the layout's architecture and expert
// counts, the tensor count and names, and the shards (file names; sizes from the files, 0 without one).
KeepListSource keeplist_source_of(const ShardSet& set, const MoeLayout& layout);

}  // namespace gguf_reap
