// audit against real llama.cpp-made fixtures. The pruned outputs audited here are built by this file's
// own small writer (serialize_header + byte copies), independent of splice, and checked against the
// fixture's pruning oracle (expected.json) before they are trusted. Then one byte at a time is broken in
// every kind of region, and shards are cut, removed, added and swapped: audit must name each one.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "format/gguf.h"
#include "io/error.h"
#include "io/input_file.h"
#include "model/shard_set.h"
#include "ops/audit.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

namespace fs = std::filesystem;
using test::fixture;
using test::TempDir;

const char* kQ8 = "models/tiny-deepseek2-Q8_0.gguf";
const char* kIq2 = "models/tiny-deepseek2-IQ2_XXS.gguf";
const char* kIq2Shard1 = "shards/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf";

using Keep = std::map<int, std::vector<int64_t>>;

// prune_specs/tiny-deepseek2.drop-dead.json and drop-live.json, as kept ids.
Keep keep_all_but(const std::map<int, std::vector<int64_t>>& drop) {
    Keep k;
    for (const auto& [block, ids] : drop)
        for (int64_t e = 0; e < 16; ++e)
            if (std::find(ids.begin(), ids.end(), e) == ids.end()) k[block].push_back(e);
    return k;
}
Keep drop_dead() {
    return keep_all_but({{1, {3, 7, 12}}, {2, {0, 9, 14}}, {3, {5, 10, 15}}});
}
Keep drop_live() {
    return keep_all_but({{1, {0, 2, 4}}, {2, {1, 2, 6}}, {3, {0, 1, 3}}});
}

// ---- an independent writer of pruned outputs ---------------------------------------------------------

struct BuildSpec {
    std::string source = kQ8;  // relative to the fixtures; an unsplit model
    Keep keep;                 // empty: no pruning
    int shards = 3;
    bool provenance = true;
    bool swap_tensors = false;  // write two neighbouring tensors in the wrong order
};

// Expert axis by name, as the reference describes it (not through MoeLayout): stacked expert weights on
// ne[2], router rows on ne[1], exp_probs_b on ne[0].
int expert_axis(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    if (name.find("_exps.weight") != std::string::npos) return 2;
    if (name.find("ffn_gate_inp.weight") != std::string::npos) return 1;
    if (name.find("exp_probs_b.bias") != std::string::npos) return 0;
    return -1;
}

int block_of(const std::string& name) {
    return std::stoi(name.substr(4, name.find('.', 4) - 4));
}

std::vector<std::string> build_output(const BuildSpec& spec, const std::string& prefix) {
    const ShardSet src = ShardSet::open(fixture(spec.source));
    const std::vector<uint8_t> bytes = test::read_file(src.shards().front().path);
    const std::string arch = src.architecture();
    const uint64_t E = *src.arch_uint("expert_count");
    const uint64_t N = spec.keep.empty() ? E : spec.keep.begin()->second.size();

    struct Out {
        TensorInfo info;
        std::vector<std::pair<uint64_t, uint64_t>> ranges;  // source offset, length
    };
    std::vector<Out> tensors;
    for (const TensorRef& r : src.tensors()) {
        Out o{src.info(r), {}};
        const int axis = expert_axis(o.info.name);
        if (axis >= 0 && !spec.keep.empty()) {
            const uint64_t slab = o.info.nbytes / E;
            for (int64_t e : spec.keep.at(block_of(o.info.name)))
                o.ranges.emplace_back(r.abs_offset + static_cast<uint64_t>(e) * slab, slab);
            o.info.ne[static_cast<size_t>(axis)] = static_cast<int64_t>(N);
            o.info.nbytes = slab * N;
        } else {
            o.ranges.emplace_back(r.abs_offset, o.info.nbytes);
        }
        tensors.push_back(std::move(o));
    }
    if (spec.swap_tensors) std::swap(tensors[5], tensors[6]);

    std::vector<Kv> meta;
    for (const Kv& kv : src.metadata().kvs)
        meta.push_back(kv.key == arch + ".expert_count" ? *Kv::make_int_like(kv, N) : kv);
    if (spec.provenance) {
        meta.push_back(Kv::make_string("gguf_reap.version", "gguf-reap 0.1.0"));
        meta.push_back(Kv::make_u32("gguf_reap.source_expert_count", static_cast<uint32_t>(E)));
        meta.push_back(Kv::make_string("gguf_reap.keeplist_sha256", std::string(64, 'a')));
        for (const auto& [block, ids] : spec.keep)
            meta.push_back(Kv::make_u32_array(fmt::format("gguf_reap.kept.{}", block), ids));
    }

    std::vector<std::string> paths;
    const size_t n = static_cast<size_t>(spec.shards);
    for (size_t s = 0; s < n; ++s) {
        std::vector<Kv> kvs = s == 0 ? meta : std::vector<Kv>{};
        if (n > 1) {
            kvs.push_back(Kv::make_u16("split.no", static_cast<uint16_t>(s)));
            kvs.push_back(Kv::make_u16("split.count", static_cast<uint16_t>(n)));
            kvs.push_back(Kv::make_i32("split.tensors.count", static_cast<int32_t>(tensors.size())));
        }
        const size_t lo = s * tensors.size() / n, hi = (s + 1) * tensors.size() / n;
        std::vector<TensorInfo> infos;
        for (size_t i = lo; i < hi; ++i) infos.push_back(tensors[i].info);
        const uint32_t align = header_alignment(kvs);
        assign_offsets(infos, align);
        std::vector<uint8_t> file = serialize_header(3, kvs, infos, align);
        for (size_t i = lo; i < hi; ++i) {
            for (const auto& [off, len] : tensors[i].ranges)
                file.insert(file.end(), bytes.begin() + static_cast<ptrdiff_t>(off),
                            bytes.begin() + static_cast<ptrdiff_t>(off + len));
            file.resize(*pad_to(file.size(), align), 0);
        }
        paths.push_back(n > 1 ? split_path(prefix, static_cast<int>(s + 1), static_cast<int>(n))
                              : prefix + ".gguf");
        test::write_file(paths.back(), file);
    }
    return paths;
}

