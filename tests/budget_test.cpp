// budget (rank --fit, estimate --fit / --sweep): the budget parser, the legal K, and the search: the
// K chosen fits, K + 1 does not, and each size equals the one plan_splice gives for a real keeplist.
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/units.h"
#include "services/budget_search.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

std::string usage_error(const std::string& text) {
    try {
        parse_budget(text);
    } catch (const UsageError& e) {
        return test::shown(e);
    }
    return "(no error)";
}

TEST(Budget, ParsesSizeAndMemory) {
    const Budget s = parse_budget("size=277GB");
    EXPECT_EQ(s.kind, BudgetKind::kSize);
    EXPECT_EQ(s.bytes, 277000000000u);
    EXPECT_EQ(budget_words(s), "277 GB on disk");
    const Budget m = parse_budget("memory=288GiB,ctx=8192,overhead=22GiB,tp=3");
    EXPECT_EQ(m.kind, BudgetKind::kMemory);
    EXPECT_EQ(m.bytes, 288ull << 30);
    EXPECT_EQ(m.ctx, 8192u);
    EXPECT_EQ(m.overhead, 22ull << 30);
    EXPECT_EQ(m.tp, 3u);
    EXPECT_EQ(budget_words(m),
              "288 GiB per GPU at tensor parallel 3 with 8,192 tokens of context and 22.0 GiB of overhead");
    EXPECT_EQ(budget_words(parse_budget("memory=288GiB,ctx=8192")), "288 GiB with 8,192 tokens of context");
    EXPECT_EQ(budget_words(parse_budget("memory=288GiB")), "288 GiB");
}

TEST(Budget, RefusesBadBudgetsInOneLine) {
    EXPECT_EQ(
        usage_error("size=abc"),
        "--fit 'size=abc': 'abc' is not a size (write e.g. 141GiB, 80GB, 512MB; units: B, KB, MB, GB, TB "
        "(or K, M, G, T) and KiB, MiB, GiB, TiB)");
    // A size without a unit is refused, naming the units: 3.5 is not 3.5 bytes.
    EXPECT_EQ(
        usage_error("size=3.5"),
        "--fit 'size=3.5': '3.5' has no unit: write 3.5GB or 3.5GiB (units: B, KB, MB, GB, TB (or K, M, "
        "G, T) and KiB, MiB, GiB, TiB)");
    EXPECT_EQ(usage_error("memory=80GB,overhead=1024"),
              "--fit 'memory=80GB,overhead=1024': '1024' has no unit: write 1024GB or 1024GiB (units: B, KB, "
              "MB, GB, TB (or K, M, G, T) and KiB, MiB, GiB, TiB)");
    EXPECT_EQ(usage_error("memory=0"), "--fit 'memory=0': the budget must be more than 0 bytes");
    EXPECT_EQ(usage_error("memory=1G,ctx=-1"),
              "--fit 'memory=1G,ctx=-1': ctx '-1' is not a number of tokens (a whole number, e.g. 8192)");
    EXPECT_EQ(usage_error("memory=1G,ctx=1,ctx=2"), "--fit 'memory=1G,ctx=1,ctx=2': 'ctx' is given twice");
    EXPECT_EQ(usage_error("memory=1G,size=1G"),
              "--fit 'memory=1G,size=1G': give one budget, size= or memory=; write size=SIZE, or "
              "memory=SIZE[,ctx=N][,overhead=SIZE][,tp=N]");
    EXPECT_EQ(usage_error("277GB"),
              "--fit '277GB': '277GB' is not KEY=VALUE; write size=SIZE, or "
              "memory=SIZE[,ctx=N][,overhead=SIZE][,tp=N]");
    EXPECT_EQ(usage_error("size=1G,tp=2"),
              "--fit 'size=1G,tp=2': 'tp' is for a memory budget; a size budget takes no options");
}

TEST(Budget, LegalCountsFollowEveryRule) {
    KeepRules r;
    r.expert_count = 16;
    r.floor = 4;
    r.groups = 2;
    r.arch = "deepseek2";
    EXPECT_EQ(r.legal(), (std::vector<int64_t>{4, 6, 8, 10, 12, 14, 16}));
    r.min_keep = 8;
    r.min_why = "blk.1 has 4 protected experts";
    r.max_keep = 12;
    r.max_why = "blk.2 has 2 dead experts";
    EXPECT_EQ(r.legal(), (std::vector<int64_t>{8, 10, 12}));
    EXPECT_EQ(*r.refusal(14), "more than the live experts: blk.2 has 2 dead experts");
    EXPECT_EQ(*r.refusal(6), "fewer than the protected experts: blk.1 has 4 protected experts");
    EXPECT_NE(r.refusal(9)->find("expert_group_count = 2"), std::string::npos);
    // llama4 computes another function at other than exactly 128 experts when it had 128.
    KeepRules l;
    l.expert_count = 128;
    l.arch = "llama4";
    EXPECT_TRUE(l.refusal(64).has_value());
    // Every 1/16 of E that is legal, plus the extras, once each.
    EXPECT_EQ(sweep_counts(r, {11, 12}), (std::vector<int64_t>{8, 10, 11, 12}));
}

