// The loader's shared-width rules (model/loader_ffn.h), read in one place: what they make of a width cut
// (shared_width_under_cut, which width pruning asks) and the width they give (shared_width, which audit
// and width pruning ask), for the architectures of each rule.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "model/loader_ffn.h"
#include "model/tensor_table.h"

namespace gguf_reap {
namespace {

const ArchInfo& arch(std::string_view name) {
    const ArchInfo* a = arch_info(name);
    if (!a) throw std::logic_error(std::string(name) + " is not in the architecture table");
    return *a;
}

TEST(SharedWidthUnderCut, CountAbsorbsWhereTheWidthIsRoutedTimesCount) {
    for (const char* a : {"deepseek2", "kimi-k3", "kimi-linear", "glm4moe"}) {
        const auto c = shared_width_under_cut(arch(a));
        EXPECT_TRUE(c.count_absorbs) << a;
        EXPECT_FALSE(c.own_key_needed) << a;
        EXPECT_FALSE(c.equals_routed) << a;
    }
}

TEST(SharedWidthUnderCut, OwnKeyWrittenWhereTheLoaderFallsBackToTheRoutedWidth) {
    for (const char* a : {"bailingmoe3", "cohere2moe", "laguna", "exaone-moe", "hy_v3"}) {
        const auto c = shared_width_under_cut(arch(a));
        EXPECT_TRUE(c.own_key_needed) << a;
        EXPECT_FALSE(c.own_key_times_count) << a;
        EXPECT_FALSE(c.count_absorbs) << a;
    }
    const auto b2 = shared_width_under_cut(arch("bailingmoe2"));
    EXPECT_TRUE(b2.own_key_needed);
    EXPECT_TRUE(b2.own_key_times_count);
}

TEST(SharedWidthUnderCut, FeedForwardFallbackMattersOnlyWhereItIsTheExpertWidth) {
    // hunyuan-moe reads the expert width from feed_forward_length, which a cut rewrites; qwen2moe from its
    // own key, so its feed_forward_length fallback stays.
    EXPECT_TRUE(shared_width_under_cut(arch("hunyuan-moe")).own_key_needed);
    EXPECT_FALSE(shared_width_under_cut(arch("qwen2moe")).own_key_needed);
}

TEST(SharedWidthUnderCut, NothingToDoOrNoCut) {
    for (const char* a : {"qwen3moe", "nemotron_h", "granitemoe", "gpt-oss"}) {
        const auto c = shared_width_under_cut(arch(a));
        EXPECT_FALSE(c.count_absorbs || c.own_key_needed || c.equals_routed) << a;
    }
    EXPECT_TRUE(shared_width_under_cut(arch("llama4")).equals_routed);
}

// The keys of one model, by full name.
struct Keys {
    std::map<std::string, Kv> kv;
    Keys& u32(const std::string& key, uint32_t v) {
        kv.insert_or_assign(key, Kv::make_u32(key, v));
        return *this;
    }
    KvLookup lookup() const {
        return [this](const std::string& key) -> const Kv* {
            auto it = kv.find(key);
            return it == kv.end() ? nullptr : &it->second;
        };
    }
};

std::optional<uint64_t> shared(std::string_view a, const Keys& k, uint64_t routed = 64) {
    const auto w = shared_width(arch(a), k.lookup(), Derived{routed, "routed"}, 1);
    return w ? std::optional<uint64_t>(w->value) : std::nullopt;
}

TEST(SharedWidth, RoutedTimesCount) {
    EXPECT_EQ(shared("deepseek2", Keys().u32("deepseek2.expert_shared_count", 2)), 128u);
    EXPECT_EQ(shared("deepseek2", Keys()), 0u);
    EXPECT_EQ(shared("kimi-k3", Keys().u32("kimi-k3.expert_shared_count", 0)), 64u);  // max(count, 1)
}

TEST(SharedWidth, OwnKeyFirst) {
    EXPECT_EQ(shared("laguna", Keys().u32("laguna.expert_shared_feed_forward_length", 96)), 96u);
    EXPECT_EQ(shared("bailingmoe2", Keys()
                                        .u32("bailingmoe2.expert_shared_feed_forward_length", 96)
                                        .u32("bailingmoe2.expert_shared_count", 2)),
              192u);
    EXPECT_EQ(shared("exaone-moe", Keys()), 64u);
    EXPECT_EQ(shared("qwen3moe", Keys()), std::nullopt);
}

// How the count is read is a column of the table (SharedCount), not a test of the architecture's name.
TEST(SharedWidth, CountReadAsTheTableSays) {
    // bailingmoe3 (and kimi-*): max(count, 1).
    EXPECT_EQ(shared("bailingmoe3", Keys().u32("bailingmoe3.expert_shared_count", 0)), 64u);
    EXPECT_EQ(shared("bailingmoe3", Keys().u32("bailingmoe3.expert_shared_count", 2)), 128u);
    // laguna: 1 where the key is absent, and the sentence says so.
    const Keys none;
    const auto laguna = shared_width(arch("laguna"), none.lookup(), Derived{64, "F = 64"}, 1);
    ASSERT_TRUE(laguna);
    EXPECT_EQ(laguna->value, 64u);
    EXPECT_EQ(laguna->why, "F = 64 × 1 (default)");
    EXPECT_EQ(shared("laguna", Keys().u32("laguna.expert_shared_count", 0)), 0u);
    // cohere2moe: no shared experts without a count, whatever the own key says.
    EXPECT_EQ(shared("cohere2moe", Keys().u32("cohere2moe.expert_shared_feed_forward_length", 96)), 0u);
    EXPECT_EQ(shared("cohere2moe", Keys()
                                       .u32("cohere2moe.expert_shared_feed_forward_length", 96)
                                       .u32("cohere2moe.expert_shared_count", 1)),
              96u);
    EXPECT_EQ(shared("cohere2moe", Keys().u32("cohere2moe.expert_shared_count", 2)), 128u);
    // Every other architecture reads the count as it is: 0 where absent.
    EXPECT_EQ(shared("bailingmoe", Keys()), 0u);
}

TEST(SharedWidth, RequiredKeysAreAColumn) {
    const auto suffixes = [](std::string_view a) {
        std::string s;
        for (const RequiredKey& k : arch(a).required_keys)
            s += std::string(k.suffix) + (k.positive ? " > 0" : "") + ";";
        return s;
    };
    EXPECT_EQ(suffixes("kimi-k3"), "expert_shared_count;");
    EXPECT_EQ(suffixes("ernie4_5-moe"), "interleave_moe_layer_step > 0;");
    EXPECT_EQ(suffixes("grovemoe"), "experts_per_group > 0;");
    EXPECT_EQ(suffixes("minimax-m2"), "expert_feed_forward_length;");
    EXPECT_EQ(suffixes("deepseek2"), "");
}

}  // namespace
}  // namespace gguf_reap
