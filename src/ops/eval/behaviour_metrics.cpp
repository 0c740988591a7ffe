#include "ops/eval/behaviour_metrics.h"

#include <algorithm>
#include <cmath>

#include "services/behaviour_stats.h"

namespace gguf_reap::eval_detail {

bool generation_loops(std::span<const int32_t> tokens, bool natural_end) {
    if (natural_end) return false;
    const size_t L = std::min(kLoopWindow, tokens.size() / 2);
    if (L < 4) return false;
    const std::span<const int32_t> t = tokens.subspan(tokens.size() - L);
    for (size_t p = 1; p <= L / 4; ++p) {
        bool periodic = true;
        for (size_t j = 0; j + p < L && periodic; ++j) periodic = t[j] == t[j + p];
        if (periodic) return true;
    }
    return false;
}

EvalRate wilson_rate(int64_t k, int64_t n) {
    EvalRate r;
    r.k = k;
    r.n = n;
    if (n <= 0) return r;
    r.rate = static_cast<double>(k) / static_cast<double>(n);
    const Interval i = wilson_interval(k, n);
    r.lo = i.lo;
    r.hi = i.hi;
    return r;
}

size_t Distinct4::Hash::operator()(const std::array<int32_t, 4>& g) const noexcept {
    uint64_t h = 1469598103934665603ULL;
    for (int32_t v : g) {
        h ^= static_cast<uint32_t>(v);
        h *= 1099511628211ULL;
    }
    return static_cast<size_t>(h);
}

void Distinct4::add(std::span<const int32_t> tokens) {
    for (size_t i = 0; i + 4 <= tokens.size(); ++i) {
        seen_.insert({tokens[i], tokens[i + 1], tokens[i + 2], tokens[i + 3]});
        ++total_;
    }
}

std::optional<double> Distinct4::value() const {
    if (total_ == 0) return std::nullopt;
    return static_cast<double>(seen_.size()) / static_cast<double>(total_);
}

}  // namespace gguf_reap::eval_detail
