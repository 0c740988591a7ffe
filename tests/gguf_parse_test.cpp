// The GGUF header parser on good input (every value type, alignment, round trips, a 2,573-tensor
// header, the real fixtures) and on damaged input: cut at every byte, bits flipped, garbage written
// over the header. Damage must always end in InputError, never a crash or any other exception. And a
// parse reads the header's pages only: tensor data stays on disk.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "gguf_builder.h"
#include "gguf_reap/error.h"
#include "io/input_file.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::Bytes;

Header parse(const std::string& path, bool require_data = true) {
    ParseOptions o;
    o.require_data = require_data;
    return parse_gguf_header(*InputFile::open(path), o);
}

void expect_same_header(const Header& a, const Header& b) {
    EXPECT_EQ(a.version, b.version);
    EXPECT_EQ(a.alignment, b.alignment);
    EXPECT_EQ(a.infos_end, b.infos_end);
    EXPECT_EQ(a.data_start, b.data_start);
    EXPECT_EQ(a.data_size, b.data_size);
    ASSERT_EQ(a.kvs.size(), b.kvs.size());
    for (size_t i = 0; i < a.kvs.size(); ++i) {
        EXPECT_EQ(a.kvs[i].key, b.kvs[i].key);
        EXPECT_EQ(a.kvs[i].raw, b.kvs[i].raw) << a.kvs[i].key;
    }
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    for (size_t i = 0; i < a.tensors.size(); ++i) {
        EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
        EXPECT_EQ(a.tensors[i].offset, b.tensors[i].offset);
        EXPECT_EQ(a.tensors[i].nbytes, b.tensors[i].nbytes);
    }
}

// A small file with every kv value type, an alignment of 64 and three tensors of different types.
std::vector<uint8_t> every_type_file() {
    Bytes b;
    b.raw("GGUF", 4).u32(3).i64(3).i64(15);
    b.str("general.architecture").i32(8).str("llama");
    b.str("t.u8").i32(0).u8(200);
    b.str("t.i8").i32(1).u8(0xf9);  // -7
    b.str("t.u16").i32(2).u16(60000);
    b.str("t.i16").i32(3).u16(0xfd44);  // -700
    b.str("t.u32").i32(4).u32(4000000000u);
    b.str("t.i32").i32(5).i32(-70000);
    b.str("t.f32").i32(6).f32(1.5f);
    b.str("t.bool").i32(7).u8(1);
    b.str("t.u64").i32(10).u64(uint64_t{1} << 63);
    b.str("t.i64").i32(11).i64(-(int64_t{1} << 40));
    double f64 = 2.25;
    b.str("t.f64").i32(12).raw(&f64, 8);
    b.str("t.arr_i32").i32(9).i32(5).u64(3).i32(1).i32(2).i32(3);
    b.str("t.arr_str").i32(9).i32(8).u64(2).str("a").str("bc");
    b.str("general.alignment").i32(4).u32(64);
    b.str("a").u32(1).i64(64).i32(test::kF32).u64(0);                        // 256 bytes
    b.str("b").u32(2).i64(32).i64(3).i32(test::kQ8_0).u64(256);              // 3 rows of 34 = 102 bytes
    b.str("c").u32(3).i64(16).i64(1).i64(1).i32(test::kF16).u64(256 + 128);  // 32 bytes, trailing 1-dims kept
    b.pad_to(64).zeros(256 + 128 + 64);
    return b.data();
}

// ---- good input ---------------------------------------------------------------------------------

TEST(GgufParse, EmptyFileHasNoPadding) {
    test::TempDir d;
    Bytes b;
    b.raw("GGUF", 4).u32(3).i64(0).i64(0);
    test::write_file(d.file("e.gguf"), b.data());
    const Header h = parse(d.file("e.gguf"));
    EXPECT_EQ(h.version, 3u);
    EXPECT_TRUE(h.kvs.empty());
    EXPECT_TRUE(h.tensors.empty());
    EXPECT_EQ(h.alignment, 32u);
    EXPECT_EQ(h.infos_end, 24u);
    EXPECT_EQ(h.data_start, 24u) << "ggml seeks to the padded data start only when there are tensors";
    EXPECT_EQ(h.data_size, 0u);
}

TEST(GgufParse, Version2Accepted) {
    test::TempDir d;
    Bytes b;
    b.raw("GGUF", 4).u32(2).i64(0).i64(1).str("k").i32(4).u32(7);
    test::write_file(d.file("v2.gguf"), b.data());
    const Header h = parse(d.file("v2.gguf"));
    EXPECT_EQ(h.version, 2u);
    EXPECT_EQ(h.find("k")->as_uint(), 7u);
}

