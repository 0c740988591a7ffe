// The K rules (model/keep_count.h).
#include "model/keep_count.h"

#include <cmath>
#include <utility>

#include "model/tensor_table.h"

namespace gguf_reap {

std::optional<KeepCountRefusal> keep_count_refusal(const KeepCountLimits& limits, int64_t k) {
    if (k < 1 || k > limits.expert_count) return KeepCountRefusal{KeepCountBreach::kOutOfRange, {}};
    if (limits.used > 0 && k < limits.used) return KeepCountRefusal{KeepCountBreach::kBelowUsed, {}};
    if (auto why = expert_count_change_refusal(limits.arch, static_cast<uint64_t>(limits.expert_count),
                                               static_cast<uint64_t>(k)))
        return KeepCountRefusal{KeepCountBreach::kCountChange, std::move(*why)};
    if (limits.groups > 1 && k % limits.groups)
        return KeepCountRefusal{KeepCountBreach::kNotGroupMultiple, {}};
    return std::nullopt;
}

int64_t keep_count_for_ratio(const KeepCountLimits& limits, double ratio) {
    const int64_t E = limits.expert_count, G = limits.groups > 1 ? limits.groups : 1;
    int64_t n = E - std::llround(ratio * static_cast<double>(E));
    // With expert groups the kept count must be a multiple of the group count: round up (keep more).
    if (G > 1 && n % G) n += G - n % G;
    return n;
}

}  // namespace gguf_reap