// ---- helpers --------------------------------------------------------------------------------------------

struct Where {
    std::string path;
    uint64_t abs = 0;  // first data byte
    uint64_t nbytes = 0;
    uint32_t alignment = 32;
};

Where locate(const std::vector<std::string>& shards, const std::string& tensor) {
    for (const auto& p : shards) {
        auto f = InputFile::open(p);
        const Header h = parse_gguf_header(*f);
        for (const auto& t : h.tensors)
            if (t.name == tensor) return {p, h.data_start + t.offset, t.nbytes, h.alignment};
    }
    ADD_FAILURE() << "no tensor " << tensor;
    return {};
}

uint64_t kv_value_at(const std::string& path, const std::string& key) {
    auto f = InputFile::open(path);
    const Header h = parse_gguf_header(*f);
    const Kv* kv = h.find(key);
    EXPECT_NE(kv, nullptr) << key;
    return kv ? kv->file_offset + 8 + kv->key.size() + 4 : 0;
}

void flip(const std::string& path, uint64_t offset, uint8_t mask = 0x5a) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ mask);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
}

void write_at(const std::string& path, uint64_t offset, const void* data, size_t n) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

AuditReport audit(const std::string& output, const std::string& source = "", const std::string& keeplist = "",
                  int threads = 0) {
    AuditOptions o;
    o.output = output;
    if (!source.empty()) o.source = source;
    if (!keeplist.empty()) o.keeplist = keeplist;
    o.threads = threads;
    return run_audit(o);
}

std::string all_lines(const AuditReport& r) {
    std::string s;
    for (const auto& f : r.findings) s += fmt::format("[{}] {}\n", finding_kind_name(f.kind), f.line());
    return s;
}

class AuditTest : public ::testing::Test {
  protected:
    void SetUp() override { REQUIRE_FIXTURES(); }
    std::vector<std::string> pruned(const Keep& keep = drop_dead(), int shards = 3, bool provenance = true) {
        BuildSpec s;
        s.keep = keep;
        s.shards = shards;
        s.provenance = provenance;
        return build_output(s, dir.file("out"));
    }
    TempDir dir;
};

// ---- structure and identity against the fixtures ---------------------------------------------------------

TEST_F(AuditTest, FixtureShardSetPassesStructuralCheckFromAnyShard) {
    for (int i = 1; i <= 3; ++i) {
        const AuditReport r =
            audit(fixture(fmt::format("shards/tiny-deepseek2-IQ2_XXS-0000{}-of-00003.gguf", i)));
        EXPECT_TRUE(r.passed()) << all_lines(r);
        EXPECT_EQ(r.summary.shards, 3u);
        EXPECT_EQ(r.summary.tensors, 70u);
        EXPECT_EQ(r.summary.bytes_compared, 0u) << "structure only: no tensor data compared";
        EXPECT_GT(r.summary.padding_bytes, 0u);
    }
}