TEST(GgufParse, EveryValueType) {
    test::TempDir d;
    const auto bytes = every_type_file();
    test::write_file(d.file("t.gguf"), bytes);
    const Header h = parse(d.file("t.gguf"));
    ASSERT_EQ(h.kvs.size(), 15u);
    EXPECT_EQ(h.find("general.architecture")->as_string(), "llama");
    EXPECT_EQ(h.find("t.u8")->as_uint(), 200u);
    EXPECT_EQ(h.find("t.i8")->as_int(), -7);
    EXPECT_EQ(h.find("t.i8")->as_uint(), std::nullopt) << "negative values are not unsigned";
    EXPECT_EQ(h.find("t.u16")->as_uint(), 60000u);
    EXPECT_EQ(h.find("t.i16")->as_int(), -700);
    EXPECT_EQ(h.find("t.u32")->as_uint(), 4000000000u);
    EXPECT_EQ(h.find("t.i32")->as_int(), -70000);
    EXPECT_EQ(h.find("t.f32")->as_float(), 1.5);
    EXPECT_EQ(h.find("t.f32")->as_int(), std::nullopt) << "no conversion across kinds";
    EXPECT_EQ(h.find("t.bool")->as_bool(), true);
    EXPECT_EQ(h.find("t.u64")->as_uint(), uint64_t{1} << 63);
    EXPECT_EQ(h.find("t.u64")->as_int(), std::nullopt) << "2^63 does not fit in int64";
    EXPECT_EQ(h.find("t.i64")->as_int(), -(int64_t{1} << 40));
    EXPECT_EQ(h.find("t.f64")->as_float(), 2.25);
    const Kv* arr = h.find("t.arr_i32");
    EXPECT_EQ(arr->type, GgufType::kArray);
    EXPECT_EQ(arr->elem_type, GgufType::kInt32);
    EXPECT_EQ(arr->count, 3u);
    EXPECT_EQ(arr->display(), "[i32 × 3]");
    EXPECT_EQ(h.find("t.arr_str")->as_string_array(), (std::vector<std::string>{"a", "bc"}));
    // general.architecture takes 8 + 20 + 4 + (8 + 5) bytes, t.u8 and t.i8 17 each, t.u16 and t.i16 19.
    EXPECT_EQ(h.find("t.u32")->file_offset, 24u + 45 + 2 * 17 + 2 * 19)
        << "a kv's offset is where its key starts";

    EXPECT_EQ(h.alignment, 64u);
    ASSERT_EQ(h.tensors.size(), 3u);
    EXPECT_EQ(h.tensors[0].nbytes, 256u);
    EXPECT_EQ(h.tensors[1].nbytes, 102u);
    EXPECT_EQ(h.tensors[1].n_elements(), 96u);
    EXPECT_EQ(h.tensors[2].n_dims, 3u);
    EXPECT_EQ(h.tensors[2].nbytes, 32u);
    EXPECT_EQ(h.data_start % 64, 0u);
    EXPECT_EQ(h.data_start, (h.infos_end + 63) / 64 * 64);
    EXPECT_EQ(h.data_size, 256u + 128 + 64) << "includes the padding after the last tensor";
}

TEST(GgufParse, ZeroElementAndScalarTensors) {
    // A zero-element tensor has 0 bytes (ggml allows it); n_dims 0 is a scalar of one element.
    test::TempDir d;
    Bytes b;
    b.raw("GGUF", 4).u32(3).i64(2).i64(0);
    b.str("empty").u32(2).i64(0).i64(5).i32(test::kQ8_0).u64(0);
    b.str("scalar").u32(0).i32(test::kF32).u64(0);
    b.pad_to(32).zeros(32);
    test::write_file(d.file("z.gguf"), b.data());
    const Header h = parse(d.file("z.gguf"));
    EXPECT_EQ(h.tensors[0].nbytes, 0u);
    EXPECT_EQ(h.tensors[0].n_elements(), 0u);
    EXPECT_EQ(h.tensors[1].n_dims, 0u);
    EXPECT_EQ(h.tensors[1].nbytes, 4u);
    EXPECT_EQ(h.data_size, 32u);
}

