// Shard sets: opening a model from any shard, and one named test per way a split set can be broken
// (reference §4.4: split.no / split.count / split.tensors.count with llama.cpp's exact types, missing
// and extra shards, duplicate tensors). Each asserts the exact one-line error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "format/gguf.h"
#include "gguf_builder.h"
#include "gguf_reap/error.h"
#include "model/shard_set.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::TensorSpec;

// The split keys exactly as llama.cpp writes them: u16, u16, i32, last in the kv list.
std::vector<Kv> with_split(std::vector<Kv> kvs, int no, int count, int tensors) {
    kvs.push_back(Kv::make_u16("split.no", static_cast<uint16_t>(no)));
    kvs.push_back(Kv::make_u16("split.count", static_cast<uint16_t>(count)));
    kvs.push_back(Kv::make_i32("split.tensors.count", tensors));
    return kvs;
}

const std::vector<Kv> kModelKvs{Kv::make_string("general.architecture", "llama"),
                                Kv::make_u32("llama.block_count", 1)};

// Five tensors over three shards: a, b | c, d | e.
const std::vector<std::vector<TensorSpec>> kShardTensors{
    {{"a", {32, 2}, test::kF32}, {"b", {64}, test::kQ8_0}},
    {{"c", {16}, test::kF16}, {"d", {32, 4}, test::kQ8_0}},
    {{"e", {8}, test::kF32}},
};

class ShardSetTest : public ::testing::Test {
  protected:
    std::string path(const std::string& name) const { return dir_.file(name); }
    static std::string shard_name(int number, int count = 3) { return split_path("m", number, count); }

    test::BuiltGguf write(const std::string& name, const std::vector<Kv>& kvs,
                          const std::vector<TensorSpec>& t) {
        return test::write_gguf(path(name), kvs, t);
    }

    // The standard good set m-0000{1,2,3}-of-00003.gguf; returns what was written per shard.
    std::vector<test::BuiltGguf> write_set() {
        std::vector<test::BuiltGguf> out;
        out.push_back(write(shard_name(1), with_split(kModelKvs, 0, 3, 5), kShardTensors[0]));
        out.push_back(write(shard_name(2), with_split({}, 1, 3, 5), kShardTensors[1]));
        out.push_back(write(shard_name(3), with_split({}, 2, 3, 5), kShardTensors[2]));
        return out;
    }

    // ShardSet::open's InputError, with this test's directory removed from it; "" on success.
    std::string error_of(const std::string& name) {
        try {
            ShardSet::open(path(name));
        } catch (const InputError& e) {
            std::string what = e.what();
            const std::string dir = dir_.path().string() + "/";
            for (size_t at; (at = what.find(dir)) != std::string::npos;) what.erase(at, dir.size());
            return what;
        }
        return "";
    }

    test::TempDir dir_;
};

// ---- good sets ----------------------------------------------------------------------------------

TEST_F(ShardSetTest, OpensFromAnyShard) {
    const auto built = write_set();
    for (int n = 1; n <= 3; ++n) {
        SCOPED_TRACE(n);
        const ShardSet s = ShardSet::open(path(shard_name(n)));
        EXPECT_TRUE(s.is_split());
        ASSERT_EQ(s.shards().size(), 3u);
        for (int i = 0; i < 3; ++i)
            EXPECT_EQ(s.shards()[static_cast<size_t>(i)].path, path(shard_name(i + 1)));
        EXPECT_EQ(s.architecture(), "llama");
        EXPECT_EQ(s.arch_uint("block_count"), 1u);
        EXPECT_EQ(s.metadata().kvs.size(), 5u) << "metadata is shard 1's";
        ASSERT_EQ(s.tensors().size(), 5u);
        const char* names[] = {"a", "b", "c", "d", "e"};
        const size_t shard_of[] = {0, 0, 1, 1, 2};
        for (size_t i = 0; i < 5; ++i) {
            const TensorRef& r = s.tensors()[i];
            EXPECT_EQ(s.info(r).name, names[i]);
            EXPECT_EQ(r.shard, shard_of[i]);
            const test::BuiltGguf& g = built[shard_of[i]];
            const TensorInfo& t = g.tensors[r.index];
            EXPECT_EQ(r.abs_offset, g.data_start + t.offset) << names[i];
            EXPECT_EQ(r.nbytes, t.nbytes) << names[i];
            EXPECT_EQ(s.find_tensor(names[i]), &r);
        }
        EXPECT_EQ(s.find_tensor("zz"), nullptr);
        EXPECT_EQ(s.total_bytes(), built[0].bytes.size() + built[1].bytes.size() + built[2].bytes.size());
    }
}

