// audit against real llama.cpp-made fixtures. The pruned outputs audited here are built by this file's
// own small writer (serialize_header + byte copies), independent of splice, and checked against the
// fixture's pruning oracle (expected.json) before they are trusted. Then one byte at a time is broken in
// every kind of region, and shards are cut, removed, added and swapped: audit must name each one.
#include "audit_test_support.h"

namespace gguf_reap {
namespace {

using namespace audit_test;

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
                  "the source's name with the experts kept; first difference at byte 12 of the value"),
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

TEST_F(AuditTest, KeysOutOfSourceOrderAreNamed) {
    BuildSpec s;
    s.keep = drop_dead();
    s.swap_kvs = true;
    const auto shards = build_output(s, dir.file("out"));
    const ShardSet src = ShardSet::open(fixture(kQ8));
    const auto& kvs = src.metadata().kvs;
    const auto at =
        std::find_if(kvs.begin(), kvs.end(), [](const Kv& kv) { return kv.key == "deepseek2.block_count"; });
    ASSERT_TRUE(at != kvs.end() && at + 1 != kvs.end());
    const std::string next = (at + 1)->key;  // now written first
    const AuditReport r = audit(shards[0], fixture(kQ8));
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    EXPECT_EQ(r.findings[0].kind, FindingKind::kMetadata);
    EXPECT_EQ(r.findings[0].subject, "kv '" + next + "'");
    EXPECT_EQ(
        r.findings[0].message,
        "key order differs from the source: '" + next +
            "' stands where 'deepseek2.block_count' belongs (source KVs keep their order and provenance "
            "keys follow them)");
    EXPECT_EQ(r.summary.tensors_identical + r.summary.expert_tensors, 70u)
        << "the bytes themselves are right";
}

TEST_F(AuditTest, AKeyTheSourceLacksIsNamed) {
    // No pruning writes it, and it changes how llama.cpp runs the model.
    ASSERT_EQ(ShardSet::open(fixture(kQ8)).find_kv("deepseek2.attention.sliding_window"), nullptr);
    BuildSpec s;
    s.keep = drop_dead();
    s.extra_kvs = {Kv::make_u32("deepseek2.attention.sliding_window", 4096)};
    const auto shards = build_output(s, dir.file("out"));
    const AuditReport r = audit(shards[0], fixture(kQ8));
    ASSERT_EQ(r.findings.size(), 1u) << all_lines(r);
    EXPECT_EQ(r.findings[0].kind, FindingKind::kMetadata);
    EXPECT_EQ(r.findings[0].subject, "kv 'deepseek2.attention.sliding_window'");
    EXPECT_EQ(r.findings[0].message,
              "unexpected key u32 = 4096: not in the source and not one of the documented changes");
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

}  // namespace
}  // namespace gguf_reap
