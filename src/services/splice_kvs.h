// The output's metadata (services/splice_plan.cpp plans the rest): shard 1's KVs as splice writes them, and
// the split.* keys of every shard.
#pragma once

#include <cstddef>
#include <vector>

#include "format/gguf.h"
#include "gguf_reap/splice.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"

namespace gguf_reap {

// In llama-gguf-split's order (split.no, split.tensors.count, split.count), so that a keep-all
// splice of its shards reproduces them byte for byte.
std::vector<Kv> split_kvs(size_t no, size_t count, size_t tensors);

// Shard 1's KVs: every source KV in source order with expert_count = N, source split.* replaced in
// place by `split` (or dropped when `split` is empty), then provenance, then split.* keys the source
// lacked. Provenance keys of an earlier splice are dropped: they would describe the wrong source.
// A width cut sets expert_feed_forward_length = K (a u32 right after expert_count when the source
// relied on the loader's fallback) and, where the loader derives the shared width from it,
// expert_shared_count = W / K (likewise added after it when absent). With provenance, general.name
// says what the build is and the source's base-model keys give way to the source itself, right after it.
std::vector<Kv> first_shard_kvs(const ShardSet& model, const MoeLayout& layout, const KeepList& kl,
                                const SpliceOptions& o, const std::vector<Kv>& split);

}  // namespace gguf_reap
