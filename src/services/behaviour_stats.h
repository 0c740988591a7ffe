// The statistics of eval's behaviour rates (docs/eval.md, "Uncertainty"): a rate's 95 % Wilson score
// interval, and McNemar's exact test of a build against the source on the same prompts. Pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace gguf_reap {

// The normal quantile of 0.975.
inline constexpr double kWilsonZ = 1.959963984540054;
// A difference is called when the paired test's p-value is below this.
inline constexpr double kPairedAlpha = 0.05;

struct Interval {
    double lo = 0, hi = 0;
};

// The Wilson score interval at 95 % of k in n (0 <= k <= n, n > 0): exactly 0 at k = 0 and 1 at k = n,
// never outside [0, 1]. {0, 0} when n <= 0.
Interval wilson_interval(int64_t k, int64_t n);

// McNemar's exact test: the two-sided binomial p-value of `b` pairs one way and `c` the other among the
// b + c discordant pairs, under p = 1/2: min(1, 2 · P(X <= min(b, c))), X ~ Binomial(b + c, 1/2). 1 when
// b + c = 0.
double mcnemar_exact_p(int64_t b, int64_t c);

// A build against the source on the same n prompts, per prompt whether each had the outcome.
struct PairedTest {
    int64_t n = 0;            // pairs
    int64_t build_only = 0;   // the build had it, the source did not
    int64_t source_only = 0;  // the source had it, the build did not
    double p = 1;             // mcnemar_exact_p(build_only, source_only)
    bool differs() const { return p < kPairedAlpha; }
};
// Prompt i of the build is paired with prompt i of the source; n is the shorter's size (eval's are equal).
PairedTest paired_test(const std::vector<bool>& source, const std::vector<bool>& build);

}  // namespace gguf_reap