TEST(GgufParse, SerializeReproducesHeaderBytes) {
    test::TempDir d;
    const auto bytes = every_type_file();
    test::write_file(d.file("t.gguf"), bytes);
    const Header h = parse(d.file("t.gguf"));
    const auto out = serialize_header(h.version, h.kvs, h.tensors, h.alignment);
    ASSERT_EQ(out.size(), h.data_start);
    EXPECT_TRUE(std::equal(out.begin(), out.end(), bytes.begin()));
}

TEST(GgufParse, FixtureHeadersRoundTripByteForByte) {
    REQUIRE_FIXTURES();
    std::vector<std::string> files;
    for (const auto& [rel, e] : test::expected_json()["models"].items()) files.push_back(rel);
    for (const auto& [rel, e] : test::expected_json()["shards"]["files"].items()) files.push_back(rel);
    for (const auto& [rel, e] : test::expected_json()["imatrix"].items())
        if (e["format"] == "gguf") files.push_back(rel);
    ASSERT_EQ(files.size(), 12u);
    for (const auto& rel : files) {
        SCOPED_TRACE(rel);
        const std::string path = test::fixture(rel);
        const Header h = parse(path);
        const auto out = serialize_header(h.version, h.kvs, h.tensors, h.alignment);
        ASSERT_EQ(out.size(), h.data_start);
        const auto in = test::read_file(path);
        EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << "header bytes differ";
        // Without the data-range check, the same header.
        expect_same_header(h, parse(path, false));
    }
}