TEST_F(AuditTest, LlamaCppSplitOfTheSourceVerifiesAsAnUnprunedCopy) {
    // gguf-split's shards against the file they were split from: every expert kept, split.* appended.
    const AuditReport r = audit(fixture(kIq2Shard1), fixture(kIq2));
    EXPECT_TRUE(r.passed()) << all_lines(r);
    EXPECT_EQ(r.kept_from, "unchanged");
    EXPECT_EQ(r.summary.tensors_identical, 55u);
    EXPECT_EQ(r.summary.expert_tensors, 15u);
    EXPECT_EQ(r.summary.slabs, 15u * 16u);
    // And the other way round: a single file audited against a split source drops the split keys.
    const AuditReport back = audit(fixture(kIq2), fixture(kIq2Shard1));
    EXPECT_TRUE(back.passed()) << all_lines(back);
}

TEST_F(AuditTest, AnotherQuantisationOfTheSameModelIsNamedTensorByTensor) {
    const AuditReport r = audit(fixture(kIq2), fixture("models/tiny-deepseek2-Q4_K_M.gguf"));
    EXPECT_FALSE(r.passed());
    const std::string lines = all_lines(r);
    EXPECT_NE(lines.find("[tensor_info] " + fixture(kIq2) + ": tensor 'output.weight' at offset"),
              std::string::npos)
        << lines;
    EXPECT_NE(lines.find("has type Q5_K, the source has Q6_K (pruning never requantises)"), std::string::npos)
        << lines;
}

// ---- a pruned output, written independently of splice --------------------------------------------------

TEST_F(AuditTest, IndependentWriterReproducesThePruningOracle) {
    for (const auto& [spec, keep] :
         {std::pair{"drop-dead", drop_dead()}, std::pair{"drop-live", drop_live()}}) {
        SCOPED_TRACE(spec);
        const auto shards = pruned(keep);
        const auto& oracle = test::expected_json()["models"][kQ8]["pruning_oracle"][spec];
        size_t checked = 0;
        for (const auto& [name, sha] : oracle["pruned_tensor_data_sha256"].items()) {
            const Where w = locate(shards, name);
            EXPECT_EQ(test::sha256_file_range(w.path, w.abs, w.nbytes), sha.get<std::string>()) << name;
            ++checked;
        }
        EXPECT_EQ(checked, 15u);
        EXPECT_TRUE(audit(shards[0], fixture(kQ8)).passed());
    }
}

TEST_F(AuditTest, PrunedOutputPassesFromProvenanceAndFromKeeplist) {
    const auto shards = pruned();
    const AuditReport r = audit(shards[1], fixture(kQ8));
    EXPECT_TRUE(r.passed()) << all_lines(r);
    EXPECT_EQ(r.kept_from, "provenance");
    EXPECT_EQ(r.source_expert_count, 16u);
    EXPECT_EQ(r.output_expert_count, 13u);
    EXPECT_EQ(r.summary.tensors, 70u);
    EXPECT_EQ(r.summary.tensors_identical, 55u);
    EXPECT_EQ(r.summary.expert_tensors, 15u);
    EXPECT_EQ(r.summary.slabs, 15u * 13u);
    uint64_t data = 0;
    for (const auto& p : shards) {
        auto f = InputFile::open(p);
        for (const auto& t : parse_gguf_header(*f).tensors) data += t.nbytes;
    }
    EXPECT_EQ(r.summary.bytes_compared, data);

    const AuditReport k =
        audit(shards[0], fixture(kQ8), fixture("prune_specs/tiny-deepseek2.drop-dead.json"));
    EXPECT_TRUE(k.passed()) << all_lines(k);
    EXPECT_EQ(k.kept_from, "keeplist");
    EXPECT_EQ(k.summary.slabs, 15u * 13u);
}

