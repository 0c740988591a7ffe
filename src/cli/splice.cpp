// gguf-reap splice MODEL [--keeplist K] [--neuron-plan P] -o OUT_PREFIX: write the pruned model as new
// shards, byte-exact.
#include <iostream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "gguf_reap/error.h"
#include "gguf_reap/splice.h"
#include "io/units.h"
#include "services/opened.h"
#include "services/splice_plan.h"

namespace gguf_reap::cli {

namespace {

// --copy-method's spellings.
constexpr std::pair<CopyMethod, const char*> kCopyMethods[] = {
    {CopyMethod::kAuto, "auto"}, {CopyMethod::kKernel, "copy_file_range"}, {CopyMethod::kReadWrite, "pread"}};
std::string copy_method_spelling(CopyMethod m) {
    for (const auto& [method, spelling] : kCopyMethods)
        if (m == method) return spelling;
    return "auto";
}

struct SpliceCli {
    std::string model;
    std::string keeplist;
    std::string neuron_plan;
    std::string out;
    std::string split_max_size;
    uint64_t split_count = 0;
    uint64_t split_max_tensors = 0;
    unsigned threads = 0;
    bool dry_run = false;
    bool force = false;
    bool quiet = false;
    bool json = false;
    bool no_provenance = false;
    bool drop_mtp = false;
    bool no_fsync = false;
    bool no_resume = false;
    std::string imatrix_in;
    std::string imatrix_out;
    std::string copy_method = copy_method_spelling(ops::SpliceRequest{}.method);
};

SpliceOptions splice_options(const SpliceCli& c) {
    SpliceOptions o;
    o.out_prefix = c.out;
    const int modes = !c.split_max_size.empty() + (c.split_count > 0) + (c.split_max_tensors > 0);
    if (modes > 1)
        throw UsageError(
            "--split-max-size, --split-count and --split-max-tensors exclude each other: give one");
    if (!c.split_max_size.empty()) {
        auto bytes = parse_size(c.split_max_size);
        if (!bytes)
            throw UsageError(
                fmt::format("--split-max-size '{}' {}", c.split_max_size, size_refusal(c.split_max_size)));
        if (*bytes == 0) throw UsageError("--split-max-size must be more than 0 bytes");
        o.split_mode = SplitMode::kMaxSize;
        o.split_value = *bytes;
    } else if (c.split_count > 0) {
        o.split_mode = SplitMode::kCount;
        o.split_value = c.split_count;
    } else if (c.split_max_tensors > 0) {
        o.split_mode = SplitMode::kMaxTensors;
        o.split_value = c.split_max_tensors;
    }
    o.provenance = !c.no_provenance;
    o.drop_mtp = c.drop_mtp;
    o.imatrix_out = c.imatrix_out;
    return o;
}

CopyMethod parse_method(const std::string& m) {
    for (const auto& [method, spelling] : kCopyMethods)
        if (m == spelling) return method;
    std::string names;  // "auto, copy_file_range or pread": the table's, in its order
    for (size_t i = 0; i < std::size(kCopyMethods); ++i) {
        if (i > 0) names += i + 1 < std::size(kCopyMethods) ? ", " : " or ";
        names += kCopyMethods[i].second;
    }
    throw UsageError(fmt::format("--copy-method '{}': expected {}", m, names));
}

nlohmann::ordered_json file_json(const PlannedFile& f) {
    return {{"path", f.job.path},     {"tensors", f.tensors.size()},    {"sliced_tensors", f.sliced_tensors},
            {"slabs", f.slabs},       {"header_bytes", f.header_bytes}, {"alignment", f.alignment},
            {"file_size", f.job.size}};
}

nlohmann::ordered_json report_json(const SplicePlan& plan, bool dry_run, const CopyReport* r,
                                   const std::optional<ops::SpliceResult::Fetched>& fetched, uint64_t resumed,
                                   const std::string& keeplist_note) {
    nlohmann::ordered_json j;
    j["command"] = "splice";
    j["dry_run"] = dry_run;
    j["source"] = {{"path", plan.source_path},
                   {"shards", plan.sources.size() - (plan.imatrix ? 1 : 0)},
                   {"expert_count", plan.source_expert_count}};
    j["keeplist_note"] =
        keeplist_note.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(keeplist_note);
    j["expert_count"] = plan.kept_expert_count;
    j["moe_blocks"] = plan.moe_blocks;
    j["expert_width"] = plan.width ? nlohmann::ordered_json{{"native", plan.native_width}, {"k", plan.width}}
                                   : nlohmann::ordered_json(nullptr);
    if (plan.dropped_blocks > 0) j["dropped_mtp_blocks"] = plan.dropped_blocks;  // only with --drop-mtp
    if (!plan.hash_rewrites.empty()) {  // deepseek4 (only then: other models' JSON is unchanged)
        auto h = nlohmann::ordered_json::array();
        for (const auto& w : plan.hash_rewrites)
            h.push_back({{"block", w.block}, {"entries", w.entries}, {"redirected", w.redirected}});
        j["hash_routing"] = h;
    }
    nlohmann::ordered_json outs = nlohmann::ordered_json::array();
    for (const PlannedFile& f : plan.shards) outs.push_back(file_json(f));
    j["outputs"] = outs;
    j["imatrix"] = plan.imatrix ? file_json(*plan.imatrix) : nlohmann::ordered_json(nullptr);
    j["shards"] = plan.shards.size();
    j["tensors"] = plan.tensor_count;
    j["sliced_tensors"] = plan.sliced_tensors();
    j["slabs"] = plan.slabs();
    j["extents"] = plan.extents();
    j["bytes_read"] = plan.bytes_read();
    j["bytes_written"] = plan.bytes_written();
    if (fetched) {
        j["bytes_fetched"] = fetched->bytes;
        j["http_requests"] = fetched->requests;
        j["http_retries"] = fetched->retries;
        if (!fetched->revision.empty()) j["source_revision"] = fetched->revision;  // hf:// only
        auto shards = nlohmann::ordered_json::array();
        for (const auto& s : fetched->shards) {
            nlohmann::ordered_json o;
            o["path"] = s.path;
            o["bytes"] = s.bytes;
            o["sha256"] =
                s.sha256.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.sha256);
            shards.push_back(std::move(o));
        }
        j["source_shards"] = shards;
        j["resumed_bytes"] = resumed;
    }
    if (r) {
        j["seconds"] = r->seconds;
        j["gb_per_s"] = r->seconds > 0 ? static_cast<double>(r->bytes_written()) / r->seconds / 1e9 : 0.0;
        j["copy"] = {{"copy_file_range_bytes", r->kernel_bytes}, {"pread_pwrite_bytes", r->buffered_bytes},
                     {"literal_bytes", r->literal_bytes},        {"padding_bytes", r->zero_bytes},
                     {"gathered_bytes", r->gathered_bytes},      {"calls", r->copy_calls}};
    }
    return j;
}

void print_text(const SplicePlan& plan, bool dry_run, const CopyReport* r,
                const std::optional<ops::SpliceResult::Fetched>& fetched, uint64_t resumed,
                const std::string& keeplist_note) {
    std::cout << fmt::format("{} {}: {} MoE blocks, {} → {} experts per block\n",
                             dry_run ? "plan (dry run, nothing written) for" : "spliced", plan.source_path,
                             plan.moe_blocks, plan.source_expert_count, plan.kept_expert_count);
    if (!keeplist_note.empty()) std::cout << fmt::format("keeplist {}\n", keeplist_note);
    if (plan.width)
        std::cout << fmt::format("expert FFN width {} → {} channels per expert (neuron plan)\n",
                                 plan.native_width, plan.width);
    if (plan.dropped_blocks > 0)
        std::cout << fmt::format("MTP blocks dropped: {} (--drop-mtp)\n", plan.dropped_blocks);
    for (const auto& w : plan.hash_rewrites)
        std::cout << fmt::format(
            "hash routing blk.{}: {} of {} (token, slot) entries redirected from pruned "
            "experts\n",
            w.block, with_commas(w.redirected), with_commas(w.entries));
    const auto row = [](const std::string& no, const PlannedFile& f) {
        std::cout << fmt::format("  {:<5} {:<44} {:>7} {:>6} {:>16}\n", no, f.job.path, f.tensors.size(),
                                 f.sliced_tensors, with_commas(f.job.size));
    };
    std::cout << fmt::format("  {:<5} {:<44} {:>7} {:>6} {:>16}\n", "shard", "file", "tensors", "sliced",
                             "bytes");
    for (size_t i = 0; i < plan.shards.size(); ++i) row(std::to_string(i + 1), plan.shards[i]);
    if (plan.imatrix) row("imat", *plan.imatrix);
    std::cout << fmt::format("shards   {}\n", plan.shards.size());
    std::cout << fmt::format("tensors  {} ({} sliced, {} expert slabs in {} extents)\n", plan.tensor_count,
                             plan.sliced_tensors(), with_commas(plan.slabs()), with_commas(plan.extents()));
    std::cout << fmt::format("read     {} ({} bytes)\n", human_bytes(plan.bytes_read()),
                             with_commas(plan.bytes_read()));
    std::cout << fmt::format("{} {} ({} bytes)\n", dry_run ? "to write" : "written ",
                             human_bytes(plan.bytes_written()), with_commas(plan.bytes_written()));
    if (fetched)
        std::cout << fmt::format("fetched  {} ({} bytes, {} HTTP requests{})\n", human_bytes(fetched->bytes),
                                 with_commas(fetched->bytes), with_commas(fetched->requests),
                                 fetched->retries ? fmt::format(", {} retried", fetched->retries) : "");
    if (fetched && !fetched->revision.empty())
        std::cout << fmt::format("revision {} (the Hub revision pinned when the source was read)\n",
                                 fetched->revision);
    if (fetched)
        for (const auto& s : fetched->shards)
            if (!s.sha256.empty())
                std::cout << fmt::format("source   {} sha256 {} (the Hub's lfs.oid)\n", s.path, s.sha256);
    if (resumed)
        std::cout << fmt::format("resumed  {} ({} bytes) written by an interrupted run\n",
                                 human_bytes(resumed), with_commas(resumed));
    if (r)
        std::cout << fmt::format(
            "time     {:.3f} s ({:.2f} GB/s)\n", r->seconds,
            r->seconds > 0 ? static_cast<double>(r->bytes_written()) / r->seconds / 1e9 : 0.0);
}

int run_splice(const SpliceCli& c) {
    if (c.quiet) spdlog::set_level(spdlog::level::warn);
    ops::SpliceRequest q;
    q.model = c.model;
    q.keeplist = c.keeplist;
    q.neuron_plan = c.neuron_plan;
    q.imatrix_in = c.imatrix_in;
    q.options = splice_options(c);
    q.dry_run = c.dry_run;
    q.force = c.force;
    q.durable = !c.no_fsync;
    q.resume = !c.no_resume;
    q.method = parse_method(c.copy_method);
    q.threads = c.threads;
    const auto r = ops::splice(q, cli_events(!c.quiet));
    const CopyReport* copy = r->copy ? &*r->copy : nullptr;
    const SplicePlan& plan = *r->opened->plan;
    if (c.json)
        print_json(report_json(plan, c.dry_run, copy, r->fetched, r->resumed_bytes, r->keeplist_note));
    else
        print_text(plan, c.dry_run, copy, r->fetched, r->resumed_bytes, r->keeplist_note);
    return kExitOk;
}

}  // namespace

