// Hostile and absurd inputs to the readers of keeplists, manifests and width plans (issue 7, item 3;
// docs/reliability.md "Inputs"): each is refused with InputError or UsageError naming what is wrong,
// never a crash, a stack overflow, a huge allocation or another exception. The reproducers of the fuzz
// campaigns' findings (docs/fuzzing.md) live here too, as named tests.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "format/npz.h"
#include "gguf_reap/error.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/manifest.h"
#include "gguf_reap/width.h"
#include "model/moe_layout.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::error_of;

// blk.1..blk.3, 16 experts, 4 used: the shape of the shared tiny-deepseek2 fixture, built in memory.
MoeLayout layout16() {
    MoeLayout L;
    L.arch = "deepseek2";
    L.expert_count = 16;
    L.expert_used_count = 4;
    for (int b = 1; b <= 3; ++b) {
        MoeBlock block;
        block.block = b;
        L.blocks.push_back(block);
    }
    return L;
}

// The UsageError of validating `text` against layout16(), or the InputError of parsing it.
std::string keeplist_error(const std::string& text) {
    try {
        KeepList k = KeepList::parse(text, "k.json");
        validate_keeplist(k, layout16(), "k.json");
    } catch (const InputError& e) {
        return e.what();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

const std::string kSrc = R"("source": {"architecture": "deepseek2", "expert_count": 16})";

std::string v1(const std::string& block1_keep, const std::string& extra = "") {
    return R"({"format": "gguf-reap.keeplist", "version": 1, )" + kSrc + extra +
           R"(, "blocks": [{"block": 1, "keep": )" + block1_keep +
           R"(}, {"block": 2, "keep": [0, 1, 2, 3]}, {"block": 3, "keep": [0, 1, 2, 3]}]})";
}

// ---- keeplists ---------------------------------------------------------------------------------------

TEST(HostileKeeplist, AbsurdCounts) {
    EXPECT_EQ(keeplist_error(v1("[0, 1, 2, 1000000000000]")),
              "k.json: block 1: kept id 1000000000000 is out of range (the model has experts 0..15)");
    EXPECT_EQ(keeplist_error(v1("[0, 1, 2, 18446744073709551615]")),
              "k.json: block 1: kept id 9223372036854775807 is out of range (the model has experts 0..15)");
    EXPECT_EQ(keeplist_error(v1("[0, 1, 2, 3]", R"(, "n_keep": 1000000000000)")),
              "k.json: n_keep is 1000000000000 but the blocks keep 4 experts each");
    EXPECT_EQ(keeplist_error(v1("[0, 1, 2, 3]", R"(, "n_keep": 1e12)")),
              "k.json: n_keep: must be a non-negative integer, found 1000000000000.0");
    EXPECT_EQ(keeplist_error(R"({"version": 1, "source": {"architecture": "deepseek2", "expert_count": )"
                             R"(1099511627776}, "blocks": []})"),
              "k.json: source.expert_count: ranked on a model with 1099511627776 experts per block, but the "
              "model has 16: a keeplist applies only to a model with the same architecture, expert layout "
              "and tensor names (another model, or an already pruned one?)");
    EXPECT_EQ(keeplist_error(R"({"version": 1, "blocks": [{"block": 1000000000000, "keep": [0]}]})"),
              "k.json: blocks[0].block: block 1000000000000 is out of range");
    EXPECT_EQ(keeplist_error(R"({"drop": {"1000000000000": [0]}})"),
              "k.json: drop: key \"1000000000000\" is not a block number");
}

TEST(HostileKeeplist, DuplicateNegativeAndNonIntegerIds) {
    EXPECT_EQ(keeplist_error(v1("[0, 1, 1, 2]")), "k.json: block 1: kept id 1 is listed twice");
    EXPECT_EQ(keeplist_error(R"({"drop": {"1": [5, 5], "2": [5], "3": [5]}})"),
              "k.json: block 1: dropped id 5 is listed twice");
    EXPECT_EQ(keeplist_error(v1("[-1, 0, 1, 2]")),
              "k.json: block 1: kept id -1 is out of range (the model has experts 0..15)");
    EXPECT_EQ(keeplist_error(R"({"drop": {"1": [-3], "2": [5], "3": [5]}})"),
              "k.json: block 1: dropped id -3 is out of range (the model has experts 0..15)");
    EXPECT_EQ(keeplist_error(v1("[0, 1, 2.5, 3]")),
              "k.json: blocks[0].keep[2]: expert id must be an integer, found 2.5");
    EXPECT_EQ(keeplist_error(v1(R"([0, 1, "2", 3])")),
              "k.json: blocks[0].keep[2]: expert id must be an integer, found \"2\"");
    EXPECT_EQ(keeplist_error(v1("[0, 1, null, 3]")),
              "k.json: blocks[0].keep[2]: expert id must be an integer, found null");
    EXPECT_EQ(keeplist_error(R"({"drop": {"-1": [0]}})"), "k.json: drop: key \"-1\" is not a block number");
    EXPECT_EQ(keeplist_error(R"({"version": 1, "blocks": [{"block": 1, "keep": [0]}, {"block": 1, )"
                             R"("keep": [0]}]})"),
              "k.json: block 1 is listed twice");
}

TEST(HostileKeeplist, WrongModel) {
    EXPECT_EQ(
        keeplist_error(R"({"version": 1, "source": {"architecture": "qwen3moe", "expert_count": 16}, )"
                       R"("blocks": []})"),
        "k.json: source.architecture: ranked on a model with architecture 'qwen3moe', but the model has "
        "architecture 'deepseek2': a keeplist applies only to a model with the same architecture, expert "
        "layout and tensor names (another model, or an already pruned one?)");
    EXPECT_EQ(
        keeplist_error(R"({"version": 1, "source": {"architecture": "deepseek2", "expert_count": 8}, )"
                       R"("blocks": []})"),
        "k.json: source.expert_count: ranked on a model with 8 experts per block, but the model has 16: a "
        "keeplist applies only to a model with the same architecture, expert layout and tensor names "
        "(another model, or an already pruned one?)");
}

TEST(HostileKeeplist, VersionIsComparedBeforeNarrowing) {
    // 2^32 + 1 once narrowed to int and passed as version 1.
    EXPECT_EQ(
        keeplist_error(R"({"version": 4294967297, "blocks": []})"),
        "k.json: version: keeplist version 4294967297 is not supported (this gguf-reap reads version 1)");
}

TEST(HostileKeeplist, HundredThousandLevelsDeepIsRefusedWithoutRecursing) {
    // nlohmann's DOM recurses when it is destroyed: the depth is checked on the text first, in one pass.
    const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
    EXPECT_EQ(keeplist_error(deep), "k.json: json at offset 64 (0x40): nested deeper than 64 levels");
    const std::string deep_objects = [] {
        std::string s;
        for (int i = 0; i < 100'000; ++i) s += "{\"a\":";
        return s + "1" + std::string(100'000, '}');
    }();
    EXPECT_EQ(keeplist_error(deep_objects),
              "k.json: json at offset 320 (0x140): nested deeper than 64 levels");
}

TEST(HostileKeeplist, OverSixtyFourMiBIsRefusedBeforeReading) {
    test::TempDir d;
    const std::string path = d.file("huge.json");
    test::write_file(path, {'{', '}'});
    std::filesystem::resize_file(path, (uint64_t{64} << 20) + 1);  // sparse: no 64 MiB written
    EXPECT_EQ(error_of<InputError>([&] { KeepList::load(path); }),
              path + ": file: 67108865 bytes is too large for a keeplist (limit 64 MiB)");
}

TEST(HostileKeeplist, MillionsOfIdsAreRefusedWhileParsing) {
    // 64 MiB of "0," is 33 million ids: parsed whole it took 1.4 GB. The value count stops it at 4 Mi.
    std::string text = "{\"drop\": {\"1\": [";
    for (int i = 0; i < 4'200'000; ++i) text += "0,";
    text += "0]}}";
    EXPECT_EQ(keeplist_error(text),
              "k.json: json: holds more than 4194304 values, more than any model's keeplist needs");
}

// ---- manifests -----------------------------------------------------------------------------------------

std::string manifest_error(const std::string& text) {
    return error_of<InputError>([&] { Manifest::parse(text, "m.json"); });
}

TEST(HostileManifest, NumberBeyondDoubleRangeIsBadInput) {
    // fuzz_manifest finding 1: nlohmann's out_of_range.406 escaped as an internal error (exit 3).
    EXPECT_EQ(manifest_error(R"({"format": "gguf-reap.manifest", "version": 1E400, "shards": []})"),
              "m.json: json: not valid JSON ([json.exception.out_of_range.406] number overflow parsing "
              "'1E400')");
}

TEST(HostileManifest, HundredThousandLevelsDeep) {
    EXPECT_EQ(manifest_error(std::string(100'000, '[') + std::string(100'000, ']')),
              "m.json: json: nested deeper than 16 levels");
}

TEST(HostileManifest, MillionsOfValuesAreRefusedWhileParsing) {
    std::string text = "[";
    for (int i = 0; i < 16'800'000; ++i) text += "0,";
    text += "0]";
    EXPECT_EQ(manifest_error(text),
              "m.json: json: holds more than 16777216 values, more than a manifest needs");
}

TEST(HostileManifest, OverTheSizeCapIsRefusedBeforeReading) {
    test::TempDir d;
    const std::string path = d.file("huge.json");
    test::write_file(path, {'{', '}'});
    std::filesystem::resize_file(path, (uint64_t{256} << 20) + 1);
    EXPECT_EQ(error_of<InputError>([&] { Manifest::load(path); }),
              path + ": file: 268435457 bytes is too large for a manifest (limit 256 MiB)");
}

// ---- width plans -----------------------------------------------------------------------------------------

std::string plan_error(const std::string& path) {
    return error_of<InputError>([&] { read_neuron_plan(path, {1, 2, 3}, 4, 64); });
}

TEST(HostilePlan, ZeroRowsWithAHugeKIsRefusedBeforeAllocating) {
    // fuzz_plan_npz finding 1: [0, 2^40] channels with empty id arrays passed every check and then
    // sized the plan as blocks × experts × k = 12 × 2^40 ids.
    test::TempDir d;
    NpyArray ch = NpyArray::u16({0, int64_t{1} << 40}, {});
    write_npz(d.file("p.npz"),
              {{"channels", ch}, {"block", NpyArray::i64({0}, {})}, {"expert", NpyArray::i64({0}, {})}});
    EXPECT_EQ(
        plan_error(d.file("p.npz")),
        d.file("p.npz") +
            ": channels: has 0 rows but the model has 3 MoE blocks × 4 experts = 12: a plan has one row "
            "per (block, expert) pair");
}

TEST(HostilePlan, FloatIdArraysAreBadInputNamingTheArray) {
    // fuzz_plan_npz finding 2: NpyArray::to_int64's UsageError escaped without the file or the array.
    test::TempDir d;
    const NpyArray ch = NpyArray::u16({12, 1}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
    write_npz(d.file("b.npz"), {{"channels", ch},
                                {"block", NpyArray::f64({12}, std::vector<double>(12, 1.0))},
                                {"expert", NpyArray::i64({12}, std::vector<int64_t>(12, 0))}});
    EXPECT_EQ(plan_error(d.file("b.npz")),
              d.file("b.npz") + ": block: must be an integer array, found dtype '<f8'");
    NpyArray fch = NpyArray::f64({12, 1}, std::vector<double>(12, 0.0));
    write_npz(d.file("c.npz"), {{"channels", fch}});
    EXPECT_EQ(plan_error(d.file("c.npz")),
              d.file("c.npz") + ": channels: must be an integer array, found dtype '<f8'");
    write_npz(d.file("k.npz"), {{"channels", ch}, {"k", NpyArray::f64({1}, {1.0})}});
    EXPECT_EQ(plan_error(d.file("k.npz")),
              d.file("k.npz") + ": k: must be an integer array, found dtype '<f8'");
}

// A small valid archive, then `patch` applied to the bytes of its (first) central directory entry.
std::string patched_npz(const test::TempDir& d, const std::string& name,
                        const std::function<void(std::vector<uint8_t>&, size_t)>& patch) {
    const std::string path = d.file(name);
    write_npz(path, {{"channels", NpyArray::u16({2, 2}, {1, 2, 3, 4})}, {"k", NpyArray::i64({1}, {2})}});
    std::vector<uint8_t> b = test::read_file(path);
    const uint8_t magic[4] = {'P', 'K', 1, 2};
    size_t cd = 0;
    while (cd + 46 <= b.size() && std::memcmp(b.data() + cd, magic, 4) != 0) ++cd;
    EXPECT_LE(cd + 46, b.size());
    patch(b, cd);
    test::write_file(path, b);
    return path;
}

TEST(HostilePlan, ForgedMemberSizeCostsNothing) {
    // fuzz_plan_npz finding 3: the directory's uncompressed size sized the read buffer up front, so a
    // 907-byte archive claiming a 1.9 GB member allocated 1.9 GB (4 GiB would have been accepted).
    test::TempDir d;
    const std::string path = patched_npz(d, "forged.npz", [](std::vector<uint8_t>& b, size_t cd) {
        const uint32_t claim = 1'919'120'229;
        std::memcpy(b.data() + cd + 24, &claim, 4);  // uncompressed size
    });
    EXPECT_EQ(error_of<InputError>([&] { read_npz(path); }),
              path + ": member 'channels.npy': cannot be decompressed (damaged archive?)");
}

TEST(HostilePlan, DamagedCentralDirectoryIsBadInputNotAMissingFile) {
    // fuzz_plan_npz finding 4: libzip reports a local-header offset of 0xFFFFFFFF (a zip64 marker with no
    // zip64 record) as ZIP_ER_NOENT, which read_npz turned into "open: No such file", exit 3.
    test::TempDir d;
    const std::string path = patched_npz(d, "cd.npz", [](std::vector<uint8_t>& b, size_t cd) {
        const uint32_t off = 0xFFFFFFFFu;
        std::memcpy(b.data() + cd + 42, &off, 4);  // relative offset of the local header
    });
    EXPECT_EQ(
        error_of<InputError>([&] { read_npz(path); }),
        path + ": zip at offset 0 (0x0): not a valid .npz (zip) archive: its central directory is damaged");
    EXPECT_EQ(error_of<InputError>([&] { read_npz(d.file("missing.npz")); }),
              d.file("missing.npz") + ": does not exist");
}

TEST(HostilePlan, MoreChannelsThanTheWidth) {
    test::TempDir d;
    write_npz(d.file("w.npz"), {{"channels", NpyArray::u16({12, 65}, std::vector<uint16_t>(12 * 65, 0))}});
    EXPECT_EQ(plan_error(d.file("w.npz")),
              d.file("w.npz") + ": channels: keeps 65 channels per expert, more than the expert width 64");
}

}  // namespace
}  // namespace gguf_reap