TEST_F(AuditTest, OutputWithoutProvenanceNeedsTheKeeplist) {
    const auto shards = pruned(drop_dead(), 1, /*provenance=*/false);
    try {
        audit(shards[0], fixture(kQ8));
        FAIL() << "expected UsageError";
    } catch (const UsageError& e) {
        EXPECT_NE(
            std::string(e.what()).find("the output has 13 experts per block, the source 16, and the output "
                                       "carries no gguf_reap.kept.* keys"),
            std::string::npos)
            << e.what();
    }
    const AuditReport r =
        audit(shards[0], fixture(kQ8), fixture("prune_specs/tiny-deepseek2.drop-dead.json"));
    EXPECT_TRUE(r.passed()) << all_lines(r);
}

TEST_F(AuditTest, ResultDoesNotDependOnTheNumberOfThreads) {
    const auto shards = pruned();
    flip(locate(shards, "output.weight").path, locate(shards, "output.weight").abs + 7);
    flip(locate(shards, "blk.3.ffn_up_shexp.weight").path,
         locate(shards, "blk.3.ffn_up_shexp.weight").abs + 9);
    const std::string one = all_lines(audit(shards[0], fixture(kQ8), "", 1));
    const std::string four = all_lines(audit(shards[0], fixture(kQ8), "", 4));
    EXPECT_EQ(one, four);
    EXPECT_NE(one.find("output.weight"), std::string::npos);
    EXPECT_NE(one.find("blk.3.ffn_up_shexp.weight"), std::string::npos);
}

// ---- one flipped byte in every kind of region ----------------------------------------------------------

TEST_F(AuditTest, FlippedByteInAKeptSlabNamesTensorExpertAndOffset) {
    const auto shards = pruned();
    const Where w = locate(shards, "blk.2.ffn_down_exps.weight");
    const uint64_t slab = w.nbytes / 13;
    const uint64_t at = w.abs + 5 * slab + 1234;  // output expert 5 = source expert 6 in block 2
    flip(w.path, at);
    const AuditReport r = audit(shards[0], fixture(kQ8));
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    const Finding& f = r.findings[0];
    EXPECT_EQ(f.kind, FindingKind::kData);
    EXPECT_EQ(f.file, w.path);
    EXPECT_EQ(f.tensor, "blk.2.ffn_down_exps.weight");
    EXPECT_EQ(f.expert, 5);
    EXPECT_EQ(f.source_expert, 6);
    EXPECT_EQ(f.region, "kept slab");
    EXPECT_EQ(f.offset, at);
    EXPECT_EQ(f.line(),
              fmt::format("{}: tensor 'blk.2.ffn_down_exps.weight' expert 5 (source expert 6) kept slab "
                          "at offset {} (0x{:x}): differs from source expert 6: 1 of {} bytes differ, the "
                          "first at byte 1234 of the kept slab (source tiny-deepseek2-Q8_0.gguf offset {})",
                          w.path, at, at, slab,
                          locate({fixture(kQ8)}, "blk.2.ffn_down_exps.weight").abs + 6 * slab + 1234));
    EXPECT_EQ(r.summary.slabs, 15u * 13u - 1);
    EXPECT_EQ(r.summary.expert_tensors, 14u);
}

TEST_F(AuditTest, FlippedByteInARouterRowIsNamedAsSuch) {
    const auto shards = pruned();
    const Where w = locate(shards, "blk.1.ffn_gate_inp.weight");
    const uint64_t row = w.nbytes / 13;  // 256 f32 per expert
    flip(w.path, w.abs + 3 * row + 8);   // output expert 3 = source expert 4 in block 1 (3 is dropped)
    const AuditReport r = audit(shards[2], fixture(kQ8));
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    EXPECT_EQ(r.findings[0].region, "router row");
    EXPECT_EQ(r.findings[0].expert, 3);
    EXPECT_EQ(r.findings[0].source_expert, 4);
    EXPECT_EQ(r.findings[0].offset, w.abs + 3 * row + 8);
    EXPECT_NE(
        r.findings[0].line().find("tensor 'blk.1.ffn_gate_inp.weight' expert 3 (source expert 4) router row"),
        std::string::npos);
}

TEST_F(AuditTest, FlippedByteInExpProbsBIsNamedAsSuch) {
    const auto shards = pruned();
    const Where w = locate(shards, "blk.3.exp_probs_b.bias");
    flip(w.path, w.abs + 12 * 4 + 3);  // the last kept expert: output 12 = source 14 in block 3
    const AuditReport r = audit(shards[0], fixture(kQ8));
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    EXPECT_EQ(r.findings[0].region, "exp_probs_b");
    EXPECT_EQ(r.findings[0].expert, 12);
    EXPECT_EQ(r.findings[0].source_expert, 14);
    EXPECT_EQ(r.findings[0].offset, w.abs + 51);
}