TEST(Budget, FitIsTightAndEqualsSplicePlan) {
    test::TempDir dir;
    ASSERT_EQ(
        test::run_gen(fmt::format("model --skeleton --experts 16 --used 4 --shards 2 -o {}", dir.file("m")))
            .exit_code,
        0);
    const std::string m = dir.file("m-00001-of-00002.gguf");
    const BudgetModel bm(m, "", false, "gguf-reap test");
    const KeepRules rules = model_keep_rules(bm.layout());
    // The bytes the real splice writes keeping K experts (rank --keep K on a generated imatrix, then
    // splice; both shards), which the budget's sizes must equal.
    ASSERT_EQ(test::run_gen(
                  fmt::format("imatrix --model {} --domain chat --seed 3 -o {}", m, dir.file("chat.gguf")))
                  .exit_code,
              0);
    const auto spliced_bytes = [&](int64_t k) {
        const std::string rank = dir.file(fmt::format("rank{}", k)),
                          out = dir.file(fmt::format("out{}/p", k));
        std::filesystem::create_directory(dir.file(fmt::format("out{}", k)));
        EXPECT_EQ(test::run_cli(fmt::format("-q rank --model {} --imatrix chat={} --keep {} -o {}", m,
                                            dir.file("chat.gguf"), k, rank))
                      .exit_code,
                  0);
        EXPECT_EQ(test::run_cli(fmt::format("-q splice {} --keeplist {}/keeplist.json -o {}", m, rank, out))
                      .exit_code,
                  0);
        uint64_t n = 0;
        for (const auto& e : std::filesystem::directory_iterator(dir.file(fmt::format("out{}", k))))
            n += std::filesystem::file_size(e.path());
        return n;
    };
    const uint64_t at9 = spliced_bytes(9), at10 = spliced_bytes(10);
    EXPECT_EQ(bm.figures(9).file_bytes, at9);
    EXPECT_EQ(bm.figures(10).file_bytes, at10);
    ASSERT_LT(at9, at10);
    for (const uint64_t x : {at9, at10 - 1}) {
        const FitAnswer a = fit_budget(bm, parse_budget(fmt::format("size={}B", x)), rules);
        EXPECT_EQ(a.at.k, 9);
        EXPECT_EQ(a.at.value, at9);
        ASSERT_TRUE(a.above);
        EXPECT_EQ(a.above->value, at10);
        EXPECT_FALSE(a.above_fits());
    }
    // Size grows with K at every step, as the binary search assumes.
    for (int64_t k = 1; k < 16; ++k) EXPECT_LT(bm.figures(k).file_bytes, bm.figures(k + 1).file_bytes) << k;
    // Everything fits: K = E and no K + 1, said as such.
    const FitAnswer all = fit_budget(bm, parse_budget("size=1G"), rules);
    EXPECT_EQ(all.at.k, 16);
    EXPECT_FALSE(all.above);
    EXPECT_EQ(fit_json(all)["nothing_to_prune"], true);
    EXPECT_EQ(fit_json(fit_budget(bm, parse_budget(fmt::format("size={}B", at9)), rules))["nothing_to_prune"],
              false);
    const std::string said = render(fit_sentence(all), {});
    EXPECT_NE(said.find("; all 16 experts fit 1 G on disk: nothing to prune"), std::string::npos) << said;
    // Memory: weights at tp + KV cache + overhead, as estimate's fit_row.
    EXPECT_EQ(bm.figures(7).file_bytes, spliced_bytes(7));
    const Budget mem = parse_budget(
        fmt::format("memory={}B,ctx=100,tp=2", bm.point(parse_budget("memory=1B,tp=2,ctx=100"), 7).value));
    const FitAnswer am = fit_budget(bm, mem, rules);
    EXPECT_EQ(am.at.k, 7);
    EXPECT_EQ(am.at.row.need(), fit_row(bm.figures(7), bm.kv(), 2, 100, 0).need());
}

}  // namespace
}  // namespace gguf_reap

namespace gguf_reap {
namespace {

// The one parser of whole numbers in options (budgets, --chunks).
TEST(Units, ParseWholeTakesDigitsOnly) {
    EXPECT_EQ(parse_whole("4096", 65536), 4096u);
    EXPECT_EQ(parse_whole("0", 10), 0u);
    EXPECT_EQ(parse_whole("65536", 65536), 65536u);
    EXPECT_EQ(parse_whole("65537", 65536), std::nullopt);
    for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1.5", "1e3", "12k", "99999999999999999999999"})
        EXPECT_EQ(parse_whole(bad, UINT64_MAX), std::nullopt) << bad;
}

// Every size option's one parser: a unit always (but for 0), decimal or binary.
TEST(Units, ParseSizeNeedsAUnit) {
    EXPECT_EQ(parse_size("80G"), 80000000000u);
    EXPECT_EQ(parse_size("80gb"), 80000000000u);
    EXPECT_EQ(parse_size("1.5GiB"), 3ull << 29);
    EXPECT_EQ(parse_size("4096B"), 4096u);
    EXPECT_EQ(parse_size("512k"), 512000u);
    EXPECT_EQ(parse_size("0"), 0u);
    for (const char* bad : {"80", "3.5", "1", "", "GB", "80Q", "-1G", "80 GB"})
        EXPECT_EQ(parse_size(bad), std::nullopt) << bad;
    EXPECT_EQ(size_refusal("80"),
              "has no unit: write 80GB or 80GiB (units: B, KB, MB, GB, TB (or K, M, G, T) and KiB, MiB, GiB, "
              "TiB)");
    EXPECT_EQ(size_refusal("lots").substr(0, 15), "is not a size (");
}

}  // namespace
}  // namespace gguf_reap
