// One named test per malformed GGUF header: each builds the bad bytes by hand and asserts the exact
// one-line error (file, byte offset, field, message). The offsets are counted here from the grammar
// in gguf.h: the preamble is 24 bytes (magic 4, version 4, n_tensors 8, n_kv 8), a kv is key length 8
// + key + type 4 + value, a tensor info is name length 8 + name + n_dims 4 + 8 per dim + type 4 +
// offset 8.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "gguf_builder.h"
#include "gguf_reap/error.h"
#include "io/input_file.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::Bytes;

constexpr int32_t kTypeU8 = 0, kTypeU32 = 4, kTypeI32 = 5, kTypeStr = 8, kTypeArr = 9, kTypeU64 = 10;

Bytes preamble(int64_t n_tensors, int64_t n_kv, uint32_t version = 3) {
    Bytes b;
    b.raw("GGUF", 4).u32(version).i64(n_tensors).i64(n_kv);
    return b;
}

// Tensor info: name, dims, type, offset.
Bytes& info(Bytes& b, const std::string& name, const std::vector<int64_t>& ne, int32_t type,
            uint64_t offset) {
    b.str(name).u32(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) b.i64(d);
    return b.i32(type).u64(offset);
}

class GgufMalformed : public ::testing::Test {
  protected:
    // Parses `bytes` written as <tmp>/m.gguf and returns the error text with the directory removed
    // ("m.gguf: field at offset N (0xN): message"), or "" when the parse succeeds.
    std::string error_of(const std::vector<uint8_t>& bytes, const ParseOptions& opts = {}) {
        const std::string path = dir_.file("m.gguf");
        test::write_file(path, bytes);
        try {
            parse_gguf_header(*InputFile::open(path), opts);
        } catch (const InputError& e) {
            std::string what = e.what();
            const std::string prefix = dir_.path().string() + "/";
            if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
            return what;
        }
        return "";
    }
    std::string error_of(Bytes& b, const ParseOptions& opts = {}) { return error_of(b.data(), opts); }

    test::TempDir dir_;
};

// ---- magic and version ----------------------------------------------------------------------------

TEST_F(GgufMalformed, EmptyFile) {
    EXPECT_EQ(error_of(std::vector<uint8_t>{}),
              "m.gguf: magic at offset 0 (0x0): file ends after 0 more byte(s), 4 needed (truncated file?)");
}

TEST_F(GgufMalformed, BadMagic) {
    Bytes b;
    b.raw("GGML", 4).u32(3).i64(0).i64(0);
    EXPECT_EQ(error_of(b),
              "m.gguf: magic at offset 0 (0x0): not a GGUF file (starts with \"GGML\", expected \"GGUF\")");
}

TEST_F(GgufMalformed, BadMagicUnprintable) {
    Bytes b;
    b.raw(
         "\x7f"
         "ELF",
         4)
        .zeros(60);
    EXPECT_EQ(
        error_of(b),
        "m.gguf: magic at offset 0 (0x0): not a GGUF file (starts with \"\\x7fELF\", expected \"GGUF\")");
}

TEST_F(GgufMalformed, Version0) {
    Bytes b = preamble(0, 0, 0);
    EXPECT_EQ(error_of(b), "m.gguf: version at offset 4 (0x4): GGUF version 0 is invalid");
}

TEST_F(GgufMalformed, Version1) {
    Bytes b = preamble(0, 0, 1);
    EXPECT_EQ(error_of(b),
              "m.gguf: version at offset 4 (0x4): GGUFv1 is no longer supported (ggml removed it "
              "in 2023); re-convert the model");
}

TEST_F(GgufMalformed, Version4) {
    Bytes b = preamble(0, 0, 4);
    EXPECT_EQ(error_of(b),
              "m.gguf: version at offset 4 (0x4): GGUF version 4 is newer than this tool supports "
              "(2 and 3)");
}

TEST_F(GgufMalformed, VersionByteSwapped) {
    // A big-endian v3 file: its version reads 0x03000000 on a little-endian host.
    Bytes b = preamble(0, 0, 0x03000000u);
    EXPECT_EQ(error_of(b),
              "m.gguf: version at offset 4 (0x4): version field 0x03000000 is byte-swapped: this is "
              "a big-endian GGUF file, which gguf-reap does not read (convert it with "
              "gguf_convert_endian.py)");
}

// ---- counts ---------------------------------------------------------------------------------------

