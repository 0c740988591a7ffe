// deepseek4's hash-routed blocks (docs/splice.md, "Hash-routed blocks"): in its first
// hash_layer_count blocks, ffn_gate_tid2eid (I32 [expert_used_count, n_vocab]) holds, for every token
// id, the ids of the experts it is routed to; the router still gives the gate values. When experts are
// removed the table's values are rewritten:
//   - a kept id becomes its new index (its position in the block's kept list);
//   - a pruned id becomes the kept expert whose router row is most similar to the pruned one's
//     (cosine similarity of the ffn_gate_inp rows, dequantized to float; ties to the lower source id)
//     among those not already in that token's row, so a row never names an expert twice.
// Slots are filled in order: first every kept id of the row, then the pruned ones left to right.
#pragma once

#include <cstdint>
#include <vector>

#include "model/moe_layout.h"
#include "model/shard_set.h"

namespace gguf_reap {

struct HashRewrite {
    int block = 0;
    uint64_t entries = 0;        // (token, slot) entries of the table
    uint64_t redirected = 0;     // entries whose expert was pruned, now naming a kept one
    std::vector<uint8_t> bytes;  // the rewritten table, as written
};

// Reads block `b`'s table and router from `model` and rewrites the table for `keep` (ascending source
// ids). Throws InputError naming the tensor and the byte offset of an id outside 0..expert_count-1, and
// UsageError when the router's type cannot be read as floats.
HashRewrite rewrite_hash_table(const ShardSet& model, const MoeBlock& b, const std::vector<int64_t>& keep);

}  // namespace gguf_reap
