// The `audit --json` document: what ops::audit_report_json writes, read_audit_document reads back (the
// one owner of its key names, src/services/audit_report.h).
#include <fstream>

#include <gtest/gtest.h>

#include "gguf_reap/audit.h"
#include "gguf_reap/version.h"
#include "services/audit_report.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

ops::AuditResult passing_result() {
    ops::AuditResult o;
    AuditReport& r = o.report;
    r.shards.push_back({"/m/out-00001-of-00002.gguf", true, true, 1000, 7, std::string(64, 'a')});
    r.shards.push_back({"/m/out-00002-of-00002.gguf", true, true, 2000, 5, std::string(64, 'b')});
    r.kept_from = "provenance";
    r.source_expert_count = 8;
    r.output_expert_count = 6;
    r.summary = {2, 12, 9, 3, 54, 0, 12, 4096, 60, 3100, 5000, 3000, 31};
    return o;
}

std::string write_doc(const test::TempDir& dir, const nlohmann::ordered_json& j) {
    const std::string p = dir.file("audit.json");
    std::ofstream(p) << j.dump(2);
    return p;
}

TEST(AuditReport, WhatTheCliWritesCardReadsBack) {
    ops::AuditRequest q;
    q.options.output = "/m/out-00001-of-00002.gguf";
    q.options.source = "/m/src.gguf";
    q.options.neuron_plan = "/m/plan.npz";
    const ops::AuditResult o = passing_result();
    const nlohmann::ordered_json j = ops::audit_report_json(q, o);
    EXPECT_EQ(j["result"], "pass");
    EXPECT_EQ(j["source_manifest"], nullptr);
    EXPECT_EQ(j["expert_count"]["output"], 6);
    EXPECT_FALSE(j["summary"].contains("hash_tables"));  // written only for deepseek4's tables
    EXPECT_EQ(j["manifest_out"], nullptr);

    test::TempDir dir;
    const AuditDocument d = read_audit_document(write_doc(dir, j), "out");
    EXPECT_EQ(d.tool, std::string(GGUF_REAP_TOOL));
    EXPECT_EQ(d.date, j["date"]);
    EXPECT_EQ(d.shards, 2u);
    EXPECT_EQ(d.tensors, 12u);
    EXPECT_EQ(d.tensors_identical, 9u);
    EXPECT_EQ(d.expert_tensors, 3u);
    EXPECT_EQ(d.slabs, 54u);
    EXPECT_EQ(d.kvs_checked, 31u);
    EXPECT_EQ(d.bytes_compared, 4096u);
    ASSERT_EQ(d.shard_list.size(), 2u);
    EXPECT_EQ(d.shard_list[1].path, "/m/out-00002-of-00002.gguf");
    EXPECT_EQ(d.shard_list[1].size, 2000u);
    EXPECT_EQ(d.shard_list[1].sha256, std::string(64, 'b'));
    EXPECT_EQ(d.source, std::optional<std::string>("/m/src.gguf"));
    EXPECT_FALSE(d.source_manifest.has_value());
    EXPECT_EQ(d.neuron_plan, std::optional<std::string>("/m/plan.npz"));
}

TEST(AuditReport, AFailedAuditIsNotReadAsAPass) {
    ops::AuditRequest q;
    q.options.output = "out.gguf";
    ops::AuditResult o = passing_result();
    o.report.findings.push_back({});
    test::TempDir dir;
    const std::string p = write_doc(dir, ops::audit_report_json(q, o));
    EXPECT_EQ(
        test::error_of([&] { read_audit_document(p, "out.gguf"); }),
        p + ": result: 'fail' (1 finding(s)): the audit of out.gguf did not pass, and a card states only "
            "what a passing audit verified");
    // Unhashed shards read back as "", and a summary without a key is refused by its name.
    nlohmann::ordered_json j = ops::audit_report_json(q, passing_result());
    j["shards"][0]["sha256"] = nullptr;
    EXPECT_EQ(read_audit_document(write_doc(dir, j), "x").shard_list[0].sha256, "");
    j["summary"].erase("slabs");
    EXPECT_EQ(test::error_of([&] { read_audit_document(write_doc(dir, j), "x"); }),
              p + ": summary.slabs: missing or not a non-negative integer");
}

}  // namespace
}  // namespace gguf_reap