TEST_F(GgufMalformed, NegativeTensorCount) {
    Bytes b = preamble(-1, 0);
    EXPECT_EQ(error_of(b), "m.gguf: n_tensors at offset 8 (0x8): negative tensor count -1");
}

TEST_F(GgufMalformed, NegativeKvCount) {
    Bytes b = preamble(0, -5);
    EXPECT_EQ(error_of(b), "m.gguf: n_kv at offset 16 (0x10): negative key/value count -5");
}

TEST_F(GgufMalformed, AbsurdKvCount) {
    // 100 bytes cannot hold 1000 kvs of at least 14 bytes each: refused before anything is allocated.
    Bytes b = preamble(0, 1000);
    b.zeros(100);
    EXPECT_EQ(error_of(b),
              "m.gguf: n_kv at offset 16 (0x10): 1000 key/value pairs cannot fit in the 100 bytes left");
    Bytes huge = preamble(0, INT64_MAX);
    huge.zeros(100);
    EXPECT_EQ(error_of(huge),
              "m.gguf: n_kv at offset 16 (0x10): 9223372036854775807 key/value pairs cannot fit in "
              "the 100 bytes left");
}

TEST_F(GgufMalformed, AbsurdTensorCount) {
    Bytes b = preamble(int64_t{1} << 40, 0);
    b.zeros(100);
    EXPECT_EQ(
        error_of(b),
        "m.gguf: n_tensors at offset 8 (0x8): 1099511627776 tensor infos cannot fit in the 100 bytes left");
}

// ---- keys and values ------------------------------------------------------------------------------

TEST_F(GgufMalformed, KeyLengthPastEnd) {
    Bytes b = preamble(0, 1);
    b.u64(100).zeros(20);
    EXPECT_EQ(error_of(b),
              "m.gguf: kv #0 key at offset 24 (0x18): string of 100 bytes runs past the end of the "
              "file (20 bytes left)");
}

TEST_F(GgufMalformed, KeyOver1GiB) {
    Bytes b = preamble(0, 1);
    b.u64((uint64_t{1} << 30) + 1).zeros(20);
    EXPECT_EQ(error_of(b),
              "m.gguf: kv #0 key at offset 24 (0x18): string length 1073741825 exceeds the 1 GiB "
              "limit ggml enforces");
    // Exactly 1 GiB is within ggml's limit: refused only because the file is shorter.
    Bytes at_limit = preamble(0, 1);
    at_limit.u64(uint64_t{1} << 30).zeros(20);
    EXPECT_EQ(error_of(at_limit),
              "m.gguf: kv #0 key at offset 24 (0x18): string of 1073741824 bytes runs past "
              "the end of the file (20 bytes left)");
}

TEST_F(GgufMalformed, StringValueOver1GiB) {
    Bytes b = preamble(0, 1);
    b.str("a").i32(kTypeStr).u64((uint64_t{1} << 30) + 7).zeros(8);
    EXPECT_EQ(
        error_of(b),
        "m.gguf: kv 'a' at offset 37 (0x25): string length 1073741831 exceeds the 1 GiB limit ggml enforces");
}

TEST_F(GgufMalformed, StringValuePastEnd) {
    Bytes b = preamble(0, 1);
    b.str("a").i32(kTypeStr).u64(9).raw("abc", 3);
    EXPECT_EQ(error_of(b),
              "m.gguf: kv 'a' at offset 37 (0x25): string of 9 bytes runs past the end of the file "
              "(3 bytes left)");
}

TEST_F(GgufMalformed, EmptyKey) {
    Bytes b = preamble(0, 1);
    b.str("").i32(kTypeU8).u8(1).zeros(8);
    EXPECT_EQ(error_of(b), "m.gguf: kv #0 key at offset 24 (0x18): empty key");
}

TEST_F(GgufMalformed, DuplicateKey) {
    // kv #0 "a" u8 takes 8 + 1 + 4 + 1 = 14 bytes, so kv #1 starts at 38.
    Bytes b = preamble(0, 2);
    b.str("a").i32(kTypeU8).u8(1);
    b.str("a").i32(kTypeU8).u8(2);
    EXPECT_EQ(error_of(b), "m.gguf: kv #1 'a' at offset 38 (0x26): duplicate key");
}