// 2,573 tensors, the size of a large MoE model's header, written field by field here (not by the
// library's writer) with offsets computed independently: blk.0 dense, blk.1..blk.142 MoE with 8
// experts, plus token_embd, output_norm, output and rope_freqs.
TEST(GgufParse, Header2573Tensors) {
    struct Expect {
        std::string name;
        std::vector<int64_t> ne;
        int32_t type;
        uint64_t nbytes;
    };
    const int64_t E = 8, n_embd = 32, n_ff = 32;
    const uint64_t q8_row = 34;  // one Q8_0 block of 32 elements
    std::vector<Expect> want;
    want.push_back({"token_embd.weight", {n_embd, 64}, test::kQ8_0, q8_row * 64});
    for (int blk = 0; blk < 143; ++blk) {
        const std::string p = "blk." + std::to_string(blk) + ".";
        for (const char* t : {"attn_norm", "attn_q_a_norm", "attn_kv_a_norm", "ffn_norm"})
            want.push_back({p + t + ".weight", {n_embd}, test::kF32, 4 * n_embd});
        for (const char* t : {"attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_k_b", "attn_v_b", "attn_output"})
            want.push_back({p + t + ".weight", {n_embd, n_embd}, test::kQ8_0, q8_row * n_embd});
        if (blk == 0) {
            for (const char* t : {"ffn_gate", "ffn_up", "ffn_down"})
                want.push_back({p + t + ".weight", {n_embd, n_ff}, test::kQ8_0, q8_row * n_ff});
            continue;
        }
        want.push_back({p + "ffn_gate_inp.weight", {n_embd, E}, test::kF32, 4 * n_embd * E});
        want.push_back({p + "exp_probs_b.bias", {E}, test::kF32, 4 * E});
        for (const char* t : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"})
            want.push_back({p + t + ".weight", {n_embd, n_ff, E}, test::kQ8_0, q8_row * n_ff * E});
        for (const char* t : {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"})
            want.push_back({p + t + ".weight", {n_embd, n_ff}, test::kQ8_0, q8_row * n_ff});
    }
    want.push_back({"output_norm.weight", {n_embd}, test::kF32, 4 * n_embd});
    want.push_back({"output.weight", {n_embd, 64}, test::kQ8_0, q8_row * 64});
    want.push_back({"rope_freqs.weight", {16}, test::kF32, 64});
    ASSERT_EQ(want.size(), 2573u);

    Bytes b;
    b.raw("GGUF", 4).u32(3).i64(static_cast<int64_t>(want.size())).i64(4);
    b.str("general.architecture").i32(8).str("deepseek2");
    b.str("deepseek2.block_count").i32(4).u32(143);
    b.str("deepseek2.expert_count").i32(4).u32(static_cast<uint32_t>(E));
    b.str("deepseek2.expert_used_count").i32(4).u32(2);
    std::vector<uint64_t> offsets;
    uint64_t off = 0;
    for (const auto& t : want) {
        offsets.push_back(off);
        b.str(t.name).u32(static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) b.i64(d);
        b.i32(t.type).u64(off);
        off += (t.nbytes + 31) / 32 * 32;
    }
    const uint64_t infos_end = b.size();
    b.pad_to(32).zeros(off);
    test::TempDir d;
    test::write_file(d.file("big.gguf"), b.data());

    const auto t0 = std::chrono::steady_clock::now();
    const Header h = parse(d.file("big.gguf"));
    const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(ms, 2000.0) << "a header parse is a single pass";
    ASSERT_EQ(h.tensors.size(), want.size());
    EXPECT_EQ(h.infos_end, infos_end);
    EXPECT_EQ(h.data_start, (infos_end + 31) / 32 * 32);
    EXPECT_EQ(h.data_size, off);
    for (size_t i = 0; i < want.size(); ++i) {
        const TensorInfo& t = h.tensors[i];
        ASSERT_EQ(t.name, want[i].name);
        EXPECT_EQ(t.type, want[i].type) << t.name;
        EXPECT_EQ(t.n_dims, want[i].ne.size()) << t.name;
        for (size_t dd = 0; dd < 4; ++dd)
            EXPECT_EQ(t.ne[dd], dd < want[i].ne.size() ? want[i].ne[dd] : 1) << t.name;
        EXPECT_EQ(t.offset, offsets[i]) << t.name;
        EXPECT_EQ(t.nbytes, want[i].nbytes) << t.name;
    }
    // And the model layer finds 142 MoE blocks of 5 expert-indexed tensors each.
    const ShardSet m = ShardSet::open(d.file("big.gguf"));
    const MoeLayout L = build_moe_layout(m);
    ASSERT_EQ(L.blocks.size(), 142u);
    EXPECT_EQ(L.blocks.front().block, 1);
    EXPECT_EQ(L.blocks.back().block, 142);
    for (const auto& blk : L.blocks) {
        ASSERT_EQ(blk.tensors.size(), 5u);
        EXPECT_EQ(blk.slab_bytes, 3 * q8_row * n_ff);
    }
}

// ---- damaged input ------------------------------------------------------------------------------

// Parses `path`; returns true on success, false on InputError (checking that the error names an
// offset inside the file), and fails the test on anything else.
bool parses_or_input_error(const std::string& path, uint64_t file_size, bool require_data,
                           const std::string& what) {
    try {
        parse(path, require_data);
        return true;
    } catch (const InputError& e) {
        if (e.offset()) {
            EXPECT_LE(*e.offset(), file_size) << what << ": " << e.what();
        }
        EXPECT_FALSE(e.field().empty()) << what << ": " << e.what();
        return false;
    } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": unexpected exception: " << e.what();
    } catch (...) {
        ADD_FAILURE() << what << ": unexpected non-std exception";
    }
    return false;
}

// Cuts a copy of `bytes` at every length in `cuts` (descending, with truncate(2) on one file) and
// requires: below infos_end an InputError; from infos_end on, success without the data check; and
// with it, success exactly when every tensor's data is inside.
void check_cuts(const std::vector<uint8_t>& bytes, std::vector<uint64_t> cuts, const std::string& label) {
    test::TempDir d;
    const std::string path = d.file("cut.gguf");
    test::write_file(path, bytes);
    const Header full = parse(path);
    uint64_t data_end = full.data_start;
    for (const auto& t : full.tensors) data_end = std::max(data_end, full.data_start + t.offset + t.nbytes);
    std::sort(cuts.rbegin(), cuts.rend());
    size_t errors = 0;
    for (uint64_t cut : cuts) {
        ASSERT_LT(cut, bytes.size());
        ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(cut)), 0);
        const std::string what = label + " cut at " + std::to_string(cut);
        const bool with_data = parses_or_input_error(path, cut, true, what);
        const bool header_only = parses_or_input_error(path, cut, false, what);
        EXPECT_EQ(header_only, cut >= full.infos_end) << what;
        EXPECT_EQ(with_data, cut >= data_end) << what;
        errors += !with_data;
        if (::testing::Test::HasFailure()) return;  // one report, not thousands
    }
    EXPECT_GT(errors, 0u);
}

TEST(GgufTruncation, HandMadeFileAtEveryByte) {
    const auto bytes = every_type_file();
    std::vector<uint64_t> cuts;
    for (uint64_t i = 0; i < bytes.size(); ++i) cuts.push_back(i);
    check_cuts(bytes, cuts, "every-type file");
}

