// audit --source-manifest: a manifest of the source (headers, tensor and slab hashes) stands for the
// source; every check of --source runs, tensor bytes are proved by sha256, and the source is not read.
#include <nlohmann/json.hpp>

#include "audit_test_support.h"
#include "gguf_builder.h"
#include "gguf_reap/manifest.h"
#include "io/sha256.h"
#include "ops/audit/audit_steps.h"

namespace gguf_reap {
namespace {

using namespace audit_test;
using test::error_of;

class SourceManifestTest : public AuditTest {
  protected:
    // `audit SOURCE --manifest-out`, saved.
    std::string source_manifest(const std::string& source, const std::string& name = "src.json") {
        AuditOptions o;
        o.output = source;
        o.compute_manifest = true;
        const AuditReport r = run_audit(o);
        EXPECT_TRUE(r.passed()) << all_lines(r);
        const std::string path = dir.file(name);
        save_manifest(*r.manifest, path);
        return path;
    }
    AuditReport against(const std::string& output, const std::string& manifest,
                        const std::string& keeplist = "") {
        AuditOptions o;
        o.output = output;
        o.source_manifest = manifest;
        if (!keeplist.empty()) o.keeplist = keeplist;
        return run_audit(o);
    }
    // Rewrites the saved manifest's JSON.
    template <typename Edit>
    std::string edited(const std::string& path, Edit edit, const std::string& name) {
        std::ifstream in(path);
        nlohmann::ordered_json j = nlohmann::ordered_json::parse(in);
        edit(j);
        const std::string out = dir.file(name);
        std::ofstream(out) << j.dump();
        return out;
    }
};

TEST_F(SourceManifestTest, RecordsEveryExpertSlabAndTheHeaders) {
    const std::string src = fixture(kQ8);
    const Manifest m = Manifest::load(source_manifest(src));
    ASSERT_EQ(m.shards.size(), 1u);
    const ManifestShard& s = m.shards[0];
    const Header h = parse_gguf_header(*InputFile::open(src));
    EXPECT_EQ(s.header.size(), h.infos_end);
    const std::vector<uint8_t> bytes = test::read_file(src);
    EXPECT_TRUE(std::equal(s.header.begin(), s.header.end(), bytes.begin()));
    size_t with_slabs = 0;
    for (const ManifestTensor& t : s.tensors) {
        if (expert_axis(t.name) < 0) {
            EXPECT_TRUE(t.slabs.empty()) << t.name;
            continue;
        }
        ++with_slabs;
        ASSERT_EQ(t.slabs.size(), 16u) << t.name;  // the fixture's 16 experts
        EXPECT_EQ(t.slab_bytes * 16, t.nbytes) << t.name;
        for (size_t e : {size_t{0}, size_t{7}, size_t{15}})
            EXPECT_EQ(to_hex(t.slabs[e]),
                      test::sha256_file_range(src, t.offset + e * t.slab_bytes, t.slab_bytes))
                << t.name << " expert " << e;
    }
    // Three MoE blocks, each with a router, exp_probs_b and the three expert weights.
    EXPECT_EQ(with_slabs, 15u);
}

TEST_F(SourceManifestTest, PassesAnHonestPruningWithTheSameCountsAsTheSourceWithoutReadingIt) {
    const auto shards = pruned();
    const AuditReport want = audit(shards[0], fixture(kQ8));
    ASSERT_TRUE(want.passed()) << all_lines(want);
    const AuditReport r = against(shards[1], source_manifest(fixture(kQ8)));
    ASSERT_TRUE(r.passed()) << all_lines(r);
    EXPECT_EQ(r.kept_from, "provenance");
    EXPECT_EQ(r.output_expert_count, 13u);
    EXPECT_EQ(r.source_expert_count, 16u);
    EXPECT_EQ(r.summary.tensors_identical, want.summary.tensors_identical);
    EXPECT_EQ(r.summary.expert_tensors, want.summary.expert_tensors);
    EXPECT_EQ(r.summary.slabs, want.summary.slabs);
    EXPECT_EQ(r.summary.kvs_checked, want.summary.kvs_checked);
    EXPECT_EQ(r.summary.bytes_compared, want.summary.bytes_compared);
    EXPECT_EQ(r.summary.source_bytes_read, 0u);
    // The keeplist, given instead of the provenance keys.
    const AuditReport k =
        against(shards[0], dir.file("src.json"), fixture("prune_specs/tiny-deepseek2.drop-dead.json"));
    EXPECT_TRUE(k.passed()) << all_lines(k);
    EXPECT_EQ(k.kept_from, "keeplist");
}

TEST_F(SourceManifestTest, NamesTheTensorAndExpertOfAFlippedByte) {
    const auto shards = pruned();
    const std::string m = source_manifest(fixture(kQ8));
    // Output expert 5 of blk.2 is source expert 6 (drop-dead prunes 0, 9 and 14 there).
    const Where w = locate(shards, "blk.2.ffn_up_exps.weight");
    const uint64_t slab = w.nbytes / 13;
    flip(w.path, w.abs + 5 * slab + 100);
    const AuditReport r = against(shards[0], m);
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    const Finding& f = r.findings[0];
    EXPECT_EQ(f.kind, FindingKind::kData);
    EXPECT_EQ(f.tensor, "blk.2.ffn_up_exps.weight");
    EXPECT_EQ(f.expert, 5);
    EXPECT_EQ(f.source_expert, 6);
    EXPECT_EQ(f.offset, w.abs + 5 * slab);
    EXPECT_EQ(f.region, "kept slab");
    const Manifest man = Manifest::load(m);
    std::string want;
    for (const auto& t : man.shards[0].tensors)
        if (t.name == f.tensor) want = to_hex(t.slabs[6]);
    EXPECT_EQ(
        f.line(),
        fmt::format("{}: tensor 'blk.2.ffn_up_exps.weight' expert 5 (source expert 6) kept slab at offset "
                    "{} (0x{:x}): sha256 {} differs from the source manifest's {} for source expert 6 "
                    "(the bytes differ somewhere in [{}, +{}); an audit against the source names the "
                    "first one)",
                    w.path, w.abs + 5 * slab, w.abs + 5 * slab,
                    test::sha256_file_range(w.path, w.abs + 5 * slab, slab), want, w.abs + 5 * slab, slab));
    EXPECT_EQ(r.summary.expert_tensors, audit(shards[0], fixture(kQ8)).summary.expert_tensors);
}

TEST_F(SourceManifestTest, UntouchedTensorsRouterRowsAndMetadataAreCheckedToo) {
    const auto shards = pruned();
    const std::string m = source_manifest(fixture(kQ8));
    const Where embd = locate(shards, "token_embd.weight");
    flip(embd.path, embd.abs + embd.nbytes - 1);
    const Where router = locate(shards, "blk.3.ffn_gate_inp.weight");
    flip(router.path, router.abs + router.nbytes - 1);  // the last kept expert's row
    const uint64_t at = kv_value_at(shards[0], "deepseek2.expert_used_count");
    flip(shards[0], at);
    const AuditReport r = against(shards[0], m);
    const std::string lines = all_lines(r);
    ASSERT_EQ(r.findings.size(), 3u) << lines;
    EXPECT_NE(lines.find("[metadata] " + shards[0] + ": kv 'deepseek2.expert_used_count' at offset"),
              std::string::npos)
        << lines;
    EXPECT_NE(lines.find(": tensor 'token_embd.weight' data at offset " + std::to_string(embd.abs)),
              std::string::npos)
        << lines;
    EXPECT_NE(
        lines.find(": tensor 'blk.3.ffn_gate_inp.weight' expert 12 (source expert 14) router row at offset " +
                   std::to_string(router.abs + router.nbytes / 13 * 12)),
        std::string::npos)
        << lines;
}

TEST_F(SourceManifestTest, ASplitSourceStandsForItselfUnchanged) {
    const std::string src = fixture(kIq2Shard1);
    const AuditReport r = against(src, source_manifest(src));
    ASSERT_TRUE(r.passed()) << all_lines(r);
    EXPECT_EQ(r.kept_from, "unchanged");
    EXPECT_EQ(r.summary.shards, 3u);
    EXPECT_EQ(r.summary.source_bytes_read, 0u);
    EXPECT_GT(r.summary.slabs, 0u);
}

TEST_F(SourceManifestTest, AManifestOfAnotherModelIsFindingsNotAPass) {
    const auto shards = pruned();
    const AuditReport r = against(shards[0], source_manifest(fixture(kIq2Shard1)));
    EXPECT_FALSE(r.passed());
    size_t types = 0;
    for (const auto& f : r.findings) types += f.message.find("the source has IQ2_XXS") != std::string::npos;
    EXPECT_GT(types, 0u) << all_lines(r);
}

TEST_F(SourceManifestTest, WhatCannotStandForTheSourceIsRefused) {
    const auto shards = pruned();
    const std::string m = source_manifest(fixture(kQ8));
    auto err = [&](const std::string& manifest) { return error_of([&] { against(shards[0], manifest); }); };
    const std::string v1 = edited(
        m,
        [](auto& j) {
            j["version"] = 1;
            for (auto& s : j["shards"]) s.erase("header");
        },
        "v1.json");
    EXPECT_EQ(err(v1),
              v1 + ": version: a version 1 manifest records no headers and no slab hashes, so it cannot "
                   "stand for the source: make one with `gguf-reap audit SOURCE --manifest-out FILE`");
    const std::string no_header = edited(
        m, [](auto& j) { j["shards"][0].erase("header"); }, "nh.json");
    EXPECT_EQ(err(no_header),
              no_header +
                  ": shards[0].header: missing: shard \"tiny-deepseek2-Q8_0.gguf\" has no header "
                  "recorded (a manifest written with --manifest-out records one for every shard)");
    size_t up = 0;
    const std::string no_slabs = edited(
        m,
        [&](auto& j) {
            auto& ts = j["shards"][0]["tensors"];
            for (size_t i = 0; i < ts.size(); ++i)
                if (ts[i]["name"] == "blk.1.ffn_gate_exps.weight") {
                    ts[i].erase("slabs");
                    ts[i].erase("slab_bytes");
                    up = i;
                }
        },
        "ns.json");
    EXPECT_EQ(err(no_slabs), fmt::format("{}: shards[0].tensors[{}]: 'blk.1.ffn_gate_exps.weight' is "
                                         "expert-indexed but its entry has no \"slabs\": the manifest cannot "
                                         "vouch for expert 0 alone",
                                         no_slabs, up));
    const std::string moved = edited(
        m,
        [](auto& j) {
            j["shards"][0]["tensors"][1]["offset"] =
                j["shards"][0]["tensors"][1]["offset"].template get<uint64_t>() + 32;
        },
        "mv.json");
    EXPECT_NE(err(moved).find(moved + ": shards[0].tensors[1]: "), std::string::npos) << err(moved);
    EXPECT_NE(err(moved).find("disagrees with the shard's header"), std::string::npos) << err(moved);
    // A header whose bytes are not GGUF: the parser's message, named after the manifest and the shard.
    const std::string garbage = edited(
        m, [](auto& j) { j["shards"][0]["header"] = "AAAAAAAA"; }, "g.json");
    EXPECT_NE(err(garbage).find(garbage + ":tiny-deepseek2-Q8_0.gguf: "), std::string::npos) << err(garbage);

    AuditOptions both;
    both.output = shards[0];
    both.source = fixture(kQ8);
    both.source_manifest = m;
    EXPECT_EQ(error_of([&] { run_audit(both); }),
              "--source and --source-manifest: give one (the manifest stands for the source)");
    AuditOptions width;
    width.output = shards[0];
    width.source_manifest = m;
    width.neuron_plan = dir.file("plan.npz");
    EXPECT_EQ(error_of([&] { run_audit(width); }),
              "--neuron-plan needs --source, not --source-manifest: a width cut keeps rows and columns of "
              "each slab, which the manifest's whole-slab hashes cannot vouch for");
}

// An empty tensor lies at the same offset as the one after it; the hash of that one must still be found.
TEST(SourceManifest, AnEmptyTensorBeforeAnotherAtTheSameOffset) {
    test::TempDir d;
    const std::string model = d.file("m.gguf");
    std::vector<test::TensorSpec> specs{{"token_embd.weight", {32, 4}, test::kF32},
                                        {"blk.0.empty.weight", {0}, test::kF32},
                                        {"blk.0.attn_norm.weight", {32}, test::kF32}};
    for (const auto& t : test::moe_block(1, 4)) specs.push_back(t);
    const test::BuiltGguf g = test::write_gguf(
        model,
        {Kv::make_string("general.architecture", "deepseek2"), Kv::make_u32("deepseek2.block_count", 2),
         Kv::make_u32("deepseek2.expert_count", 4), Kv::make_u32("deepseek2.expert_used_count", 2),
         Kv::make_u32("deepseek2.leading_dense_block_count", 1),
         Kv::make_u32("deepseek2.expert_feed_forward_length", 32)},
        specs);
    ASSERT_EQ(g.tensors[1].offset, g.tensors[2].offset);
    AuditOptions o;
    o.output = model;
    o.compute_manifest = true;
    const AuditReport r = run_audit(o);
    ASSERT_TRUE(r.passed()) << audit_test::all_lines(r);
    save_manifest(*r.manifest, d.file("m.json"));
    AuditOptions v;
    v.output = model;
    v.source_manifest = d.file("m.json");
    const AuditReport back = run_audit(v);
    EXPECT_TRUE(back.passed()) << audit_test::all_lines(back);
    EXPECT_EQ(back.summary.slabs, 5u * 4u);
    EXPECT_EQ(back.summary.tensors_identical, 2u);  // the empty tensor has no bytes to compare
}

}  // namespace
}  // namespace gguf_reap