TEST_F(GgufMalformed, InvalidValueType) {
    Bytes b = preamble(0, 1);
    b.str("a").i32(13).zeros(8);
    EXPECT_EQ(error_of(b), "m.gguf: kv 'a' at offset 33 (0x21): invalid value type 13");
    Bytes neg = preamble(0, 1);
    neg.str("a").i32(-1).zeros(8);
    EXPECT_EQ(error_of(neg), "m.gguf: kv 'a' at offset 33 (0x21): invalid value type -1");
}

TEST_F(GgufMalformed, ScalarValueTruncated) {
    Bytes b = preamble(0, 1);
    b.str("a").i32(kTypeU32).u16(7);
    EXPECT_EQ(error_of(b),
              "m.gguf: kv 'a' at offset 37 (0x25): file ends after 2 more byte(s), 4 needed "
              "(truncated file?)");
}

// ---- arrays ---------------------------------------------------------------------------------------

TEST_F(GgufMalformed, ArrayCountOver2Pow30) {
    // key "a" at 24, type at 33, element type at 37, count at 41.
    Bytes b = preamble(0, 1);
    b.str("a").i32(kTypeArr).i32(kTypeU8).u64((uint64_t{1} << 30) + 1).zeros(16);
    EXPECT_EQ(error_of(b),
              "m.gguf: kv 'a' at offset 41 (0x29): array of 1073741825 elements exceeds the 2^30 "
              "limit ggml enforces");
}

TEST_F(GgufMalformed, ArrayBytesPastEnd) {
    Bytes b = preamble(0, 1);
    b.str("a").i32(kTypeArr).i32(kTypeU32).u64(100).zeros(16);
    EXPECT_EQ(error_of(b),
              "m.gguf: kv 'a' at offset 41 (0x29): array of 100 × 4 bytes runs past the end of the "
              "file (16 bytes left)");
}

TEST_F(GgufMalformed, StringArrayCountPastEnd) {
    // Every string costs at least its 8-byte length: 100 cannot fit in 16 bytes.
    Bytes b = preamble(0, 1);
    b.str("a").i32(kTypeArr).i32(kTypeStr).u64(100).zeros(16);
    EXPECT_EQ(error_of(b),
              "m.gguf: kv 'a' at offset 41 (0x29): array of 100 strings cannot fit in the 16 bytes left");
}

TEST_F(GgufMalformed, StringArrayElementPastEnd) {
    // Elements start at 49; element 0 ("xy") takes 10 bytes, so element 1 starts at 59.
    Bytes b = preamble(0, 1);
    b.str("a").i32(kTypeArr).i32(kTypeStr).u64(2).str("xy").u64(50).raw("abc", 3);
    EXPECT_EQ(error_of(b),
              "m.gguf: kv 'a'[1] at offset 59 (0x3b): string of 50 bytes runs past the end of the "
              "file (3 bytes left)");
}

TEST_F(GgufMalformed, NestedArray) {
    Bytes b = preamble(0, 1);
    b.str("a").i32(kTypeArr).i32(kTypeArr).u64(1).zeros(16);
    EXPECT_EQ(error_of(b), "m.gguf: kv 'a' at offset 37 (0x25): nested arrays are not supported by ggml");
}

TEST_F(GgufMalformed, InvalidArrayElementType) {
    Bytes b = preamble(0, 1);
    b.str("a").i32(kTypeArr).i32(13).u64(1).zeros(16);
    EXPECT_EQ(error_of(b), "m.gguf: kv 'a' at offset 37 (0x25): invalid array element type 13");
}

// ---- general.alignment ----------------------------------------------------------------------------

TEST_F(GgufMalformed, AlignmentNotU32) {
    Bytes b = preamble(0, 1);
    b.str("general.alignment").i32(kTypeU64).u64(32);
    EXPECT_EQ(error_of(b),
              "m.gguf: kv 'general.alignment' at offset 24 (0x18): must be of type u32, found u64");
    Bytes i32 = preamble(0, 1);
    i32.str("general.alignment").i32(kTypeI32).i32(32);
    EXPECT_EQ(error_of(i32),
              "m.gguf: kv 'general.alignment' at offset 24 (0x18): must be of type u32, found i32");
}

TEST_F(GgufMalformed, AlignmentZero) {
    Bytes b = preamble(0, 1);
    b.str("general.alignment").i32(kTypeU32).u32(0);
    EXPECT_EQ(
        error_of(b),
        "m.gguf: kv 'general.alignment' at offset 24 (0x18): alignment 0 is not a non-zero power of two");
}

