// The behaviour definitions of docs/eval.md ("Behaviour"), exactly as eval computes them from the token
// ids of each generation.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_set>

#include "gguf_reap/eval.h"

namespace gguf_reap::eval_detail {

// The tail that the loop test looks at: L = min(256, floor(n/2)) tokens.
inline constexpr size_t kLoopWindow = 256;

// A generation loops when it did not end naturally and its last L tokens T are periodic: some p with
// 1 <= p <= floor(L/4) has T[j] == T[j+p] for every 0 <= j < L-p. L < 4 never loops.
bool generation_loops(std::span<const int32_t> tokens, bool natural_end);

// k of n with its Wilson score interval at 95 % (services/behaviour_stats.h); n > 0.
EvalRate wilson_rate(int64_t k, int64_t n);

// distinct-4 over a pool of generations: distinct 4-grams / all 4-grams, each generation's 4-grams
// taken within it (none spans two generations).
class Distinct4 {
  public:
    void add(std::span<const int32_t> tokens);
    uint64_t total() const { return total_; }
    uint64_t distinct() const { return seen_.size(); }
    // Null when there is no 4-gram at all.
    std::optional<double> value() const;

  private:
    struct Hash {
        size_t operator()(const std::array<int32_t, 4>& g) const noexcept;
    };
    std::unordered_set<std::array<int32_t, 4>, Hash> seen_;
    uint64_t total_ = 0;
};

}  // namespace gguf_reap::eval_detail