TEST_F(AuditTest, FlippedByteInAnUnchangedTensorIsNamed) {
    const auto shards = pruned();
    const Where w = locate(shards, "token_embd.weight");
    flip(w.path, w.abs + w.nbytes - 1);
    const AuditReport r = audit(shards[0], fixture(kQ8));
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    EXPECT_EQ(r.findings[0].kind, FindingKind::kData);
    EXPECT_EQ(r.findings[0].region, "tensor data");
    EXPECT_FALSE(r.findings[0].expert.has_value());
    EXPECT_EQ(r.findings[0].offset, w.abs + w.nbytes - 1);
    EXPECT_NE(r.findings[0].line().find(
                  fmt::format("tensor 'token_embd.weight' data at offset {}", w.abs + w.nbytes - 1)),
              std::string::npos)
        << r.findings[0].line();
    EXPECT_EQ(r.summary.tensors_identical, 54u);
}

TEST_F(AuditTest, NonZeroPaddingIsNamedWithAndWithoutTheSource) {
    const auto shards = pruned();
    const Where w = locate(shards, "blk.1.exp_probs_b.bias");  // 13 × 4 = 52 bytes, then 12 of padding
    ASSERT_EQ(w.nbytes, 52u);
    flip(w.path, w.abs + 60);
    for (const std::string& source : {std::string(), fixture(kQ8)}) {
        const AuditReport r = audit(shards[0], source);
        ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
        EXPECT_EQ(r.findings[0].kind, FindingKind::kPadding);
        EXPECT_EQ(r.findings[0].offset, w.abs + 60);
        EXPECT_EQ(
            r.findings[0].line(),
            fmt::format("{}: padding after tensor 'blk.1.exp_probs_b.bias' at offset {} (0x{:x}): 1 of 12 "
                        "padding bytes are not zero (ggml pads with zeros)",
                        w.path, w.abs + 60, w.abs + 60));
    }
}

TEST_F(AuditTest, FlippedByteInAHeaderValueNamesTheKeyAndTheByte) {
    const auto shards = pruned();
    const uint64_t at = kv_value_at(shards[0], "general.name") + 8 + 4;  // past the length: the 5th character
    flip(shards[0], at, 0x01);
    const AuditReport r = audit(shards[0], fixture(kQ8));
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    EXPECT_EQ(r.findings[0].kind, FindingKind::kMetadata);
    EXPECT_EQ(r.findings[0].subject, "kv 'general.name'");
    EXPECT_EQ(r.findings[0].offset, at);
    EXPECT_NE(r.findings[0].message.find(
                  "copied unchanged from the source; first difference at byte 12 of the value"),
              std::string::npos)
        << r.findings[0].message;
}

TEST_F(AuditTest, WrongExpertCountAndMissingProvenanceKeyAreNamed) {
    auto shards = pruned();
    const uint64_t at = kv_value_at(shards[0], "deepseek2.expert_count");
    const uint32_t sixteen = 16;
    write_at(shards[0], at, &sixteen, 4);
    const AuditReport r = audit(shards[0], fixture(kQ8));
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    EXPECT_EQ(r.findings[0].offset, at);
    EXPECT_NE(
        r.findings[0].message.find("value 16 differs from the expected 13 (expert_count of the source, 16, "
                                   "becomes the 13 experts kept"),
        std::string::npos)
        << r.findings[0].message;
}

TEST_F(AuditTest, TensorsOutOfSourceOrderAreNamed) {
    BuildSpec s;
    s.keep = drop_dead();
    s.swap_tensors = true;
    const auto shards = build_output(s, dir.file("out"));
    const AuditReport r = audit(shards[0], fixture(kQ8));
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    EXPECT_EQ(r.findings[0].kind, FindingKind::kTensorInfo);
    EXPECT_NE(r.findings[0].message.find("tensor order differs from the source"), std::string::npos);
    EXPECT_EQ(r.summary.tensors_identical + r.summary.expert_tensors, 70u)
        << "the bytes themselves are right";
}