TEST_F(GgufMalformed, AlignmentNotPowerOfTwo) {
    // The alignment kv is second here: its offset is the kv's own, not the first kv's.
    Bytes b = preamble(0, 2);
    b.str("a").i32(kTypeU8).u8(1);
    b.str("general.alignment").i32(kTypeU32).u32(48);
    EXPECT_EQ(
        error_of(b),
        "m.gguf: kv 'general.alignment' at offset 38 (0x26): alignment 48 is not a non-zero power of two");
}

// ---- tensor infos ---------------------------------------------------------------------------------

TEST_F(GgufMalformed, TensorName64Bytes) {
    Bytes b = preamble(1, 0);
    info(b, std::string(64, 'x'), {32}, test::kF32, 0).zeros(256);
    EXPECT_EQ(error_of(b),
              "m.gguf: tensor #0 name at offset 24 (0x18): name of 64 bytes is too long (ggml allows "
              "at most 63)");
    // 63 bytes is ggml's longest legal name.
    Bytes ok = preamble(1, 0);
    info(ok, std::string(63, 'x'), {32}, test::kF32, 0).pad_to(32).zeros(128);
    EXPECT_EQ(error_of(ok), "");
}

TEST_F(GgufMalformed, DuplicateTensorName) {
    // Info of "t" with one dim: 8 + 1 + 4 + 8 + 4 + 8 = 33 bytes, so tensor #1 starts at 57.
    Bytes b = preamble(2, 0);
    info(b, "t", {8}, test::kF32, 0);
    info(b, "t", {8}, test::kF32, 32).pad_to(32).zeros(64);
    EXPECT_EQ(error_of(b), "m.gguf: tensor #1 't' name at offset 57 (0x39): duplicate tensor name");
}

TEST_F(GgufMalformed, NDims5) {
    Bytes b = preamble(1, 0);
    b.str("t").u32(5).zeros(64);
    EXPECT_EQ(error_of(b),
              "m.gguf: tensor #0 't' n_dims at offset 33 (0x21): 5 dimensions (ggml allows at most 4)");
}

TEST_F(GgufMalformed, NegativeDimension) {
    // n_dims at 33, ne[0] at 37, ne[1] at 45.
    Bytes b = preamble(1, 0);
    info(b, "t", {8, -3}, test::kF32, 0).zeros(32);
    EXPECT_EQ(error_of(b), "m.gguf: tensor #0 't' ne[1] at offset 45 (0x2d): negative dimension -3");
}

TEST_F(GgufMalformed, ElementCountOverflow) {
    Bytes b = preamble(1, 0);
    info(b, "t", {int64_t{1} << 32, int64_t{1} << 32}, test::kF32, 0).zeros(32);
    EXPECT_EQ(error_of(b), "m.gguf: tensor #0 't' ne at offset 33 (0x21): element count overflows int64");
}

TEST_F(GgufMalformed, ByteSizeOverflow) {
    // 2^62 F32 elements fit in int64, their 2^64 bytes do not.
    Bytes b = preamble(1, 0);
    info(b, "t", {int64_t{1} << 62}, test::kF32, 0).zeros(32);
    EXPECT_EQ(error_of(b), "m.gguf: tensor #0 't' ne at offset 33 (0x21): byte size overflows");
}

TEST_F(GgufMalformed, UnknownTypeId43) {
    // One dim: the type is at 33 + 4 + 8 = 45.
    Bytes b = preamble(1, 0);
    info(b, "t", {32}, 43, 0).zeros(64);
    EXPECT_EQ(error_of(b), "m.gguf: tensor #0 't' type at offset 45 (0x2d): unknown ggml type id 43");
    Bytes neg = preamble(1, 0);
    info(neg, "t", {32}, -1, 0).zeros(64);
    EXPECT_EQ(error_of(neg), "m.gguf: tensor #0 't' type at offset 45 (0x2d): unknown ggml type id -1");
}

class GgufRemovedType : public GgufMalformed,
                        public ::testing::WithParamInterface<std::pair<int32_t, const char*>> {};

TEST_P(GgufRemovedType, Refused) {
    const auto [id, note] = GetParam();
    Bytes b = preamble(1, 0);
    info(b, "t", {256}, id, 0).zeros(512);
    EXPECT_EQ(error_of(b), "m.gguf: tensor #0 't' type at offset 45 (0x2d): ggml type id " +
                               std::to_string(id) + " is no longer supported: " + note);
}

