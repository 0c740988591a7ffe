// rank's --model, as the read step reads it (rank_input.cpp): its MoE blocks and experts, its identity,
// and each block's ffn_down_exps tensor, which the imatrix reader checks the imatrices against.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gguf_reap/keeplist.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"

namespace gguf_reap {

struct RankModel {
    std::string path;             // as given; "" = no model
    std::optional<ShardSet> set;  // empty without a model
    MoeLayout layout;
    std::vector<int> blocks;               // the MoE blocks, ascending
    std::vector<int> nextn_blocks;         // the MTP (nextn) blocks among them
    std::map<int, const TensorRef*> down;  // block → ffn_down_exps.weight (into `set`)
    // deepseek4's hash-routed blocks: per block, how many (token, slot) entries of its token → expert
    // table name each expert (services/hash_routing.h).
    std::map<int, std::vector<uint64_t>> hash_entries;
    KeepListSource source;  // the keeplist's identity of the model
    std::string name;       // general.name, else ""
};

// Opens the model at `path` (any shard) and reads its headers and deepseek4's token → expert tables.
// `down_needed`: every MoE block must have the ffn_down_exps tensor whose imatrix entry rank reads (score
// files need none). Throws UsageError for a model without MoE blocks or without that tensor, InputError
// for a table entry that names no expert, and what ShardSet::open throws.
RankModel read_rank_model(const std::string& path, bool down_needed);

}  // namespace gguf_reap