TEST_F(ShardSetTest, OpensFromRelativePath) {
    write_set();
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir_.path());
    std::string error;
    size_t shards = 0;
    try {
        shards = ShardSet::open(shard_name(2)).shards().size();
    } catch (const std::exception& e) {
        error = e.what();
    }
    std::filesystem::current_path(cwd);
    EXPECT_EQ(error, "");
    EXPECT_EQ(shards, 3u);
}

TEST_F(ShardSetTest, UnsplitFile) {
    write("m.gguf", kModelKvs, kShardTensors[0]);
    const ShardSet s = ShardSet::open(path("m.gguf"));
    EXPECT_FALSE(s.is_split());
    EXPECT_EQ(s.shards().size(), 1u);
    EXPECT_EQ(s.tensors().size(), 2u);
}

TEST_F(ShardSetTest, MergedFileWithSplitCountZeroIsUnsplit) {
    // gguf-split --merge keeps the split keys with split.count = 0 so that nobody merges it again.
    write("m.gguf", with_split(kModelKvs, 0, 0, 2), kShardTensors[0]);
    EXPECT_FALSE(ShardSet::open(path("m.gguf")).is_split());
    // A one-shard "set" is an unsplit file too, whatever its name.
    write(shard_name(1, 1), with_split(kModelKvs, 0, 1, 2), kShardTensors[0]);
    EXPECT_FALSE(ShardSet::open(path(shard_name(1, 1))).is_split());
}

TEST(SplitName, ParseAndFormat) {
    EXPECT_EQ(split_path("dir/model", 2, 14), "dir/model-00002-of-00014.gguf");
    const auto n = parse_split_name("dir/model-Q4_K-00002-of-00014.gguf");
    ASSERT_TRUE(n);
    EXPECT_EQ(n->prefix, "dir/model-Q4_K");
    EXPECT_EQ(n->number, 2);
    EXPECT_EQ(n->count, 14);
    EXPECT_FALSE(parse_split_name("model-2-of-14.gguf")) << "llama.cpp always writes five digits";
    EXPECT_FALSE(parse_split_name("model-00002-of-00014.bin"));
    EXPECT_FALSE(parse_split_name("model.gguf"));
}

// ---- one named test per broken set --------------------------------------------------------------

TEST_F(ShardSetTest, SplitCountDisagreesWithFileName) {
    const auto g = write(shard_name(1, 2), with_split(kModelKvs, 0, 3, 5), kShardTensors[0]);
    EXPECT_EQ(
        error_of(shard_name(1, 2)),
        fmt::format("m-00001-of-00002.gguf: kv 'split.count' at offset {0} (0x{0:x}): split.count is 3 but "
                    "the file name says -of-00002",
                    g.kv_offsets[3]));
}

TEST_F(ShardSetTest, NameSaysOf3WithoutSplitKeys) {
    write(shard_name(1), kModelKvs, kShardTensors[0]);
    EXPECT_EQ(
        error_of(shard_name(1)),
        "m-00001-of-00003.gguf: file name: the name says shard 1 of 3, but the file has no split.count key");
}

TEST_F(ShardSetTest, NameSaysOf3ButSplitCountIs1) {
    write(shard_name(2), with_split(kModelKvs, 0, 1, 2), kShardTensors[0]);
    EXPECT_EQ(
        error_of(shard_name(2)),
        "m-00002-of-00003.gguf: file name: the name says shard 2 of 3, but the file has split.count = 1");
}