INSTANTIATE_TEST_SUITE_P(
    EveryRemovedId, GgufRemovedType,
    ::testing::Values(
        std::make_pair(4, "Q4_2 was removed from ggml in 2023"),
        std::make_pair(5, "Q4_3 was removed from ggml in 2023"),
        std::make_pair(31, "Q4_0_4_4 was removed from GGUF (use Q4_0 with runtime repacking)"),
        std::make_pair(32, "Q4_0_4_8 was removed from GGUF (use Q4_0 with runtime repacking)"),
        std::make_pair(33, "Q4_0_8_8 was removed from GGUF (use Q4_0 with runtime repacking)"),
        std::make_pair(36, "IQ4_NL_4_4 was removed from GGUF (use IQ4_NL with runtime repacking)"),
        std::make_pair(37, "IQ4_NL_4_8 was removed from GGUF (use IQ4_NL with runtime repacking)"),
        std::make_pair(38, "IQ4_NL_8_8 was removed from GGUF (use IQ4_NL with runtime repacking)")),
    [](const auto& info) { return "id" + std::to_string(info.param.first); });

TEST_F(GgufMalformed, Ne0NotMultipleOfBlockSize) {
    // Q4_K packs 256 elements per block; the error points at ne[0] (37).
    Bytes b = preamble(1, 0);
    info(b, "t", {100, 2}, test::kQ4_K, 0).zeros(512);
    EXPECT_EQ(error_of(b),
              "m.gguf: tensor #0 't' ne[0] at offset 37 (0x25): 100 is not a multiple of the Q4_K "
              "block size 256");
}

// ---- offsets and data -----------------------------------------------------------------------------

// Two F32 [8] tensors (32 bytes each, so 32 apart at alignment 32). Infos: "t" at 24 (offset field at
// 49), "u" at 57 (offset field at 82); infos end at 90, data starts at 96.
Bytes two_tensors(uint64_t off_t, uint64_t off_u, size_t data_bytes = 64) {
    Bytes b = preamble(2, 0);
    info(b, "t", {8}, test::kF32, off_t);
    info(b, "u", {8}, test::kF32, off_u);
    b.pad_to(32).zeros(data_bytes);
    return b;
}

TEST_F(GgufMalformed, TwoTensorsBaselineParses) {
    Bytes b = two_tensors(0, 32);
    EXPECT_EQ(error_of(b), "");
}

TEST_F(GgufMalformed, OffsetGap) {
    Bytes b = two_tensors(0, 64, 96);
    EXPECT_EQ(error_of(b),
              "m.gguf: tensor #1 'u' offset at offset 82 (0x52): has offset 64, expected 32 (ggml "
              "requires tensor data in info order, each padded to 32 bytes)");
}

TEST_F(GgufMalformed, OffsetsReordered) {
    Bytes b = two_tensors(32, 0);
    EXPECT_EQ(error_of(b),
              "m.gguf: tensor #0 't' offset at offset 49 (0x31): has offset 32, expected 0 (ggml "
              "requires tensor data in info order, each padded to 32 bytes)");
}

TEST_F(GgufMalformed, OffsetNotPadded) {
    // Back to back without padding: ggml wants every tensor padded to the alignment.
    Bytes b = two_tensors(0, 8);
    EXPECT_EQ(error_of(b),
              "m.gguf: tensor #1 'u' offset at offset 82 (0x52): has offset 8, expected 32 (ggml "
              "requires tensor data in info order, each padded to 32 bytes)");
}

TEST_F(GgufMalformed, DataPastEndOfFile) {
    // "u" needs bytes [128, 160) of a 130-byte file.
    Bytes b = two_tensors(0, 32, 34);
    EXPECT_EQ(error_of(b),
              "m.gguf: tensor #1 'u' data at offset 82 (0x52): data [128, +32) lies outside the file "
              "of 130 bytes (truncated file?)");
    // A header-only parse (partial download) accepts it.
    ParseOptions header_only;
    header_only.require_data = false;
    EXPECT_EQ(error_of(b, header_only), "");
}

TEST_F(GgufMalformed, InfosTruncated) {
    // The file ends inside tensor #0's ne[0] (at 24 + 8 + 16 + 4 = 52).
    Bytes b = preamble(1, 0);
    b.str("abcdefghijklmnop").u32(1).u32(8);
    EXPECT_EQ(error_of(b),
              "m.gguf: tensor #0 'abcdefghijklmnop' ne[0] at offset 52 (0x34): file ends after 4 "
              "more byte(s), 8 needed (truncated file?)");
}

}  // namespace
}  // namespace gguf_reap
