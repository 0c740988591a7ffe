// The behaviour rates' statistics (services/behaviour_stats.h).
#include "services/behaviour_stats.h"

#include <algorithm>
#include <cmath>

namespace gguf_reap {

Interval wilson_interval(int64_t k, int64_t n) {
    if (n <= 0) return {};
    const double nn = static_cast<double>(n);
    const double p = static_cast<double>(k) / nn;
    const double z2 = kWilsonZ * kWilsonZ;
    const double denom = 1 + z2 / nn;
    const double centre = (p + z2 / (2 * nn)) / denom;
    const double half = kWilsonZ * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / denom;
    // At k = 0 and k = n the bounds are exactly 0 and 1; rounding must not put them a hair inside.
    return {k == 0 ? 0.0 : std::max(0.0, centre - half), k == n ? 1.0 : std::min(1.0, centre + half)};
}

double mcnemar_exact_p(int64_t b, int64_t c) {
    const int64_t n = b + c;
    if (n <= 0) return 1;
    const int64_t m = std::min(b, c);
    // P(X <= m) for X ~ Binomial(n, 1/2), each term exp(ln C(n, i) − n ln 2), summed from the smallest
    // (i = 0) up so that no large term swallows the small ones.
    const double nd = static_cast<double>(n);
    const double lg_n1 = std::lgamma(nd + 1), ln2n = nd * std::log(2.0);
    double tail = 0;
    for (int64_t i = 0; i <= m; ++i) {
        const double id = static_cast<double>(i);
        tail += std::exp(lg_n1 - std::lgamma(id + 1) - std::lgamma(nd - id + 1) - ln2n);
    }
    return std::min(1.0, 2 * tail);
}

PairedTest paired_test(const std::vector<bool>& source, const std::vector<bool>& build) {
    PairedTest t;
    t.n = static_cast<int64_t>(std::min(source.size(), build.size()));
    for (size_t i = 0; i < static_cast<size_t>(t.n); ++i) {
        if (build[i] && !source[i]) ++t.build_only;
        if (source[i] && !build[i]) ++t.source_only;
    }
    t.p = mcnemar_exact_p(t.build_only, t.source_only);
    return t;
}

}  // namespace gguf_reap