TEST_F(AuditTest, EveryFindingIsReportedNotOnlyTheFirst) {
    const auto shards = pruned();
    const char* names[] = {"output.weight", "blk.1.ffn_up_exps.weight", "blk.2.ffn_gate_inp.weight",
                           "blk.3.attn_q_b.weight"};
    for (const char* n : names) {
        const Where w = locate(shards, n);
        flip(w.path, w.abs + w.nbytes / 2);
    }
    flip(shards[0], kv_value_at(shards[0], "general.name") + 9, 0x02);
    const AuditReport r = audit(shards[1], fixture(kQ8));
    EXPECT_EQ(r.findings.size(), 5u) << all_lines(r);
    for (const char* n : names) EXPECT_NE(all_lines(r).find(n), std::string::npos) << n;
}

// ---- the shard set --------------------------------------------------------------------------------------

TEST_F(AuditTest, TruncatedShardNamesTheFileAndEveryTensorCut) {
    const auto shards = pruned();
    const uint64_t size = fs::file_size(shards[2]);
    fs::resize_file(shards[2], size - 40000);
    for (const std::string& source : {std::string(), fixture(kQ8)}) {
        const AuditReport r = audit(shards[0], source);
        ASSERT_FALSE(r.passed());
        const std::string lines = all_lines(r);
        EXPECT_NE(lines.find(fmt::format(
                      "[bounds] {}: file size at offset {} (0x{:x}): the file ends after {} bytes "
                      "but its header describes {}",
                      shards[2], size - 40000, size - 40000, size - 40000, size)),
                  std::string::npos)
            << lines;
        EXPECT_NE(lines.find("data at offset"), std::string::npos) << lines;
        EXPECT_NE(lines.find("bytes past the end of the file"), std::string::npos) << lines;
        for (const auto& f : r.findings) EXPECT_EQ(f.file, shards[2]) << f.line();
    }
}

TEST_F(AuditTest, MissingShardIsNamed) {
    const auto shards = pruned();
    fs::remove(shards[1]);
    for (const std::string& source : {std::string(), fixture(kQ8)}) {
        const AuditReport r = audit(shards[2], source);
        ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
        EXPECT_EQ(r.findings[0].line(), shards[1] + ": shard: missing: shard 2 of 3 does not exist");
        EXPECT_EQ(r.summary.shards, 3u);
    }
}

TEST_F(AuditTest, ExtraShardIsNamed) {
    const auto shards = pruned();
    const std::string extra = split_path(dir.file("out"), 4, 3);
    fs::copy_file(shards[2], extra);
    const std::string other = split_path(dir.file("out"), 1, 2);
    fs::copy_file(shards[0], other);
    const AuditReport r = audit(shards[0], fixture(kQ8));
    ASSERT_EQ(r.findings.size(), 2u) << all_lines(r);
    EXPECT_EQ(r.findings[0].file, other);
    EXPECT_EQ(r.findings[1].file, extra);
    EXPECT_NE(r.findings[1].message.find("extra file beside a set of 3"), std::string::npos);
}

TEST_F(AuditTest, SwappedShardsAreNamed) {
    const auto shards = pruned();
    const std::string tmp = dir.file("tmp");
    fs::rename(shards[0], tmp);
    fs::rename(shards[1], shards[0]);
    fs::rename(tmp, shards[1]);
    for (const std::string& source : {std::string(), fixture(kQ8)}) {
        const AuditReport r = audit(shards[0], source);
        const std::string lines = all_lines(r);
        EXPECT_NE(lines.find(shards[0] + ": kv 'split.no' at offset"), std::string::npos) << lines;
        EXPECT_NE(lines.find("is 1 but the file is shard 1 of 3 (expected 0): shards 1 and 2 look swapped"),
                  std::string::npos)
            << lines;
        EXPECT_NE(lines.find("is 0 but the file is shard 2 of 3 (expected 1): shards 2 and 1 look swapped"),
                  std::string::npos)
            << lines;
    }
}

TEST_F(AuditTest, WrongSplitTensorsCountIsNamed) {
    const auto shards = pruned();
    const uint64_t at = kv_value_at(shards[1], "split.tensors.count");
    const int32_t wrong = 71;
    write_at(shards[1], at, &wrong, 4);
    const AuditReport r = audit(shards[0]);
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    EXPECT_EQ(
        r.findings[0].line(),
        fmt::format("{}: kv 'split.tensors.count' at offset {} (0x{:x}): is 71 but the 3 shards hold 70 "
                    "tensors (llama.cpp: \"corrupted model\")",
                    shards[1], at, at));
}

