// The K rules: how many routed experts per block a pruned model may keep, and the count a fraction
// asks for. rank (--keep, --prune, --ratio, --from-plan), the budget search (rank --fit, estimate --fit
// and --sweep) and every command that applies a keeplist (validate_keeplist) ask these; each words a
// refusal its own way (docs/rank.md, docs/estimate.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gguf_reap {

// What bounds K in one model.
struct KeepCountLimits {
    int64_t expert_count = 0;  // E, routed experts per block
    int64_t used = 0;          // expert_used_count: llama.cpp routes every token to that many (0: unknown)
    int64_t groups = 1;        // expert_group_count where above 1: K is a multiple of it
    std::string arch;          // general.architecture, for expert_count_change_refusal (empty: unknown)
};

// The rule a count breaks, in the order they are checked.
enum class KeepCountBreach : uint8_t {
    kOutOfRange,        // K < 1 or K > E
    kBelowUsed,         // K < expert_used_count
    kCountChange,       // the architecture would compute something else with K experts (llama4)
    kNotGroupMultiple,  // K is not a multiple of expert_group_count
};
struct KeepCountRefusal {
    KeepCountBreach breach;
    std::string why;  // kCountChange: expert_count_change_refusal's sentence; empty otherwise
};
// The first rule K breaks; nullopt for a legal K.
std::optional<KeepCountRefusal> keep_count_refusal(const KeepCountLimits& limits, int64_t k);

// The count that prunes the fraction `ratio` (0 < ratio < 1) of E: E − round(ratio × E), rounded up to
// a multiple of the groups (keeping more). Not checked: keep_count_refusal says whether it is legal.
int64_t keep_count_for_ratio(const KeepCountLimits& limits, double ratio);

}  // namespace gguf_reap
