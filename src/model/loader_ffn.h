// What llama.cpp's loader derives from an architecture's block-structure and FFN keys, and the
// shapes it then requires of the FFN tensors (src/models/<arch>.cpp load_arch_tensors, llama.cpp
// 34af94cd9): which blocks are MoE and which dense, the dense FFN width (feed_forward_length, one value
// or one per block), the routed width where it falls back to feed_forward_length, the shared experts'
// width, grovemoe's chunk experts and deepseek4's token → expert tables. The per-architecture facts
// are columns of the tensor table (tensor_table.h, ArchInfo); this file evaluates them, and is the one
// place that reads the shared-width rules (SharedWidthRule). Audit (ops/audit/audit_load_rules.cpp) reports
// every disagreement; width pruning (width.h) sizes the shared experts with the same evaluator and asks
// shared_width_under_cut() what a cut must rewrite. Attention and embedding shapes are not modelled.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/gguf.h"
#include "model/tensor_table.h"

namespace gguf_reap {

// The keys of one model, looked up by full name ("deepseek2.expert_count").
using KvLookup = std::function<const Kv*(const std::string& key)>;

// A number the loader derived, with the sentence that says from which keys ("deepseek2.expert_
// feed_forward_length × deepseek2.expert_shared_count = 64 × 2").
struct Derived {
    uint64_t value = 0;
    std::string why;
};

// feed_forward_length of block `block` as the loader reads it: the one value, or the block's element of
// a per-layer array; 0 when absent (the loader's default).
Derived dense_width(std::string_view arch, const KvLookup& kv, int block);

// The routed experts' width in block `block` as the loader reads it (expert_feed_forward_length,
// feed_forward_length, or the fallback feed_forward_length / expert_used_count, per block where
// feed_forward_length is an array); nullopt where gguf-reap does not know it, a key it needs is absent
// (check_loader_ffn names that key) or a per-layer array without an element for the block.
std::optional<Derived> routed_width(const ArchInfo& info, const KvLookup& kv, int block = -1);

// The shared experts' width the loader creates in block `block` (0: it creates none), where its rule
// derives it from keys; nullopt for SharedWidthRule::kFromTensors, and where the rule needs the routed
// width and `routed` (routed_width()) is nullopt.
std::optional<Derived> shared_width(const ArchInfo& info, const KvLookup& kv,
                                    const std::optional<Derived>& routed, int block);

// What the shared-width rule of `info` makes of a width cut (routed width F → K) that must leave the
// shared experts W wide, read from the same rules as shared_width(): width pruning (width.h) asks this.
struct SharedWidthUnderCut {
    // W is F itself, with no count to absorb a change (llama4): no cut keeps the shared experts' shape.
    bool equals_routed = false;
    // W = F × expert_shared_count (or × max(count, 1)): the cut rewrites the count as W / K.
    bool count_absorbs = false;
    // Without expert_shared_feed_forward_length the loader falls back to a width the cut changes: the cut
    // writes that key.
    bool own_key_needed = false;
    // The own key is multiplied by expert_shared_count (bailingmoe2): the cut writes it as W / count.
    bool own_key_times_count = false;
};
SharedWidthUnderCut shared_width_under_cut(const ArchInfo& info);

// One tensor whose shape or presence the loader would refuse.
struct FfnMismatch {
    std::string tensor;   // the tensor's name; empty for a key finding
    std::string key;      // the key's full name, for a key the loader requires and the model lacks
    std::string message;  // "has shape {..}: ... but <key> = <value> makes it ..."
};

// Every disagreement between the FFN tensors of `tensors` (the whole model, every shard) and what the
// keys make the loader expect of them, block by block (after the keys it requires and lacks). Routed-expert
// counts and widths are audit's own checks (ops/audit/audit_load_rules.cpp).
std::vector<FfnMismatch> check_loader_ffn(const ArchInfo& info, const KvLookup& kv,
                                          std::span<const TensorInfo* const> tensors);

}  // namespace gguf_reap