TEST_F(AuditTest, UnreadableSiblingHeaderIsAFindingButANonGgufOutputIsBadInput) {
    const auto shards = pruned();
    fs::resize_file(shards[1], 700);  // inside the tensor infos
    const std::string lines = all_lines(audit(shards[0], fixture(kQ8)));
    EXPECT_NE(lines.find(fmt::format("[header] {}: tensor #", shards[1])), std::string::npos) << lines;
    EXPECT_NE(
        lines.find("tensor #9 name at offset 690 (0x2b2): string of 24 bytes runs past the end of the file"),
        std::string::npos)
        << lines;
    fs::resize_file(shards[1], 100);  // the counts promise more tensor infos than 100 bytes can hold
    const AuditReport r = audit(shards[0], fixture(kQ8));
    EXPECT_NE(all_lines(r).find(
                  fmt::format("[header] {}: n_tensors at offset 8 (0x8): 23 tensor infos cannot fit in "
                              "the 76 bytes left",
                              shards[1])),
              std::string::npos)
        << all_lines(r);

    test::write_file(shards[0], {'n', 'o', 't', ' ', 'g', 'g', 'u', 'f'});
    try {
        audit(shards[0]);
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_EQ(e.field(), "magic");
        EXPECT_EQ(e.file(), shards[0]);
    }
    // The same broken file found as a sibling is a finding.
    const AuditReport s = audit(shards[2]);
    EXPECT_NE(all_lines(s).find(fmt::format("[header] {}: magic at offset 0", shards[0])), std::string::npos)
        << all_lines(s);
}

// ---- keeplists --------------------------------------------------------------------------------------------

TEST_F(AuditTest, KeeplistThatDoesNotMatchTheOutputIsNamedPerBlock) {
    const auto shards = pruned(drop_dead());
    const AuditReport r =
        audit(shards[0], fixture(kQ8), fixture("prune_specs/tiny-deepseek2.drop-live.json"));
    EXPECT_FALSE(r.passed());
    std::vector<const Finding*> keeplist;
    for (const auto& f : r.findings)
        if (f.kind == FindingKind::kKeeplist) keeplist.push_back(&f);
    ASSERT_EQ(keeplist.size(), 3u) << all_lines(r);
    EXPECT_EQ(keeplist[0]->subject, "kv 'gguf_reap.kept.1'");
    EXPECT_NE(keeplist[0]->message.find(
                  "the output records block 1 as keeping [0, 1, 2, 4, 5, 6, 8, 9, 10, 11, 13, "
                  "14, 15] but the keeplist keeps [1, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]"),
              std::string::npos)
        << keeplist[0]->message;
    // The bytes were judged against the keeplist too: slabs that differ are named.
    bool slab = false;
    for (const auto& f : r.findings) slab |= f.kind == FindingKind::kData && f.region == "kept slab";
    EXPECT_TRUE(slab) << all_lines(r);
}

TEST_F(AuditTest, KeeplistForAnotherModelIsBadInput) {
    const auto shards = pruned();
    const std::string kl = dir.file("other.json");
    std::ofstream(kl) << R"({"format": "gguf-reap.keeplist", "version": 1,
        "source": {"architecture": "deepseek2", "expert_count": 8},
        "blocks": [{"block": 1, "keep": [0, 1]}, {"block": 2, "keep": [0, 1]},
                   {"block": 3, "keep": [0, 1]}]})";
    try {
        audit(shards[0], fixture(kQ8), kl);
        FAIL() << "expected UsageError";
    } catch (const UsageError& e) {
        EXPECT_NE(
            std::string(e.what()).find("made for a model with 8 experts per block, but this model has 16"),
            std::string::npos)
            << e.what();
    }
}

TEST_F(AuditTest, CorruptProvenanceIsAFinding) {
    const auto shards = pruned();
    // Expert id 13 → 99 in gguf_reap.kept.2: out of range for the source.
    const uint64_t at = kv_value_at(shards[0], "gguf_reap.kept.2") + 12 + 4 * 12;
    const uint32_t bad = 99;
    write_at(shards[0], at, &bad, 4);
    const AuditReport r = audit(shards[0], fixture(kQ8));
    const std::string lines = all_lines(r);
    EXPECT_EQ(r.findings.size(), 1u) << lines;
    EXPECT_EQ(r.summary.expert_tensors, 0u) << "expert tensors cannot be verified without kept ids";
    EXPECT_EQ(r.summary.tensors_identical, 55u);
    EXPECT_NE(lines.find("[keeplist] " + shards[0] +
                         ": kv 'gguf_reap.kept.*': the provenance keys do not describe a "
                         "pruning of this source (gguf_reap.kept.*: block 2: kept id 99 is out of range"),
              std::string::npos)
        << lines;
}

