// --imatrix-in/--imatrix-out: the imatrix pruned the same way as the model, in both formats, so that
// llama-quantize's size check (ne[0] × experts values per expert entry) holds for the pruned model.
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "splice_test_support.h"

namespace gguf_reap {
namespace {

using test::drop_spec;
using test::fixture;
using test::TempDir;

bool is_expert_entry(const std::string& name) {
    return name.find("_exps") != std::string::npos;
}

// Rows of `values` (ne0 per expert) for the kept ids.
std::vector<float> kept_rows(const std::vector<float>& v, size_t ne0, const std::vector<int64_t>& keep) {
    std::vector<float> out;
    for (int64_t e : keep)
        out.insert(out.end(), v.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(e) * ne0),
                   v.begin() + static_cast<ptrdiff_t>((static_cast<size_t>(e) + 1) * ne0));
    return out;
}

void check_pruned(const ImatrixFile& src, const ImatrixFile& out, const KeepList& kl,
                  const ShardSet& pruned_model) {
    ASSERT_EQ(out.kind(), src.kind());
    ASSERT_EQ(out.entries().size(), src.entries().size());
    EXPECT_EQ(out.datasets(), src.datasets());
    EXPECT_EQ(out.chunk_count(), src.chunk_count());
    EXPECT_EQ(out.chunk_size(), src.chunk_size());
    size_t pruned = 0;
    for (size_t i = 0; i < src.entries().size(); ++i) {
        const ImatrixEntry& s = src.entries()[i];
        const ImatrixEntry& o = out.entries()[i];
        ASSERT_EQ(o.name, s.name);
        const auto sv = src.read_values(s);
        const auto ov = out.read_values(o);
        if (!is_expert_entry(s.name)) {
            EXPECT_TRUE(ov == sv) << s.name;
            EXPECT_TRUE(out.read_counts(o) == src.read_counts(s)) << s.name;
            continue;
        }
        ++pruned;
        const auto& keep = kl.find_block(std::stoi(s.name.substr(4)))->keep;
        const TensorInfo& t = pruned_model.info(*pruned_model.find_tensor(s.name));
        const size_t ne0 = static_cast<size_t>(t.ne[0]);
        // llama-quantize: "imatrix size X is different from tensor size Y" unless nval = ne0 × ne2.
        EXPECT_EQ(static_cast<int64_t>(ov.size()), t.ne[0] * t.ne[2]) << s.name;
        EXPECT_TRUE(ov == kept_rows(sv, ne0, keep)) << s.name;
        if (src.kind() == ImatrixKind::kGguf) {
            EXPECT_EQ(o.n_mat, static_cast<int64_t>(keep.size()));
            EXPECT_TRUE(out.read_counts(o) == kept_rows(src.read_counts(s), 1, keep)) << s.name;
        } else {
            EXPECT_EQ(o.ncall, s.ncall);
        }
    }
    EXPECT_GT(pruned, 0u);
}

TEST(SpliceImatrix, FixtureImatricesBothFormats) {
    REQUIRE_FIXTURES();
    for (const char* ext : {"gguf", "dat"}) {
        for (const char* spec : {"drop-dead", "drop-live"}) {
            SCOPED_TRACE(fmt::format("{} {}", ext, spec));
            TempDir dir;
            const std::string in = fixture(fmt::format("imatrix/tiny-deepseek2.all.imatrix.{}", ext));
            SpliceOptions o;
            o.imatrix_out = dir.file(fmt::format("pruned.imatrix.{}", ext));
            auto s = test::splice_api(fixture("models/tiny-deepseek2-Q8_0.gguf"), drop_spec(spec),
                                      dir.file("m"), o, true, in);
            ImatrixFile src = ImatrixFile::open(in);
            ImatrixFile out = ImatrixFile::open(o.imatrix_out);
            ShardSet pruned = ShardSet::open(dir.file("m.gguf"));
            check_pruned(src, out, s->keeplist, pruned);
            EXPECT_EQ(std::filesystem::file_size(o.imatrix_out), s->opened->plan->imatrix->job.size);
            if (std::string(ext) == "gguf") {
                // Same KVs byte for byte; 9 expert entries × 2 tensors lose 3 of 16 rows.
                auto f = InputFile::open(o.imatrix_out);
                const Header h = parse_gguf_header(*f);
                const Header sh = parse_gguf_header(src.file());
                ASSERT_EQ(h.kvs.size(), sh.kvs.size());
                for (size_t i = 0; i < h.kvs.size(); ++i) EXPECT_EQ(h.kvs[i].raw, sh.kvs[i].raw);
                EXPECT_EQ(s->opened->plan->imatrix->sliced_tensors, 18u);
            }
            if (std::string(spec) == "drop-dead" && std::string(ext) == "gguf") {
                // Dead experts were never routed: the routing counts lose nothing.
                for (const ImatrixEntry& e : out.entries()) {
                    if (!is_expert_entry(e.name)) continue;
                    float a = 0, b = 0;
                    for (float c : out.read_counts(e)) a += c;
                    for (float c : src.read_counts(*src.find(e.name))) b += c;
                    EXPECT_EQ(a, b) << e.name;
                }
            }
        }
    }
}

TEST(SpliceImatrix, GeneratedModelWithMtpBothFormats) {
    TempDir dir;
    ASSERT_EQ(
        test::run_gen(
            fmt::format("model --skeleton -o {} --blocks 3 --dense-blocks 1 --nextn 1 --experts 12 --used 2 "
                        "--fused-gate-up",
                        dir.file("m.gguf")))
            .exit_code,
        0);
    const std::string kl =
        test::write_text(dir.file("k.json"), R"({"drop": {"1": [0, 5], "2": [11, 3], "3": [6, 7]}})");
    for (const char* format : {"gguf", "dat"}) {
        SCOPED_TRACE(format);
        const std::string in = dir.file(fmt::format("in.{}", format));
        ASSERT_EQ(
            test::run_gen(fmt::format("imatrix --model {} --format {} -o {}", dir.file("m.gguf"), format, in))
                .exit_code,
            0);
        SpliceOptions o;
        o.imatrix_out = dir.file(fmt::format("out.{}", format));
        auto s = test::splice_api(dir.file("m.gguf"), kl, dir.file(fmt::format("p-{}", format)), o, true, in);
        check_pruned(ImatrixFile::open(in), ImatrixFile::open(o.imatrix_out), s->keeplist,
                     ShardSet::open(dir.file(fmt::format("p-{}.gguf", format))));
    }
}

TEST(SpliceImatrix, ImatrixOfAnotherModelIsRefused) {
    TempDir dir;
    ASSERT_EQ(test::run_gen(
                  fmt::format("model --skeleton -o {} --blocks 2 --experts 16 --used 2", dir.file("a.gguf")))
                  .exit_code,
              0);
    ASSERT_EQ(test::run_gen(
                  fmt::format("model --skeleton -o {} --blocks 2 --experts 8 --used 2", dir.file("b.gguf")))
                  .exit_code,
              0);
    ASSERT_EQ(
        test::run_gen(fmt::format("imatrix --model {} -o {}", dir.file("b.gguf"), dir.file("b.imatrix")))
            .exit_code,
        0);
    const std::string kl = test::write_text(dir.file("k.json"), R"({"drop": {"1": [0]}})");
    SpliceOptions o;
    o.imatrix_out = dir.file("out.imatrix");
    try {
        test::splice_api(dir.file("a.gguf"), kl, dir.file("p"), o, false, dir.file("b.imatrix"));
        FAIL() << "an 8-expert imatrix accepted for a 16-expert model";
    } catch (const InputError& e) {
        EXPECT_EQ(e.file(), dir.file("b.imatrix"));
        EXPECT_NE(e.detail().find("rows, but the model has 16 experts per block"), std::string::npos)
            << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.imatrix")));
}

}  // namespace
}  // namespace gguf_reap
