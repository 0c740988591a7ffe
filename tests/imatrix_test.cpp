// The imatrix reader: llama.cpp-made files of both formats against expected.json, ranged reads, and
// hand-made malformed legacy .dat files, each refused with its message.
#include <gtest/gtest.h>

#include <cmath>

#include "format/imatrix.h"
#include "gguf_reap/error.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::Bytes;
using test::expected_json;
using test::fixture;

std::string input_error(const std::string& path) {
    try {
        ImatrixFile::open(path);
    } catch (const InputError& e) {
        return e.what();
    }
    return "(no error)";
}

// A legacy .dat with one entry of `vals`, plus the trailer.
Bytes legacy(const std::string& name, int32_t ncall, const std::vector<float>& vals, bool trailer = true) {
    Bytes b;
    b.i32(1)
        .i32(static_cast<int32_t>(name.size()))
        .raw(name.data(), name.size())
        .i32(ncall)
        .i32(static_cast<int32_t>(vals.size()));
    for (float v : vals) b.f32(v);
    if (trailer) b.i32(7).i32(4).raw("data", 4);
    return b;
}

TEST(ImatrixReader, LegacyFixturesMatchExpectedJson) {
    REQUIRE_FIXTURES();
    for (const auto& [rel, exp] : expected_json()["imatrix"].items()) {
        if (exp["format"] != "dat") continue;
        SCOPED_TRACE(rel);
        ImatrixFile im = ImatrixFile::open(fixture(rel));
        EXPECT_EQ(im.kind(), ImatrixKind::kLegacy);
        ASSERT_EQ(im.entries().size(), exp["entries"].size());
        for (size_t i = 0; i < im.entries().size(); ++i) {
            const ImatrixEntry& e = im.entries()[i];
            EXPECT_EQ(e.name, exp["entries"][i].get<std::string>());
            EXPECT_EQ(e.ncall, exp["ncall"][e.name].get<int32_t>());
            EXPECT_EQ(e.nval, exp["nval"][e.name].get<int64_t>());
        }
        EXPECT_EQ(*im.chunk_count(), exp["last_chunk"].get<uint64_t>());
        ASSERT_EQ(im.datasets().size(), 1u);
        EXPECT_EQ(im.datasets()[0], exp["dataset"].get<std::string>());
    }
}

TEST(ImatrixReader, LegacyStoresNeverRoutedExpertsAsExactlyNcall) {
    REQUIRE_FIXTURES();
    ImatrixFile im = ImatrixFile::open(fixture("imatrix/tiny-deepseek2.chat.imatrix.dat"));
    const ImatrixEntry* e = im.find("blk.2.ffn_down_exps.weight");
    ASSERT_NE(e, nullptr);
    const auto v = im.read_values(*e);
    ASSERT_EQ(v.size(), 16u * 256u);
    for (int expert : {0, 9, 14})
        for (int c = 0; c < 256; ++c)
            ASSERT_EQ(v[static_cast<size_t>(expert * 256 + c)], static_cast<float>(e->ncall));
    EXPECT_NE(v[6 * 256], static_cast<float>(e->ncall));
    EXPECT_EQ(im.read_counts(*e), std::vector<float>{static_cast<float>(e->ncall)});
}

TEST(ImatrixReader, RangedReadsMatchWholeReads) {
    REQUIRE_FIXTURES();
    ImatrixFile im = ImatrixFile::open(fixture("imatrix/tiny-deepseek2.code.imatrix.gguf"));
    const ImatrixEntry* e = im.find("blk.3.ffn_down_exps.weight");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->ne0, 256);
    EXPECT_EQ(e->n_mat, 16);
    const auto all = im.read_values(*e);
    std::vector<float> part(300);
    im.read_values_range(*e, 1000, part.size(), part.data());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + 1000));
    EXPECT_THROW(im.read_values_range(*e, all.size() - 10, 11, part.data()), UsageError);
    const auto counts = im.read_counts(*e);
    const auto& exp = expected_json()["imatrix"]["imatrix/tiny-deepseek2.code.imatrix.gguf"]
                                     ["per_expert_counts"]["blk.3.ffn_down_exps.weight"];
    for (size_t i = 0; i < 16; ++i) EXPECT_EQ(counts[i], exp[i].get<float>());
}

