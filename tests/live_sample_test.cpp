// The sample of architectures whose loader verdicts CI asks llama.cpp about again
// (tests/data/live-sample.txt, test_loader_verdicts), unless GGUF_REAP_LIVE_FULL=1 asks about every row
// (docs/reliability.md, "Live tests"). The sample must hold an architecture of every loader family: for every
// column of the architecture table (model/architectures.cpp), every value some architecture has, and every
// flag and optional-tensor bit. A new row with a value no sampled architecture has fails here, naming the
// value and an architecture that has it.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "model/tensor_table.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

// The loader-family values of one architecture, each as "column=value".
std::set<std::string> families(const ArchInfo& a) {
    std::set<std::string> f{
        fmt::format("status={}", static_cast<int>(a.status)),
        fmt::format("expert width={}", static_cast<int>(a.width_key)),
        fmt::format("shared width={}", static_cast<int>(a.shared_width)),
        fmt::format("shared count={}", static_cast<int>(a.shared_count)),
        fmt::format("moe blocks={}", static_cast<int>(a.moe_blocks)),
        fmt::format("dense ff={}", a.dense_ff),
        fmt::format("look-alikes={}", !a.look_alikes.empty()),
    };
    for (const RequiredKey& k : a.required_keys)
        f.insert(k.positive ? "requires a key > 0" : "requires a key");
    for (int bit = 0; bit < 8; ++bit) {
        if (a.flags & (1u << bit)) f.insert(fmt::format("flag {}", 1u << bit));
        if (a.takes & (1u << bit)) f.insert(fmt::format("takes {}", 1u << bit));
    }
    return f;
}

TEST(LiveSample, HoldsAnArchitectureOfEveryLoaderFamily) {
    const auto archs = test::live_sample_archs();
    ASSERT_FALSE(archs.empty()) << "tests/data/live-sample.txt lists no architecture";
    std::set<std::string> covered;
    for (const std::string& name : archs) {
        const ArchInfo* a = arch_info(name);
        ASSERT_NE(a, nullptr) << name << " (tests/data/live-sample.txt) is not in the architecture table";
        const auto f = families(*a);
        covered.insert(f.begin(), f.end());
    }
    for (const ArchInfo& a : architectures())
        for (const std::string& f : families(a))
            EXPECT_TRUE(covered.count(f)) << "no sampled architecture has " << f << " (" << a.name
                                          << " has it): add one to tests/data/live-sample.txt";
}

}  // namespace
}  // namespace gguf_reap
