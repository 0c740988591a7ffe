// The K rules (model/keep_count.h), which rank and the budget search share: the range, expert_used_count,
// llama4's expert count, expert groups, and the count a --ratio asks for.
#include <gtest/gtest.h>

#include "model/keep_count.h"

namespace gguf_reap {
namespace {

std::optional<KeepCountBreach> breach(const KeepCountLimits& l, int64_t k) {
    const auto no = keep_count_refusal(l, k);
    return no ? std::optional<KeepCountBreach>(no->breach) : std::nullopt;
}

TEST(KeepCount, Range) {
    const KeepCountLimits l{8, 0, 1, "qwen3moe"};
    EXPECT_EQ(breach(l, 0), KeepCountBreach::kOutOfRange);
    EXPECT_EQ(breach(l, 9), KeepCountBreach::kOutOfRange);
    EXPECT_EQ(breach(l, -1), KeepCountBreach::kOutOfRange);
    for (int64_t k = 1; k <= 8; ++k) EXPECT_EQ(breach(l, k), std::nullopt) << k;
}

TEST(KeepCount, AtLeastTheExpertsUsedPerToken) {
    const KeepCountLimits l{8, 2, 1, "qwen3moe"};
    EXPECT_EQ(breach(l, 1), KeepCountBreach::kBelowUsed);
    EXPECT_EQ(breach(l, 2), std::nullopt);
    // Unknown (no --model): only the range.
    EXPECT_EQ(breach({8, 0, 1, ""}, 1), std::nullopt);
}

TEST(KeepCount, WholeGroups) {
    const KeepCountLimits l{16, 2, 4, "deepseek2"};
    EXPECT_EQ(breach(l, 6), KeepCountBreach::kNotGroupMultiple);
    EXPECT_EQ(breach(l, 8), std::nullopt);
    EXPECT_EQ(breach(l, 1), KeepCountBreach::kBelowUsed);  // the rules are checked in order
}

TEST(KeepCount, Llama4KeepsAllOf128) {
    const KeepCountLimits l{128, 1, 1, "llama4"};
    const auto no = keep_count_refusal(l, 96);
    ASSERT_TRUE(no);
    EXPECT_EQ(no->breach, KeepCountBreach::kCountChange);
    EXPECT_NE(no->why.find("exactly 128 experts"), std::string::npos) << no->why;
    EXPECT_EQ(breach(l, 128), std::nullopt);
    EXPECT_EQ(breach({16, 1, 1, "llama4"}, 12), std::nullopt);  // Scout: 16 experts, any count
}

TEST(KeepCount, RatioRoundsToTheNearestThenUpToWholeGroups) {
    EXPECT_EQ(keep_count_for_ratio({8, 0, 1, ""}, 0.25), 6);
    EXPECT_EQ(keep_count_for_ratio({10, 0, 1, ""}, 0.25), 7);    // 2.5 pruned rounds to 3 (half away from 0)
    EXPECT_EQ(keep_count_for_ratio({256, 8, 8, ""}, 0.3), 184);  // 256 - 77 = 179, up to 184
    EXPECT_EQ(keep_count_for_ratio({8, 0, 1, ""}, 0.99), 0);     // refused by keep_count_refusal
    EXPECT_EQ(breach({8, 0, 1, ""}, keep_count_for_ratio({8, 0, 1, ""}, 0.99)), KeepCountBreach::kOutOfRange);
}

}  // namespace
}  // namespace gguf_reap