TEST(GgufTruncation, FixtureShardsAtEveryHeaderByte) {
    REQUIRE_FIXTURES();
    // Shards 2 and 3 of the split fixture carry only split.* and tensor infos: small real headers.
    for (const char* rel : {"shards/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf",
                            "shards/tiny-deepseek2-IQ2_XXS-00003-of-00003.gguf"}) {
        const auto bytes = test::read_file(test::fixture(rel));
        test::TempDir d;
        test::write_file(d.file("s.gguf"), bytes);
        const Header h = parse(d.file("s.gguf"));
        std::vector<uint64_t> cuts;
        for (uint64_t i = 0; i <= h.data_start; ++i) cuts.push_back(i);
        // And a sample of data offsets: each tensor's first and last byte.
        for (const auto& t : h.tensors)
            if (t.nbytes > 0) {
                cuts.push_back(h.data_start + t.offset + 1);
                cuts.push_back(h.data_start + t.offset + t.nbytes - 1);
            }
        check_cuts(bytes, cuts, rel);
    }
}

TEST(GgufTruncation, FixtureModelHeader) {
    REQUIRE_FIXTURES();
    // The model's header is 128 KiB, mostly tokenizer arrays, and a cut late in it costs a whole parse:
    // every byte of the first 4 KiB (all scalar kvs and the start of the token array), of the first and
    // the last three tensor infos and of the padding, every 251st byte elsewhere, and 64 cuts through
    // the data.
    const auto bytes = test::read_file(test::fixture("models/tiny-deepseek2-Q8_0.gguf"));
    test::TempDir d;
    test::write_file(d.file("m.gguf"), bytes);
    const Header h = parse(d.file("m.gguf"));
    const uint64_t first_infos_end = h.tensors[3].info_offset;
    const uint64_t last_infos_start = h.tensors[h.tensors.size() - 3].info_offset;
    std::vector<uint64_t> cuts;
    for (uint64_t i = 0; i <= h.data_start; ++i)
        if (i < 4096 || (i >= h.tensors.front().info_offset && i < first_infos_end) ||
            i >= last_infos_start || i % 251 == 0)
            cuts.push_back(i);
    for (uint64_t k = 1; k <= 64; ++k) cuts.push_back(h.data_start + (bytes.size() - h.data_start) * k / 65);
    cuts.push_back(bytes.size() - 1);
    check_cuts(bytes, cuts, "Q8_0 model");
}

// Overwrites bytes in place (pwrite on one file), parses, restores.
class Patcher {
  public:
    explicit Patcher(const std::vector<uint8_t>& bytes) : bytes_(bytes), path_(dir_.file("p.gguf")) {
        test::write_file(path_, bytes_);
        fd_ = ::open(path_.c_str(), O_WRONLY);
    }
    ~Patcher() { ::close(fd_); }
    // Returns true when the patched file parses, false on InputError; anything else fails the test.
    bool try_patch(uint64_t at, const std::vector<uint8_t>& with, const std::string& what) {
        EXPECT_EQ(::pwrite(fd_, with.data(), with.size(), static_cast<off_t>(at)),
                  static_cast<ssize_t>(with.size()));
        const bool ok = parses_or_input_error(path_, bytes_.size(), true, what);
        EXPECT_EQ(::pwrite(fd_, bytes_.data() + at, with.size(), static_cast<off_t>(at)),
                  static_cast<ssize_t>(with.size()));
        return ok;
    }

  private:
    test::TempDir dir_;
    std::vector<uint8_t> bytes_;
    std::string path_;
    int fd_ = -1;
};

TEST(GgufCorruption, EveryBitOfHandMadeHeader) {
    const auto bytes = every_type_file();
    test::TempDir d;
    test::write_file(d.file("h.gguf"), bytes);
    const uint64_t header_end = parse(d.file("h.gguf")).infos_end;
    Patcher p(bytes);
    size_t ok = 0, refused = 0;
    for (uint64_t i = 0; i < header_end; ++i)
        for (int bit = 0; bit < 8; ++bit) {
            const uint8_t flipped = static_cast<uint8_t>(bytes[i] ^ (1u << bit));
            (p.try_patch(i, {flipped}, "bit " + std::to_string(bit) + " of byte " + std::to_string(i))
                 ? ok
                 : refused)++;
            if (::testing::Test::HasFailure()) return;
        }
    // Flipping bits in string payloads and values leaves a valid file; flipping lengths does not.
    EXPECT_GT(ok, 0u);
    EXPECT_GT(refused, 0u);
}

