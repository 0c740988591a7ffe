// A llama.cpp-made file read and written back unchanged is byte-identical to the original: header
// re-serialisation, and a keep-all splice (no provenance) through the copy engine.
#include <gtest/gtest.h>

#include <filesystem>

#include "format/gguf.h"
#include "splice_test_support.h"

namespace gguf_reap {
namespace {

using test::fixture;
using test::splice_api;
using test::TempDir;

std::vector<std::string> fixture_gguf_files() {
    std::vector<std::string> files;
    for (const char* sub : {"models", "shards", "imatrix"})
        for (const auto& e : std::filesystem::directory_iterator(fixture(sub)))
            if (e.path().extension() == ".gguf") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    return files;
}

TEST(GgufRoundtrip, HeaderReserialisesByteIdentical) {
    REQUIRE_FIXTURES();
    const auto files = fixture_gguf_files();
    ASSERT_EQ(files.size(), 12u);  // 3 models, 3 shards, 6 GGUF imatrices
    for (const std::string& path : files) {
        SCOPED_TRACE(path);
        auto f = InputFile::open(path);
        const Header h = parse_gguf_header(*f);
        std::vector<TensorInfo> tensors = h.tensors;
        EXPECT_EQ(assign_offsets(tensors, h.alignment), h.data_size);
        for (size_t i = 0; i < tensors.size(); ++i) EXPECT_EQ(tensors[i].offset, h.tensors[i].offset);
        const std::vector<uint8_t> bytes = serialize_header(h.version, h.kvs, tensors, h.alignment);
        ASSERT_EQ(bytes.size(), h.data_start);
        std::vector<uint8_t> original(h.data_start);
        f->read(0, original.data(), original.size());
        EXPECT_TRUE(bytes == original);
        EXPECT_EQ(h.data_start + h.data_size, f->size()) << "ggml pads the last tensor too; nothing follows";
    }
}

TEST(GgufRoundtrip, KeepAllSpliceIsByteIdentical) {
    REQUIRE_FIXTURES();
    TempDir dir;
    const std::string keep_all =
        test::write_text(dir.file("all.json"), R"({"drop": {"1": [], "2": [], "3": []}})");
    SpliceOptions o;
    o.provenance = false;
    for (const char* m : {"tiny-deepseek2-Q8_0", "tiny-deepseek2-Q4_K_M", "tiny-deepseek2-IQ2_XXS"}) {
        SCOPED_TRACE(m);
        const std::string src = fixture(std::string("models/") + m + ".gguf");
        splice_api(src, keep_all, dir.file(m), o);
        EXPECT_EQ(
            test::sha256_file_range(dir.file(std::string(m) + ".gguf"), 0, std::filesystem::file_size(src)),
            test::sha256_file_range(src, 0, std::filesystem::file_size(src)));
        EXPECT_EQ(std::filesystem::file_size(dir.file(std::string(m) + ".gguf")),
                  std::filesystem::file_size(src));
    }
}

TEST(GgufRoundtrip, KeepAllSpliceOfShardsIsByteIdentical) {
    REQUIRE_FIXTURES();
    TempDir dir;
    const std::string keep_all =
        test::write_text(dir.file("all.json"), R"({"drop": {"1": [], "2": [], "3": []}})");
    SpliceOptions o;
    o.provenance = false;
    o.split_mode = SplitMode::kMaxTensors;
    o.split_value = 24;  // llama-gguf-split --split-max-tensors 24 made the fixture shards
    splice_api(fixture("shards/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf"), keep_all, dir.file("s"), o);
    for (int i = 1; i <= 3; ++i) {
        const std::string name = fmt::format("-{:05}-of-00003.gguf", i);
        const std::string src = fixture("shards/tiny-deepseek2-IQ2_XXS" + name);
        const std::string out = dir.file("s" + name);
        ASSERT_EQ(std::filesystem::file_size(out), std::filesystem::file_size(src)) << name;
        EXPECT_EQ(test::sha256_file_range(out, 0, std::filesystem::file_size(src)),
                  test::sha256_file_range(src, 0, std::filesystem::file_size(src)))
            << name;
    }
}

}  // namespace
}  // namespace gguf_reap
