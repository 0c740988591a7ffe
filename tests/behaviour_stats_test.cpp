// The behaviour rates' statistics (services/behaviour_stats.h, docs/eval.md "Uncertainty") against a
// reference computed independently of gguf-reap with python3 (the script is in the comment below): the
// Wilson bounds in 50-digit decimal arithmetic, McNemar's exact p-values as exact fractions.
//
//   from decimal import Decimal, getcontext; from fractions import Fraction; from math import comb
//   getcontext().prec = 50; z = Decimal("1.959963984540054")
//   def wilson(k, n):
//       k, n = Decimal(k), Decimal(n); p = k / n; z2 = z * z; den = 1 + z2 / n
//       c = (p + z2 / (2 * n)) / den; h = z * (p * (1 - p) / n + z2 / (4 * n * n)).sqrt() / den
//       return (c - h, c + h)
//   def mcnemar(b, c):
//       n = b + c
//       return Fraction(1) if n == 0 else min(Fraction(1), 2 * sum(Fraction(comb(n, i), 2 ** n)
//                                                                  for i in range(min(b, c) + 1)))
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "services/behaviour_stats.h"

namespace gguf_reap {
namespace {

struct WilsonRef {
    int64_t k, n;
    double lo, hi;
};

// At k = 0 and k = n the reference's bound is 0 or 1 up to rounding (-1e-52 for 0 of 220), which the
// interval states exactly.
constexpr WilsonRef kWilson[] = {
    {0, 8, 0.0, 3.24407564883880213e-1},
    {1, 8, 2.24174914500566728e-2, 4.70888182212853487e-1},
    {7, 8, 5.29111817787146513e-1, 9.77582508549943327e-1},
    {8, 8, 6.75592435116119787e-1, 1.0},
    {2, 6, 9.67714111057804814e-2, 7.00006684861607960e-1},
    {1, 24, 7.39345616550578638e-3, 2.02418064786559383e-1},
    {72, 2000, 2.86846067227836695e-2, 4.50944131542190534e-2},  // 3.6 % and 7.2 % at n = 2,000
    {144, 2000, 6.14731333172613636e-2, 8.41678591554911480e-2},
    {29, 100, 2.10148357491222764e-1, 3.85388911755711220e-1},
    {0, 220, 0.0, 1.71615161951356192e-2},
};

TEST(BehaviourStats, WilsonIntervalsEqualTheReference) {
    for (const WilsonRef& w : kWilson) {
        const Interval i = wilson_interval(w.k, w.n);
        EXPECT_NEAR(i.lo, w.lo, 1e-14 + 1e-12 * w.lo) << w.k << " of " << w.n;
        EXPECT_NEAR(i.hi, w.hi, 1e-12 * w.hi) << w.k << " of " << w.n;
    }
}

TEST(BehaviourStats, WilsonBoundsAreExactAtTheEnds) {
    for (int64_t n : {1, 2, 3, 8, 24, 1000, 100000}) {
        EXPECT_EQ(wilson_interval(0, n).lo, 0.0) << n;
        EXPECT_EQ(wilson_interval(n, n).hi, 1.0) << n;
        EXPECT_GT(wilson_interval(0, n).hi, 0.0) << n;  // a rate of 0 still has an interval above it
        EXPECT_LT(wilson_interval(n, n).lo, 1.0) << n;
    }
    const Interval none = wilson_interval(0, 0);
    EXPECT_EQ(none.lo, 0.0);
    EXPECT_EQ(none.hi, 0.0);
}

struct McNemarRef {
    int64_t b, c;
    double p;
};

constexpr McNemarRef kMcNemar[] = {
    {0, 0, 1.0},
    {1, 0, 1.0},
    {5, 0, 6.25e-2},  // 5 discordant pairs, all one way: not enough at 5 %
    {6, 0, 3.125e-2},
    {0, 6, 3.125e-2},
    {6, 1, 1.25e-1},
    {10, 2, 3.857421875e-2},
    {3, 3, 1.0},
    {4, 1, 3.75e-1},
    {60, 30, 2.06026568096307578e-3},
    {100, 70, 2.58443875813416900e-2},
    {1000, 900, 2.31088451089010716e-2},
};

TEST(BehaviourStats, McNemarExactPEqualsTheReference) {
    for (const McNemarRef& m : kMcNemar)
        EXPECT_NEAR(mcnemar_exact_p(m.b, m.c), m.p, 1e-10 * m.p) << m.b << " against " << m.c;
}

TEST(BehaviourStats, PairedTestCountsTheDiscordantPairsAndCallsAt5Percent) {
    // 8 prompts: the build has the outcome on 6 where the source does not, the source on none alone.
    const std::vector<bool> s{false, false, false, false, false, false, true, true};
    const std::vector<bool> b{true, true, true, true, true, true, true, true};
    const PairedTest t = paired_test(s, b);
    EXPECT_EQ(t.n, 8);
    EXPECT_EQ(t.build_only, 6);
    EXPECT_EQ(t.source_only, 0);
    EXPECT_DOUBLE_EQ(t.p, 3.125e-2);
    EXPECT_TRUE(t.differs());
    // One prompt fewer each way: 5 of 0, p = 0.0625, no difference called.
    const std::vector<bool> s2{true, false, false, false, false, false, true, true};
    const PairedTest u = paired_test(s2, b);
    EXPECT_EQ(u.build_only, 5);
    EXPECT_DOUBLE_EQ(u.p, 6.25e-2);
    EXPECT_FALSE(u.differs());
    // The same rate on other prompts is not "no change" either way: 3 and 3 discordant, p = 1.
    const std::vector<bool> s3{true, true, true, false, false, false};
    const std::vector<bool> b3{false, false, false, true, true, true};
    const PairedTest v = paired_test(s3, b3);
    EXPECT_EQ(v.build_only, 3);
    EXPECT_EQ(v.source_only, 3);
    EXPECT_EQ(v.p, 1.0);
}

}  // namespace
}  // namespace gguf_reap