TEST(GgufCorruption, FixtureShardHeaderBytes) {
    REQUIRE_FIXTURES();
    const auto bytes = test::read_file(test::fixture("shards/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf"));
    Patcher p(bytes);
    test::TempDir d;
    test::write_file(d.file("s.gguf"), bytes);
    const uint64_t header_end = parse(d.file("s.gguf")).infos_end;
    size_t refused = 0;
    for (uint64_t i = 0; i < header_end; ++i)
        for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, static_cast<uint8_t>(bytes[i] + 1), uint8_t{0x80}}) {
            refused += !p.try_patch(i, {v}, "byte " + std::to_string(i) + " = " + std::to_string(v));
            if (::testing::Test::HasFailure()) return;
        }
    EXPECT_GT(refused, header_end)
        << "most single-byte damage to counts, lengths, types and offsets is caught";
}

TEST(GgufCorruption, RandomGarbageOverHeaders) {
    std::vector<std::vector<uint8_t>> inputs{every_type_file()};
    if (!test::fixtures_dir().empty())
        inputs.push_back(test::read_file(test::fixture("shards/tiny-deepseek2-IQ2_XXS-00003-of-00003.gguf")));
    std::mt19937_64 rng(20260823);
    for (const auto& bytes : inputs) {
        Patcher p(bytes);
        test::TempDir d;
        test::write_file(d.file("g.gguf"), bytes);
        const uint64_t header_end = parse(d.file("g.gguf")).infos_end;
        for (int round = 0; round < 3000; ++round) {
            const uint64_t at = rng() % header_end;
            std::vector<uint8_t> junk(1 + rng() % 8);
            if (at + junk.size() > bytes.size()) junk.resize(bytes.size() - at);
            for (auto& v : junk) v = static_cast<uint8_t>(rng());
            p.try_patch(at, junk, "round " + std::to_string(round) + " at " + std::to_string(at));
            if (::testing::Test::HasFailure()) return;
        }
    }
}

// ---- header pages only --------------------------------------------------------------------------

// Which pages of `path` are in the page cache (mincore on a fresh mapping, which touches nothing).
std::vector<bool> resident_pages(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    struct stat st {};
    ::fstat(fd, &st);
    const size_t size = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return {};
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> vec((size + page - 1) / page);
    const int rc = ::mincore(p, size, vec.data());
    ::munmap(p, size);
    if (rc != 0) return {};
    std::vector<bool> out(vec.size());
    for (size_t i = 0; i < vec.size(); ++i) out[i] = vec[i] & 1;
    return out;
}

void drop_from_page_cache(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR);
    ::fsync(fd);  // dirty pages cannot be dropped
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

TEST(GgufHeaderPages, ParseReadsAtMost64KiBPastTheHeader) {
    // A header of several pages (a 3,000-string array) before 16 MiB of tensor data.
    std::vector<std::string> vocab;
    for (int i = 0; i < 3000; ++i) vocab.push_back(fmt::format("token_{}", i));
    const std::vector<Kv> kvs{Kv::make_string("general.architecture", "llama"),
                              Kv::make_string_array("tokenizer.ggml.tokens", vocab), Kv::make_u32("x", 1)};
    std::vector<test::TensorSpec> specs;
    for (int i = 0; i < 16; ++i) specs.push_back({fmt::format("t{}", i), {1024, 256}, test::kF32});
    test::TempDir d;
    const std::string path = d.file("cold.gguf");
    const test::BuiltGguf g = test::write_gguf(path, kvs, specs);
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    ASSERT_GT(g.infos_end, 8 * page);

    drop_from_page_cache(path);
    std::vector<bool> before = resident_pages(path);
    ASSERT_FALSE(before.empty()) << "mincore failed";
    size_t still = 0;
    for (bool r : before) still += r;
    if (still > 0)
        GTEST_SKIP() << "this filesystem keeps " << still << " pages cached after POSIX_FADV_DONTNEED";

    const Header h = parse(path);
    ASSERT_EQ(h.tensors.size(), 16u);
    ASSERT_EQ(h.infos_end, g.infos_end);
    const std::vector<bool> after = resident_pages(path);
    EXPECT_TRUE(after[0]) << "the parse read the header (mincore sees it)";
    // The parse reads through a 64 KiB buffer with the kernel's readahead off: at most 64 KiB past the
    // header's last byte, nothing of the 16 MiB of data beyond.
    const size_t limit = (h.infos_end + (64 << 10)) / page;
    size_t data_pages = 0;
    for (size_t i = limit + 1; i < after.size(); ++i) data_pages += after[i];
    EXPECT_EQ(data_pages, 0u) << "of " << after.size() - limit - 1
                              << " pages more than 64 KiB after the header";
}

}  // namespace
}  // namespace gguf_reap