Command add_splice(CLI::App& app, const GlobalOptions&) {
    auto o = std::make_shared<SpliceCli>();
    CLI::App* sub = app.add_subcommand("splice", "Write the pruned model as new shards, byte-exact");
    sub->add_option("MODEL", o->model, "The source model: an unsplit GGUF or any shard of a split set")
        ->required();
    sub->add_option("--keeplist", o->keeplist,
                    "keeplist.json from `rank` (or a {\"drop\": ...} spec); optional with --neuron-plan");
    sub->add_option("--neuron-plan", o->neuron_plan,
                    "plan.npz from `plan-width`: also cut every routed expert to K FFN channels");
    sub->add_option("-o,--output", o->out,
                    "Output prefix: OUT-00001-of-0000N.gguf, or OUT.gguf when there is one shard")
        ->required();
    sub->add_option("--split-max-size", o->split_max_size,
                    "At most this many bytes per shard (40G, 500M, 1.5GiB)");
    sub->add_option("--split-count", o->split_count, "Exactly N shards, balanced by bytes");
    sub->add_option("--split-max-tensors", o->split_max_tensors, "At most N tensors per shard");
    sub->add_option("--threads", o->threads,
                    "Copy threads (default: one per output file, at most 4 and the cores)")
        ->check(CLI::Range(1u, 64u));
    sub->add_flag("--dry-run", o->dry_run,
                  "Print the plan and the exact size of every output file; write nothing");
    sub->add_flag("--force", o->force, "Replace existing outputs (never an input)");
    sub->add_flag("-q,--quiet", o->quiet, "No progress and no info messages on stderr");
    sub->add_flag("--json", o->json, "Print one JSON document on stdout");
    sub->add_flag("--no-provenance", o->no_provenance, "Do not write the gguf_reap.* provenance keys");
    sub->add_flag("--drop-mtp", o->drop_mtp,
                  "Leave out the nextn (MTP) blocks: block_count and nextn_predict_layers shrink (for those "
                  "who do not use speculative decoding)");
    sub->add_flag("--no-resume", o->no_resume,
                  "From a URL: start over instead of continuing an interrupted run into the same prefix");
    sub->add_flag("--no-fsync", o->no_fsync,
                  "Do not wait for the disk: outputs are complete before they are renamed into place, but "
                  "may be lost on a power failure before the kernel writes them (run sync before relying on "
                  "them)");
    sub->add_option("--imatrix-in", o->imatrix_in, "Also prune this imatrix (GGUF or legacy .dat) ...");
    sub->add_option("--imatrix-out", o->imatrix_out,
                    "... and write it here, for llama-quantize on the pruned model");
    sub->add_option("--copy-method", o->copy_method,
                    "auto | copy_file_range | pread (for diagnosis and benchmarks)");
    return {sub, [o] { return run_splice(*o); }};
}

}  // namespace gguf_reap::cli
