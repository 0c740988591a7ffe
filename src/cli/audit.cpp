// gguf-reap audit OUTPUT [--source MODEL | --source-manifest FILE] [--keeplist K] [--manifest FILE]
//                       [--manifest-out FILE] [--json]:
// prove a pruned model from the disk. Exit 0 pass, 1 findings, 2 bad input.
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "gguf_reap/audit.h"
#include "gguf_reap/error.h"
#include "gguf_reap/manifest.h"
#include "io/units.h"

namespace gguf_reap::cli {

namespace {

struct AuditCli {
    std::string output;
    std::string source;
    std::string source_manifest;
    std::string keeplist;
    std::string neuron_plan;
    std::string manifest;
    std::string manifest_out;
    int threads = 0;
    bool force = false;
    bool json = false;
};

void report_text(const AuditCli& c, const AuditReport& r, bool manifest_written) {
    const AuditSummary& m = r.summary;
    uint64_t total = 0;
    for (const auto& s : r.shards) total += s.size;
    std::cout << fmt::format("output    {} ({} shard(s), {})\n", c.output, m.shards, human_bytes(total));
    const bool against_source = !c.source.empty() || !c.source_manifest.empty();
    if (against_source) {
        if (!c.source.empty())
            std::cout << fmt::format("source    {}\n", c.source);
        else
            std::cout << fmt::format("source    as its manifest {} records it (the source is not read)\n",
                                     c.source_manifest);
        std::string from = r.kept_from == "keeplist"     ? "the keeplist " + c.keeplist
                           : r.kept_from == "provenance" ? "the output's gguf_reap.kept.* keys"
                           : r.kept_from == "unchanged"  ? "no pruning recorded: every expert kept"
                                                         : "unknown";
        if (r.output_expert_count > 0)
            std::cout << fmt::format("experts   {} of {} per block kept (from {})\n", r.output_expert_count,
                                     r.source_expert_count, from);
        else
            std::cout << fmt::format("experts   kept experts unknown ({}): expert tensors not verified\n",
                                     from);
    }
    if (!c.neuron_plan.empty())
        std::cout << fmt::format(
            "width     {} of {} FFN channels per expert kept (from the neuron plan {})\n", r.output_width,
            r.source_width, c.neuron_plan);
    if (!c.manifest.empty()) std::cout << fmt::format("manifest  {}\n", c.manifest);
    if (!r.findings.empty()) {
        std::cout << fmt::format("\nfindings ({})\n", r.findings.size());
        for (const auto& f : r.findings)
            std::cout << fmt::format("  [{}] {}\n", finding_kind_name(f.kind), f.line());
    }
    for (const auto& n : r.notes) std::cout << fmt::format("note: {}\n", n);
    std::cout << "\n";
    if (against_source) {
        std::cout << fmt::format(
            "verified  {} tensors byte-identical to the source, {} expert tensors with {} kept "
            "slabs/rows equal to their source experts{}\n",
            m.tensors_identical, m.expert_tensors, m.slabs,
            c.source.empty() ? " (by sha256 against the source manifest)" : "");
        if (m.hash_tables > 0)
            std::cout << fmt::format(
                "          {} token → expert tables rewritten as the kept experts require (hash routing)\n",
                m.hash_tables);
        std::cout << fmt::format("          {} bytes {}, {} padding bytes zero, {} key/value pairs checked\n",
                                 with_commas(m.bytes_compared),
                                 c.source.empty() ? "checked by sha256" : "compared",
                                 with_commas(m.padding_bytes), m.kvs_checked);
        std::cout << fmt::format(
            "read      {} of output from disk (page cache dropped first), {} of source\n",
            human_bytes(m.bytes_read), human_bytes(m.source_bytes_read));
    } else {
        std::cout << fmt::format("verified  structure of every shard, {} padding bytes zero\n",
                                 with_commas(m.padding_bytes));
    }
    if (m.bytes_hashed)
        std::cout << fmt::format("hashed    {} in {} shard(s), {} tensor payloads (sha256)\n",
                                 human_bytes(m.bytes_hashed), m.shards, m.tensors_hashed);
    if (manifest_written)
        std::cout << fmt::format("manifest  written: {} and {}\n", c.manifest_out,
                                 manifest_sums_path(c.manifest_out));
    if (r.passed())
        std::cout << fmt::format("PASS: {} shard(s), {} tensors total\n", m.shards, m.tensors);
    else
        std::cout << fmt::format("FAIL: {} finding(s); {} shard(s), {} tensors total\n", r.findings.size(),
                                 m.shards, m.tensors);
}

int run_audit_cli(const AuditCli& c) {
    ops::AuditRequest q;
    q.options.output = c.output;
    if (!c.source.empty()) q.options.source = c.source;
    if (!c.source_manifest.empty()) q.options.source_manifest = c.source_manifest;
    if (!c.keeplist.empty()) q.options.keeplist = c.keeplist;
    if (!c.neuron_plan.empty()) q.options.neuron_plan = c.neuron_plan;
    if (!c.manifest.empty()) q.options.manifest = c.manifest;
    q.options.threads = c.threads;
    q.manifest_out = c.manifest_out;
    q.force = c.force;
    const ops::AuditResult o = ops::audit(q, cli_events(true));
    if (c.json)
        print_json(ops::audit_report_json(q, o));
    else
        report_text(c, o.report, o.manifest_written);
    if (o.write_error) std::rethrow_exception(o.write_error);  // the report first, then exit 3
    return o.report.passed() ? kExitOk : kExitFindings;
}

}  // namespace

Command add_audit(CLI::App& app, const GlobalOptions&) {
    auto c = std::make_shared<AuditCli>();
    CLI::App* sub = app.add_subcommand("audit",
                                       "Verify a pruned model from disk: structure, against its source byte "
                                       "for byte, or against a manifest");
    sub->add_option("OUTPUT", c->output, "Any shard of the output (or the single output file)")->required();
    sub->add_option("--source", c->source, "Any shard of the source model: verify every byte against it");
    sub->add_option("--source-manifest", c->source_manifest,
                    "A manifest of the source (audit SOURCE --manifest-out): verify every byte against its "
                    "headers and hashes without reading the source");
    sub->add_option("--keeplist", c->keeplist,
                    "The keeplist the output was made from (default: the output's gguf_reap.kept.* keys)");
    sub->add_option("--neuron-plan", c->neuron_plan,
                    "The width plan (.npz) a width-spliced output was cut with: verify every kept channel");
    sub->add_option("--manifest", c->manifest, "Verify every shard and tensor sha256 against this manifest");
    sub->add_option("--manifest-out", c->manifest_out,
                    "Write a manifest (JSON, plus a sha256sum -c file beside it) when the audit passes");
    sub->add_flag("--force", c->force, "Replace an existing --manifest-out file");
    sub->add_option("--threads", c->threads, "Shards verified in parallel (default: one per core)")
        ->check(CLI::Range(1, 1024));
    sub->add_flag("--json", c->json, "Print one JSON document on stdout");
    return {sub, [c] { return run_audit_cli(*c); }};
}

}  // namespace gguf_reap::cli
