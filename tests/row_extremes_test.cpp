// The per-row pass of rank's read: its two builds (four-lane, and eight-lane for AVX-512) give the same
// bits for any row, so a keeplist does not depend on the CPU that made it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/row_extremes.h"

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

TEST(RowExtremes, BothBuildsGiveTheSameBits) {
    if (!avx512_available()) GTEST_SKIP() << "this CPU has no AVX-512: only one build runs here";
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
            const uint8_t* p = b.data() + trial % 4;
            const RowExtremes four = row_extremes_4(p, n), eight = row_extremes_avx512(p, n);
            // A NaN sum is any NaN (which one depends on the order of the operands of an add that
            // meets two of them; rank only asks whether the sum is NaN, then looks at the values).
            if (std::isnan(four.sum) || std::isnan(eight.sum))
                ASSERT_TRUE(std::isnan(four.sum) && std::isnan(eight.sum)) << n << " " << trial;
            else
                ASSERT_EQ(std::bit_cast<uint64_t>(four.sum), std::bit_cast<uint64_t>(eight.sum))
                    << n << " " << trial;
            ASSERT_EQ(std::bit_cast<uint32_t>(four.max), std::bit_cast<uint32_t>(eight.max))
                << n << " " << trial;
            ASSERT_EQ(std::bit_cast<uint32_t>(four.min), std::bit_cast<uint32_t>(eight.min))
                << n << " " << trial;
        }
    }
}

}  // namespace
}  // namespace gguf_reap
