// Width (neuron) pruning rules: which expert FFN widths K a model can be cut to, and which KVs change.
//
// Cutting every routed expert from its native width n_ff to K channels keeps K rows of each expert's
// ffn_gate_exps / ffn_up_exps (both halves of a fused ffn_gate_up_exps), K elements of each expert's
// gpt-oss ffn_{gate,up}_exps.bias, and K columns (elements of every row) of ffn_down_exps. K is legal
// when (reference §5):
//   - 1 <= K <= n_ff;
//   - K is a multiple of the block size of every tensor whose row length becomes K (ffn_down_exps,
//     and the gate/up biases), since ggml rows hold whole blocks;
//   - where the loader derives the shared-expert width as expert_feed_forward_length ×
//     expert_shared_count (deepseek2, glm4moe, kimi-*, ...): K divides the shared experts' actual
//     width W (ffn_down_shexp ne0), because expert_shared_count must become W / K while the shared
//     tensors stay unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/moe_layout.h"
#include "model/shard_set.h"

namespace gguf_reap {

struct WidthRules {
    int64_t native_width = 0;        // n_ff: ffn_down_exps ne0 (the same in every MoE block)
    std::vector<int64_t> legal;      // every legal K, ascending (includes native_width)
    int64_t block_size = 1;          // lcm of the block sizes of the tensors whose rows become K
    std::string width_key;           // KV that holds n_ff: "<arch>.expert_feed_forward_length"
    bool width_key_present = false;  // false: the source relied on a loader fallback; it must be added
    bool shared_derived = false;     // the loader derives the shared width from width_key × shared count
    int64_t shared_width = 0;        // W: ffn_down_shexp ne0 (0 = no shared experts)
    std::string shared_count_key;    // "<arch>.expert_shared_count" when shared_derived
};

// The rules for `model`. Throws InputError (naming the model file and tensor) when the expert widths
// disagree between blocks or tensors, and UsageError when the architecture's expert width cannot be
// changed by gguf-reap (say which, and why).
WidthRules width_rules(const ShardSet& model, const MoeLayout& layout);

// Throws UsageError when `k` is not legal, with every legal value in the message:
//   "K = 1000 is not a legal expert width for <model>: <reason>; legal widths are {256, 512, ...}"
void check_width(const WidthRules& rules, int64_t k, const std::string& model_name);

}  // namespace gguf_reap