TEST(ImatrixReader, LegacyWithoutTrailerReads) {
    test::TempDir d;
    test::write_file(d.file("a.dat"), legacy("blk.1.ffn_down_exps.weight", 3, {1, 2, 3, 4}, false).data());
    ImatrixFile im = ImatrixFile::open(d.file("a.dat"));
    EXPECT_EQ(im.entries().size(), 1u);
    EXPECT_FALSE(im.chunk_count().has_value());
    EXPECT_TRUE(im.datasets().empty());
}

TEST(ImatrixReader, LegacyNegativeEntryCount) {
    test::TempDir d;
    Bytes b;
    b.i32(-1).zeros(40);
    test::write_file(d.file("a.dat"), b.data());
    EXPECT_EQ(input_error(d.file("a.dat")),
              d.file("a.dat") + ": n_entries at offset 0 (0x0): -1 entries (must be at least 1)");
}

TEST(ImatrixReader, LegacyZeroValues) {
    test::TempDir d;
    Bytes b;
    b.i32(1).i32(1).raw("x", 1).i32(1).i32(0).zeros(8);
    test::write_file(d.file("a.dat"), b.data());
    EXPECT_EQ(input_error(d.file("a.dat")),
              d.file("a.dat") + ": entry 'x' nval at offset 13 (0xd): 0 values (must be at least 1)");
}

TEST(ImatrixReader, LegacyValuesPastTheEnd) {
    test::TempDir d;
    Bytes b;
    b.i32(1).i32(1).raw("x", 1).i32(1).i32(1000).f32(1);
    test::write_file(d.file("a.dat"), b.data());
    EXPECT_EQ(
        input_error(d.file("a.dat")),
        d.file("a.dat") +
            ": entry 'x' nval at offset 13 (0xd): 1000 values run past the end of the file (4 bytes left)");
}

TEST(ImatrixReader, LegacyDuplicateEntry) {
    test::TempDir d;
    Bytes b;
    b.i32(2);
    for (int i = 0; i < 2; ++i) b.i32(1).raw("x", 1).i32(1).i32(1).f32(1);
    test::write_file(d.file("a.dat"), b.data());
    EXPECT_EQ(input_error(d.file("a.dat")),
              d.file("a.dat") + ": entry 'x' at offset 21 (0x15): duplicate entry name");
}

TEST(ImatrixReader, LegacyTrailingBytes) {
    test::TempDir d;
    Bytes b = legacy("x", 1, {1});
    b.u8(0);
    test::write_file(d.file("a.dat"), b.data());
    EXPECT_EQ(input_error(d.file("a.dat")),
              d.file("a.dat") + ": trailer at offset 33 (0x21): 1 unexpected bytes after the dataset name");
}

TEST(ImatrixReader, LegacyTruncatedAtEveryByteIsACleanError) {
    test::TempDir d;
    const auto full = legacy("blk.1.ffn_down_exps.weight", 3, {1, 2, 3, 4, 5, 6, 7, 8}).data();
    // Cuts inside the entries are errors, and so are cuts inside the trailer's dataset name; a file may
    // end after its entries or after the trailer's chunk count.
    const size_t entries_end = 4 + 4 + 26 + 4 + 4 + 32;
    for (size_t n = 0; n < full.size(); ++n) {
        test::write_file(d.file("t.dat"),
                         std::vector<uint8_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)));
        if (n == entries_end || n == entries_end + 4) {
            EXPECT_NO_THROW(ImatrixFile::open(d.file("t.dat")));
            continue;
        }
        const std::string m = input_error(d.file("t.dat"));
        EXPECT_EQ(m.rfind(d.file("t.dat") + ": ", 0), 0u) << n << ": " << m;
    }
}

}  // namespace
}  // namespace gguf_reap