TEST_F(ShardSetTest, SplitCountWithoutSplitName) {
    const auto g = write("m.gguf", with_split(kModelKvs, 0, 3, 5), kShardTensors[0]);
    EXPECT_EQ(error_of("m.gguf"),
              fmt::format("m.gguf: kv 'split.count' at offset {0} (0x{0:x}): split.count is 3 "
                          "but the file name does not follow PREFIX-NNNNN-of-MMMMM.gguf, so its "
                          "siblings cannot be found",
                          g.kv_offsets[3]));
}

TEST_F(ShardSetTest, MissingShard) {
    write_set();
    std::filesystem::remove(path(shard_name(2)));
    for (int n : {1, 3})
        EXPECT_EQ(error_of(shard_name(n)),
                  "m-00002-of-00003.gguf: shard: missing shard 2 of 3 (the set "
                  "m-00001-of-00003.gguf needs every shard)");
}

TEST_F(ShardSetTest, ExtraShardNumberPastCount) {
    write_set();
    write(shard_name(4, 3), with_split({}, 3, 3, 5), {{"f", {8}, test::kF32}});
    EXPECT_EQ(error_of(shard_name(1)),
              "m-00004-of-00003.gguf: shard: extra shard beside a set of 3: remove it or "
              "move it away (it would be mistaken for part of the model)");
}

TEST_F(ShardSetTest, ExtraShardOfAnotherSplit) {
    write_set();
    // Another model's shards (other prefix) are no concern; a leftover of an earlier 4-way split is.
    write("n-00001-of-00002.gguf", with_split(kModelKvs, 0, 2, 2), kShardTensors[0]);
    EXPECT_EQ(error_of(shard_name(1)), "");
    write(shard_name(1, 4), with_split(kModelKvs, 0, 4, 5), kShardTensors[0]);
    EXPECT_EQ(error_of(shard_name(2)),
              "m-00001-of-00004.gguf: shard: extra shard beside a set of 3: remove it or "
              "move it away (it would be mistaken for part of the model)");
}

TEST_F(ShardSetTest, TwoShardsSwapped) {
    // Shard 1's and shard 2's contents under each other's names: the first file says split.no 1.
    write(shard_name(2), with_split(kModelKvs, 0, 3, 5), kShardTensors[0]);
    const auto g = write(shard_name(1), with_split({}, 1, 3, 5), kShardTensors[1]);
    write(shard_name(3), with_split({}, 2, 3, 5), kShardTensors[2]);
    EXPECT_EQ(error_of(shard_name(3)),
              fmt::format(
                  "m-00001-of-00003.gguf: kv 'split.no' at offset {0} (0x{0:x}): split.no is 1 but the file "
                  "is shard 1 of 3 (expected 0)",
                  g.kv_offsets[0]));
}

TEST_F(ShardSetTest, SplitNoOutOfSequence) {
    write_set();
    const auto g = write(shard_name(3), with_split({}, 1, 3, 5), kShardTensors[2]);
    EXPECT_EQ(error_of(shard_name(1)),
              fmt::format(
                  "m-00003-of-00003.gguf: kv 'split.no' at offset {0} (0x{0:x}): split.no is 1 but the file "
                  "is shard 3 of 3 (expected 2)",
                  g.kv_offsets[0]));
}

TEST_F(ShardSetTest, LaterShardWithoutSplitNo) {
    write_set();
    write(shard_name(2), {Kv::make_u16("split.count", 3)}, kShardTensors[1]);
    EXPECT_EQ(error_of(shard_name(1)),
              "m-00002-of-00003.gguf: kv 'split.no': missing key split.no in a split shard");
}

TEST_F(ShardSetTest, LaterShardSplitCountDisagrees) {
    write_set();
    const auto g = write(shard_name(3), with_split({}, 2, 4, 5), kShardTensors[2]);
    EXPECT_EQ(error_of(shard_name(1)),
              fmt::format(
                  "m-00003-of-00003.gguf: kv 'split.count' at offset {0} (0x{0:x}): split.count is 4 but the "
                  "set has 3 shards",
                  g.kv_offsets[1]));
}

TEST_F(ShardSetTest, SplitTensorsCountWrong) {
    write_set();
    const auto g = write(shard_name(1), with_split(kModelKvs, 0, 3, 7), kShardTensors[0]);
    EXPECT_EQ(error_of(shard_name(2)),
              fmt::format("m-00001-of-00003.gguf: kv 'split.tensors.count' at offset {0} (0x{0:x}): "
                          "split.tensors.count is 7 but the 3 shards hold 5 tensors",
                          g.kv_offsets[4]));
}

