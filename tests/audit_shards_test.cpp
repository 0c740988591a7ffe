// audit on outputs whose shard set, keeplist or manifest is wrong: cut, missing, extra and swapped
// shards, wrong split keys, unreadable siblings, keeplists that do not fit, corrupt provenance, and sha256
// manifests. The outputs come from audit_test_support.h's independent writer.
#include "audit_test_support.h"
#include "io/sha256.h"
#include "ops/audit/audit_steps.h"

#include <atomic>
#include <mutex>

namespace gguf_reap {
namespace {

using namespace audit_test;

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

TEST_F(AuditTest, WrongSplitCountIsNamed) {
    // Shard 2 of 3 says the set has 4: a loader would look for a fourth file.
    const auto shards = pruned();
    const uint64_t at = kv_value_at(shards[1], "split.count");
    const uint16_t wrong = 4;
    write_at(shards[1], at, &wrong, 2);
    const AuditReport r = audit(shards[0]);
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    EXPECT_EQ(
        r.findings[0].line(),
        fmt::format("{}: kv 'split.count' at offset {} (0x{:x}): is 4 but the set has 3 shards (the file "
                    "names say -of-00003)",
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
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()),
                  kl + ": source.expert_count: ranked on a model with 8 experts per block, but " +
                      fixture(kQ8) +
                      " has 16: a keeplist applies only to a model with the same architecture, expert layout "
                      "and tensor names (another model, or an already pruned one?)");
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
            EXPECT_EQ(to_hex(t.sha256), test::sha256_file_range(shards[i], t.offset, t.nbytes)) << t.name;
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

// audit reports its byte pass as progress (issue 33 item 9): one pass, labelled "audit", whose bytes add
// up to its total, which is every byte of the output read against the source.
TEST_F(AuditTest, ByteProgressAddsUpToItsTotal) {
    const auto shards = pruned();
    AuditOptions o;
    o.output = shards[0];
    o.source = fixture(kQ8);
    std::mutex m;
    std::vector<std::pair<std::string, uint64_t>> begun;
    std::atomic<uint64_t> done{0};
    int ended = 0;
    Events e;
    e.on_progress_begin = [&](std::string_view label, uint64_t total) {
        std::lock_guard<std::mutex> lock(m);
        begun.emplace_back(std::string(label), total);
    };
    e.on_progress = [&](uint64_t n) { done += n; };
    e.on_progress_end = [&] { ++ended; };
    const AuditReport r = run_audit(o, e);
    ASSERT_TRUE(r.passed()) << all_lines(r);
    ASSERT_EQ(begun.size(), 1u);
    EXPECT_EQ(begun[0].first, "audit");
    uint64_t size = 0;
    for (const auto& s : shards) size += fs::file_size(s);
    EXPECT_EQ(begun[0].second, size);
    EXPECT_EQ(done.load(), size);
    EXPECT_EQ(ended, 1);
}

}  // namespace
}  // namespace gguf_reap
