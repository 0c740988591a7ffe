#include "ops/eval/behaviour_metrics.h"

#include <algorithm>
#include <cmath>

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
    constexpr double z = 1.959963984540054;
    EvalRate r;
    r.k = k;
    r.n = n;
    if (n <= 0) return r;
    const double nn = static_cast<double>(n);
    const double p = static_cast<double>(k) / nn;
    const double z2 = z * z;
    const double denom = 1 + z2 / nn;
    const double centre = (p + z2 / (2 * nn)) / denom;
    const double half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / denom;
    r.rate = p;
    // At k = 0 and k = n the bounds are exactly 0 and 1; rounding must not put them a hair inside.
    r.lo = k == 0 ? 0.0 : std::max(0.0, centre - half);
    r.hi = k == n ? 1.0 : std::min(1.0, centre + half);
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
