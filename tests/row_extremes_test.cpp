// The per-row pass of rank's read gives the bits of its documented lane order for any row, whatever
// the CPU and build, so a keeplist does not depend on the machine that made it.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <vector>

#include "ops/rank/row_extremes.h"

namespace gguf_reap {
namespace {

std::vector<uint8_t> bytes_of(const std::vector<float>& v, size_t misalign) {
    std::vector<uint8_t> b(misalign + 4 * v.size());
    if (!v.empty()) std::memcpy(b.data() + misalign, v.data(), 4 * v.size());
    return b;
}

TEST(RowExtremes, SumsInDoubleAndSkipsNaNForTheExtremes) {
    const std::vector<float> v = {1.5f, -2.0f, std::nanf(""), 16777216.0f, 1.0f, 1.0f,  0.25f, 3.0f, 4.0f,
                                  5.0f, 6.0f,  7.0f,          8.0f,        9.0f, 10.0f, 11.0f, 12.0f};
    const auto b = bytes_of(v, 0);
    const RowExtremes r = row_extremes(b.data(), static_cast<int64_t>(v.size()));
    EXPECT_TRUE(std::isnan(r.sum));
    EXPECT_EQ(r.max, 16777216.0f);
    EXPECT_EQ(r.min, -2.0f);
    std::vector<float> w(v);
    w[2] = 0.5f;
    const auto c = bytes_of(w, 0);
    // 2^24 + 1 + 1 is exact in double (float sums would round the ones away).
    EXPECT_EQ(row_extremes(c.data(), static_cast<int64_t>(w.size())).sum,
              16777216.0 + 1.5 - 2 + 0.5 + 2 + 0.25 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11 + 12);
}

// row_extremes.cpp's order, one float at a time: sums in four accumulators of four lanes (channels
// i+0..3, i+4..7, i+8..11, i+12..15 of every i = 0 mod 16), lanes folded as (a0 + a1) + (a2 + a3), then
// (l0 + l1) + (l2 + l3), then the tail one by one; maxima (and minima) in two sets of four lanes, the
// first taking channels i+0..3 then i+8..11, the second i+4..7 then i+12..15.
RowExtremes reference(const float* v, int64_t n) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    double a[4][4] = {};
    float mx[2][4], mn[2][4];
    for (auto& m : mx) std::fill(std::begin(m), std::end(m), -kInf);
    for (auto& m : mn) std::fill(std::begin(m), std::end(m), kInf);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int q = 0; q < 4; ++q)
            for (int j = 0; j < 4; ++j) {
                const float x = v[i + 4 * q + j];
                a[q][j] += static_cast<double>(x);
                float& m = mx[q % 2][j];
                m = x > m ? x : m;
                float& l = mn[q % 2][j];
                l = x < l ? x : l;
            }
    double lane[4];
    for (int j = 0; j < 4; ++j) lane[j] = (a[0][j] + a[1][j]) + (a[2][j] + a[3][j]);
    RowExtremes r;
    r.sum = (lane[0] + lane[1]) + (lane[2] + lane[3]);
    r.max = -kInf;
    r.min = kInf;
    for (int j = 0; j < 4; ++j) {
        r.max = std::max({r.max, mx[0][j], mx[1][j]});
        r.min = std::min({r.min, mn[0][j], mn[1][j]});
    }
    for (; i < n; ++i) {
        r.sum += v[i];
        r.max = v[i] > r.max ? v[i] : r.max;
        r.min = v[i] < r.min ? v[i] : r.min;
    }
    return r;
}

TEST(RowExtremes, GivesTheBitsOfItsLaneOrder) {
    uint64_t x = 88172645463325252u;
    const auto next = [&] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    };
    const float specials[] = {0.0f,
                              -0.0f,
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(),
                              std::nanf(""),
                              1e-45f,
                              3.4e38f};
    for (int64_t n : {0, 1, 15, 16, 17, 31, 32, 33, 100, 1024, 1031}) {
        for (int trial = 0; trial < 20; ++trial) {
            std::vector<float> v(static_cast<size_t>(n));
            for (auto& f : v) {
                const uint64_t r = next();
                f = (r & 63) == 0 ? specials[(r >> 6) % 7]
                                  : std::ldexp(static_cast<float>((r >> 8) & 0xFFFFFF),
                                               static_cast<int>((r >> 40) % 60) - 40);
                if ((r >> 50) & 1 && trial % 2) f = -f;
            }
            const auto b = bytes_of(v, static_cast<size_t>(trial % 4));
            const RowExtremes got = row_extremes(b.data() + trial % 4, n), want = reference(v.data(), n);
            // A NaN sum is any NaN (which one depends on the order of the operands of an add that
            // meets two of them; rank only asks whether the sum is NaN, then looks at the values).
            if (std::isnan(got.sum) || std::isnan(want.sum))
                ASSERT_TRUE(std::isnan(got.sum) && std::isnan(want.sum)) << n << " " << trial;
            else
                ASSERT_EQ(std::bit_cast<uint64_t>(got.sum), std::bit_cast<uint64_t>(want.sum))
                    << n << " " << trial;
            ASSERT_EQ(std::bit_cast<uint32_t>(got.max), std::bit_cast<uint32_t>(want.max))
                << n << " " << trial;
            ASSERT_EQ(std::bit_cast<uint32_t>(got.min), std::bit_cast<uint32_t>(want.min))
                << n << " " << trial;
        }
    }
}

}  // namespace
}  // namespace gguf_reap
