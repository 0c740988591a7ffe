#include "ops/rank/row_extremes.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace gguf_reap {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The end: the four lane sums a[j] = (a0[j] + a1[j]) + (a2[j] + a3[j]) added in a
// fixed order, the extremes of the lanes of mx0 (mx[0..3]) and mx1 (mx[4..7]) taken in a fixed order,
// then the last channels from i to n one by one.
RowExtremes fold(const double (&a)[4], const float (&mx)[8], const float (&mn)[8], const uint8_t* x,
                 int64_t i, int64_t n) {
    RowExtremes r;
    r.sum = (a[0] + a[1]) + (a[2] + a[3]);
    r.max = -kInf;
    r.min = kInf;
    for (int j = 0; j < 4; ++j) {
        r.max = std::max({r.max, mx[j], mx[j + 4]});
        r.min = std::min({r.min, mn[j], mn[j + 4]});
    }
    for (; i < n; ++i) {
        float v;
        std::memcpy(&v, x + 4 * i, 4);
        r.sum += v;
        r.max = v > r.max ? v : r.max;
        r.min = v < r.min ? v : r.min;
    }
    return r;
}

}  // namespace

// Four double accumulators a0..a3 of four lanes each take channels i+0..3, i+4..7, i+8..11, i+12..15
// of every i = 0 mod 16; two float maxima (and minima) take channels i+0..3 and i+8..11 (mx0), i+4..7
// and i+12..15 (mx1), in that order. GCC/Clang vector extensions give SIMD for the target without
// -ffast-math, so sums stay in double and NaNs propagate. One portable build (SSE2 on x86-64): an AVX2
// clone (target_clones) measured no faster on the whole rank once reads were plain preads
// (docs/perf/rank.md).
RowExtremes row_extremes(const uint8_t* x, int64_t n) {
    using F4 = float __attribute__((vector_size(16)));
    using D4 = double __attribute__((vector_size(32)));
    D4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
    F4 mx0 = {-kInf, -kInf, -kInf, -kInf}, mx1 = mx0, mn0 = {kInf, kInf, kInf, kInf}, mn1 = mn0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        F4 v0, v1, v2, v3;
        std::memcpy(&v0, x + 4 * i, 16);
        std::memcpy(&v1, x + 4 * (i + 4), 16);
        std::memcpy(&v2, x + 4 * (i + 8), 16);
        std::memcpy(&v3, x + 4 * (i + 12), 16);
        a0 += __builtin_convertvector(v0, D4);
        a1 += __builtin_convertvector(v1, D4);
        a2 += __builtin_convertvector(v2, D4);
        a3 += __builtin_convertvector(v3, D4);
        mx0 = v0 > mx0 ? v0 : mx0;
        mx1 = v1 > mx1 ? v1 : mx1;
        mx0 = v2 > mx0 ? v2 : mx0;
        mx1 = v3 > mx1 ? v3 : mx1;
        mn0 = v0 < mn0 ? v0 : mn0;
        mn1 = v1 < mn1 ? v1 : mn1;
        mn0 = v2 < mn0 ? v2 : mn0;
        mn1 = v3 < mn1 ? v3 : mn1;
    }
    const D4 lanes = (a0 + a1) + (a2 + a3);
    double a[4];
    float mx[8], mn[8];
    for (int j = 0; j < 4; ++j) {
        a[j] = lanes[j];
        mx[j] = mx0[j];
        mx[j + 4] = mx1[j];
        mn[j] = mn0[j];
        mn[j + 4] = mn1[j];
    }
    return fold(a, mx, mn, x, i, n);
}

}  // namespace gguf_reap
