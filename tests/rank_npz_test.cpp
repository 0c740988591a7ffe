// ranking.npz and neuron plans: .npy/.npz written and read back, and malformed archives refused with
// a message naming the member.
#include <gtest/gtest.h>

#include <cstring>

#include "format/npz.h"
#include "gguf_reap/error.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

std::string input_error(const std::string& path) {
    try {
        read_npz(path);
    } catch (const InputError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(RankNpz, HeaderIsPaddedToSixtyFourBytes) {
    const auto b = npy_bytes(NpyArray::i32({2, 3}, {1, 2, 3, 4, 5, 6}));
    ASSERT_GE(b.size(), 10u);
    EXPECT_EQ(std::memcmp(b.data(), "\x93NUMPY\x01\x00", 8), 0);
    const size_t hlen = b[8] | (b[9] << 8);
    EXPECT_EQ((10 + hlen) % 64, 0u);
    const std::string h(reinterpret_cast<const char*>(b.data() + 10), hlen);
    EXPECT_EQ(h.substr(0, 60), "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), } ");
    EXPECT_EQ(h.back(), '\n');
    EXPECT_EQ(b.size(), 10 + hlen + 24);
    const auto one = npy_bytes(NpyArray::f64({3}, {1, 2, 3}));
    EXPECT_NE(std::string(one.begin() + 10, one.end()).find("'shape': (3,), }"), std::string::npos);
}

TEST(RankNpz, RoundTripsEveryDtypeItWrites) {
    test::TempDir d;
    const std::string p = d.file("a.npz");
    write_npz(p, {{"f", NpyArray::f64({2, 2}, {1.5, -2, 3, 4})},
                  {"i", NpyArray::i32({3}, {-1, 0, 7})},
                  {"l", NpyArray::i64({1}, {-5})},
                  {"u", NpyArray::u16({2}, {65535, 3})},
                  {"b", NpyArray::boolean({3}, {0, 2, 1})},
                  {"s", NpyArray::strings({"chat", "code", "wiki→ü"})}});
    auto m = read_npz(p);
    ASSERT_EQ(m.size(), 6u);
    EXPECT_EQ(m["f"].shape, (std::vector<int64_t>{2, 2}));
    double f[4];
    std::memcpy(f, m["f"].data.data(), 32);
    EXPECT_EQ(f[0], 1.5);
    EXPECT_EQ(f[1], -2);
    EXPECT_EQ(m["i"].to_int64(), (std::vector<int64_t>{-1, 0, 7}));
    EXPECT_EQ(m["l"].to_int64(), (std::vector<int64_t>{-5}));
    EXPECT_EQ(m["u"].to_int64(), (std::vector<int64_t>{65535, 3}));
    EXPECT_EQ(m["b"].to_int64(), (std::vector<int64_t>{0, 1, 1}));
    EXPECT_EQ(m["s"].descr, "<U6");
    uint32_t c;
    std::memcpy(&c, m["s"].data.data() + (2 * 6 + 4) * 4, 4);
    EXPECT_EQ(c, 0x2192u);  // '→'
    EXPECT_THROW(m["f"].to_int64(), UsageError);
    // Deterministic: the same arrays give the same bytes.
    write_npz(d.file("b.npz"), {{"f", NpyArray::f64({2, 2}, {1.5, -2, 3, 4})}});
    write_npz(d.file("c.npz"), {{"f", NpyArray::f64({2, 2}, {1.5, -2, 3, 4})}});
    EXPECT_EQ(test::read_file(d.file("b.npz")), test::read_file(d.file("c.npz")));
}

TEST(RankNpz, NotAZipIsAnInputError) {
    test::TempDir d;
    test::write_file(d.file("x.npz"), {'h', 'e', 'l', 'l', 'o'});
    EXPECT_NE(
        input_error(d.file("x.npz")).find("x.npz: zip at offset 0 (0x0): not a valid .npz (zip) archive"),
        std::string::npos)
        << input_error(d.file("x.npz"));
}

TEST(RankNpz, MalformedMembersAreNamed) {
    test::TempDir d;
    // A member whose data is shorter than its shape says.
    NpyArray a = NpyArray::i32({4}, {1, 2, 3, 4});
    a.data.resize(8);
    write_npz(d.file("short.npz"), {{"channels", a}});
    EXPECT_NE(input_error(d.file("short.npz")).find("member 'channels.npy'"), std::string::npos);
    EXPECT_NE(input_error(d.file("short.npz")).find("holds 8 data bytes but shape and dtype need 16"),
              std::string::npos);
    // Fortran order and unknown dtypes.
    NpyArray f = NpyArray::i32({2}, {1, 2});
    f.descr = "<c8";
    write_npz(d.file("dtype.npz"), {{"x", f}});
    EXPECT_NE(input_error(d.file("dtype.npz")).find("dtype '<c8' is not supported"), std::string::npos);
    NpyArray big = NpyArray::i32({2}, {1, 2});
    big.descr = ">i4";
    write_npz(d.file("be.npz"), {{"x", big}});
    EXPECT_NE(input_error(d.file("be.npz")).find("dtype '>i4' is not supported"), std::string::npos);
}

TEST(RankNpz, TruncatedArchivesAreInputErrors) {
    test::TempDir d;
    write_npz(d.file("ok.npz"),
              {{"channels", NpyArray::u16({2, 3}, {1, 2, 3, 4, 5, 6})}, {"k", NpyArray::i64({1}, {3})}});
    const auto bytes = test::read_file(d.file("ok.npz"));
    ASSERT_EQ(read_npz(d.file("ok.npz")).size(), 2u);
    // A zip's directory is its last bytes: no cut of the archive parses, and each is a bad input named
    // with the file (never a crash, an I/O error or a half-read member).
    for (size_t n = 0; n < bytes.size(); ++n) {
        test::write_file(d.file("t.npz"),
                         std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)));
        EXPECT_NE(input_error(d.file("t.npz")).find(d.file("t.npz") + ": "), std::string::npos)
            << "cut at " << n << " of " << bytes.size() << ": " << input_error(d.file("t.npz"));
    }
}

}  // namespace
}  // namespace gguf_reap