TEST_F(AuditTest, KeeplistWithoutSourceIsAUsageError) {
    AuditOptions o;
    o.output = fixture(kIq2Shard1);
    o.keeplist = fixture("prune_specs/tiny-deepseek2.drop-dead.json");
    EXPECT_THROW(run_audit(o), UsageError);
}

// ---- manifests through the audit ------------------------------------------------------------------------

TEST_F(AuditTest, ManifestHashesEveryShardAndTensorAndVerifiesACopy) {
    const auto shards = pruned();
    AuditOptions o;
    o.output = shards[0];
    o.source = fixture(kQ8);
    o.compute_manifest = true;
    const AuditReport r = run_audit(o);
    ASSERT_TRUE(r.passed()) << all_lines(r);
    ASSERT_TRUE(r.manifest.has_value());
    ASSERT_EQ(r.manifest->shards.size(), 3u);
    size_t tensors = 0;
    for (size_t i = 0; i < 3; ++i) {
        const ManifestShard& ms = r.manifest->shards[i];
        EXPECT_EQ(ms.name, fs::path(shards[i]).filename().string());
        EXPECT_EQ(ms.size, fs::file_size(shards[i]));
        EXPECT_EQ(ms.sha256, test::sha256_file_range(shards[i], 0, ms.size));
        for (const auto& t : ms.tensors)
            EXPECT_EQ(t.sha256, test::sha256_file_range(shards[i], t.offset, t.nbytes)) << t.name;
        tensors += ms.tensors.size();
    }
    EXPECT_EQ(tensors, 70u);
    EXPECT_EQ(r.summary.tensors_hashed, 70u);

    // A downloaded copy elsewhere, verified without the source.
    const std::string mpath = dir.file("m.json");
    save_manifest(*r.manifest, mpath);
    fs::create_directory(dir.file("copy"));
    std::vector<std::string> copy;
    for (const auto& p : shards) {
        copy.push_back(dir.file("copy/" + fs::path(p).filename().string()));
        fs::copy_file(p, copy.back());
    }
    AuditOptions v;
    v.output = copy[2];
    v.manifest = mpath;
    EXPECT_TRUE(run_audit(v).passed());

    const Where w = locate(copy, "blk.2.ffn_up_exps.weight");
    flip(w.path, w.abs + 100);
    const AuditReport bad = run_audit(v);
    const std::string lines = all_lines(bad);
    ASSERT_EQ(bad.findings.size(), 2u) << lines;
    EXPECT_EQ(bad.findings[0].subject, "sha256");
    EXPECT_EQ(bad.findings[0].file, w.path);
    EXPECT_EQ(bad.findings[1].tensor, "blk.2.ffn_up_exps.weight");
    EXPECT_EQ(bad.findings[1].offset, w.abs);
    EXPECT_NE(bad.findings[1].message.find("differs from the manifest's"), std::string::npos);

    fs::remove(copy[1]);
    const AuditReport gone = run_audit(v);
    EXPECT_NE(all_lines(gone).find(copy[1] + ": shard: missing: shard 2 of 3"), std::string::npos)
        << all_lines(gone);
}

TEST_F(AuditTest, ManifestOfAnotherModelNamesEveryShard) {
    AuditOptions o;
    o.output = fixture(kIq2Shard1);
    o.compute_manifest = true;
    const AuditReport r = run_audit(o);
    ASSERT_TRUE(r.passed());
    const std::string mpath = dir.file("m.json");
    save_manifest(*r.manifest, mpath);
    const auto shards = pruned();
    AuditOptions v;
    v.output = shards[0];
    v.manifest = mpath;
    const AuditReport bad = run_audit(v);
    size_t not_listed = 0, foreign = 0;
    for (const auto& f : bad.findings) {
        not_listed += f.message.find("not in the manifest") != std::string::npos;
        foreign += f.message.find("not part of this set") != std::string::npos;
    }
    EXPECT_EQ(not_listed, 3u) << all_lines(bad);
    EXPECT_EQ(foreign, 3u) << all_lines(bad);
}

}  // namespace
}  // namespace gguf_reap