TEST_F(ShardSetTest, SplitTensorsCountMissing) {
    write_set();
    auto kvs = with_split(kModelKvs, 0, 3, 5);
    kvs.pop_back();
    write(shard_name(1), kvs, kShardTensors[0]);
    EXPECT_EQ(error_of(shard_name(1)),
              "m-00001-of-00003.gguf: kv 'split.tensors.count': missing key split.tensors.count in the first "
              "shard");
}

struct WrongType {
    const char* key;
    Kv kv;
    const char* want;
    const char* found;
};

class ShardSetWrongType : public ShardSetTest, public ::testing::WithParamInterface<int> {};

TEST_P(ShardSetWrongType, SplitKeyOfWrongGgufType) {
    const std::vector<WrongType> cases{
        {"split.no", Kv::make_u32("split.no", 0), "u16", "u32"},
        {"split.count", Kv::make_u32("split.count", 3), "u16", "u32"},
        {"split.count", Kv::make_i32("split.count", 3), "u16", "i32"},
        {"split.tensors.count", Kv::make_u32("split.tensors.count", 5), "i32", "u32"},
        {"split.tensors.count", Kv::make_u64("split.tensors.count", 5), "i32", "u64"},
    };
    const WrongType& c = cases[static_cast<size_t>(GetParam())];
    write_set();
    auto kvs = with_split(kModelKvs, 0, 3, 5);
    size_t index = 0;
    for (size_t i = 0; i < kvs.size(); ++i)
        if (kvs[i].key == c.key) kvs[index = i] = c.kv;
    const auto g = write(shard_name(1), kvs, kShardTensors[0]);
    EXPECT_EQ(
        error_of(shard_name(2)),
        fmt::format("m-00001-of-00003.gguf: kv '{1}' at offset {0} (0x{0:x}): must be of type {2}, found {3} "
                    "(llama.cpp refuses the wrong type)",
                    g.kv_offsets[index], c.key, c.want, c.found));
}

INSTANTIATE_TEST_SUITE_P(AllSplitKeys, ShardSetWrongType, ::testing::Range(0, 5));

TEST_F(ShardSetTest, DuplicateTensorAcrossShards) {
    write_set();
    const auto g =
        write(shard_name(2), with_split({}, 1, 3, 5), {{"c", {16}, test::kF16}, {"a", {8}, test::kF32}});
    EXPECT_EQ(error_of(shard_name(3)),
              fmt::format(
                  "m-00002-of-00003.gguf: tensor 'a' at offset {0} (0x{0:x}): duplicate tensor name (also in "
                  "m-00001-of-00003.gguf)",
                  g.info_offsets[1]));
}

TEST_F(ShardSetTest, ShardThatIsNotGguf) {
    write_set();
    test::write_file(path(shard_name(3)), std::vector<uint8_t>(64, 'x'));
    EXPECT_EQ(error_of(shard_name(1)),
              "m-00003-of-00003.gguf: magic at offset 0 (0x0): not a GGUF file (starts with "
              "\"xxxx\", expected \"GGUF\")");
}

TEST_F(ShardSetTest, TruncatedShard) {
    // An interrupted download: shard 2 ends one byte before its last tensor's data does.
    const auto built = write_set();
    const TensorInfo& d = built[1].tensors[1];
    const uint64_t size = built[1].data_start + d.offset + d.nbytes - 1;
    ASSERT_EQ(::truncate(path(shard_name(2)).c_str(), static_cast<off_t>(size)), 0);
    const uint64_t offset_field = built[1].info_offsets[1] + test::encoded_info_size(d) - 8;
    EXPECT_EQ(error_of(shard_name(1)),
              fmt::format(
                  "m-00002-of-00003.gguf: tensor #1 'd' data at offset {0} (0x{0:x}): data [{1}, +{2}) lies "
                  "outside the file of {3} bytes (truncated file?)",
                  offset_field, built[1].data_start + d.offset, d.nbytes, size));
}

}  // namespace
}  // namespace gguf_reap
