// gguf-reap audit: the operation. Reads like its table of contents; each step lives in audit_*.cpp.
#include "gguf_reap/audit.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "gguf_reap/error.h"
#include "io/output_file.h"
#include "io/output_lock.h"
#include "io/remote_file.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "ops/audit/audit_internal.h"
#include "ops/audit/audit_steps.h"
#include "services/manifest_file.h"

namespace gguf_reap {

const char* finding_kind_name(FindingKind k) {
    switch (k) {
        case FindingKind::kShardSet:
            return "shard_set";
        case FindingKind::kHeader:
            return "header";
        case FindingKind::kBounds:
            return "bounds";
        case FindingKind::kMetadata:
            return "metadata";
        case FindingKind::kTensorInfo:
            return "tensor_info";
        case FindingKind::kData:
            return "data";
        case FindingKind::kPadding:
            return "padding";
        case FindingKind::kKeeplist:
            return "keeplist";
        case FindingKind::kManifest:
            return "manifest";
        case FindingKind::kLoadRule:
            return "load_rule";
    }
    return "?";
}

std::string Finding::line() const {
    std::string where = file;
    if (!subject.empty()) where += ": " + subject;
    if (offset)
        where += fmt::format("{}at offset {} (0x{:x})", subject.empty() ? ": " : " ", *offset, *offset);
    return where + ": " + message;
}

namespace audit_detail {
namespace {

// Options that cannot go together, refused before anything is opened.
void check_options(const AuditOptions& o) {
    if (o.source && o.source_manifest)
        throw RequestError({AuditOptions::kSource, " and ", AuditOptions::kSourceManifest,
                            ": give one (the manifest stands for the source)"});
    if (o.keeplist && !o.source && !o.source_manifest)
        throw RequestError({AuditOptions::kKeeplist, " needs ", AuditOptions::kSource, " or ",
                            AuditOptions::kSourceManifest,
                            ": the keeplist says which source experts the output keeps"});
    if (o.neuron_plan && o.source_manifest)
        throw RequestError(
            {AuditOptions::kNeuronPlan, " needs ", AuditOptions::kSource, ", not ",
             AuditOptions::kSourceManifest,
             ": a width cut keeps rows and columns of each slab, which the manifest's whole-slab "
             "hashes cannot vouch for"});
    if (o.neuron_plan && !o.source)
        throw RequestError({AuditOptions::kNeuronPlan, " needs ", AuditOptions::kSource,
                            ": the plan says which source channels the output keeps"});
}

// The source model, or the model its manifest describes, and its experts.
struct Source {
    std::optional<ShardSet> model;
    std::optional<Manifest> manifest;  // --source-manifest, until the byte pass
    MoeLayout layout;
};

void open_source(const AuditOptions& o, Source& s) {
    if (o.source) {
        s.model = ShardSet::open(*o.source);
        s.layout = build_moe_layout(*s.model);
    } else if (o.source_manifest) {
        s.manifest = Manifest::load(*o.source_manifest);
        s.model = manifest_model(*s.manifest, *o.source_manifest);
        s.layout = build_moe_layout(*s.model);
        for (const MoeBlock& b : s.layout.blocks)
            if (b.hash_table)
                throw RequestError(
                    {fmt::format(
                         "{}: blk.{} routes by a token → expert table, whose values pruning rewrites: "
                         "only the source's own values can check the rewrite, so audit this model with ",
                         *o.source_manifest, b.block),
                     AuditOptions::kSource});
    }
}

// What step 4 leaves for the byte pass.
struct AgainstSource {
    Expectations expect;
    std::vector<Sha256::Digest> source_hashes;  // --source-manifest: what expect's runs point at
    std::vector<std::string> source_paths;
};

// Kept experts, metadata, tensor infos → what every tensor's bytes must be.
void check_against_source(const AuditOptions& o, Source& src, const OutputSet& out, AuditReport& r,
                          AgainstSource& a) {
    KeptExperts kept = derive_kept(*src.model, o.source ? *o.source : o.source_manifest.value_or(""),
                                   src.layout, out, o.keeplist, r);
    kept.width = derive_width(*src.model, src.layout, out, o.neuron_plan, r);
    check_metadata(*src.model, kept, out, r);
    a.expect = check_tensor_infos(*src.model, src.layout, kept, out, r);
    // A key that differs from the source is reported once, as metadata, not again as a load rule.
    std::set<std::pair<std::string, std::string>> metadata;
    for (const Finding& f : r.findings)
        if (f.kind == FindingKind::kMetadata) metadata.emplace(f.file, f.subject);
    std::erase_if(r.findings, [&](const Finding& f) {
        return f.kind == FindingKind::kLoadRule && f.tensor.empty() && metadata.count({f.file, f.subject});
    });
    if (src.manifest) {
        a.source_hashes = attach_source_hashes(a.expect, *src.model, *src.manifest, *o.source_manifest);
        // The manifest (15 MB for a Kimi-K3 shape, in small blocks) goes before the byte pass, with the
        // hashes of the slabs not kept, and its pages go back to the kernel: free() alone keeps them.
        src.manifest.reset();
#ifdef __GLIBC__
        malloc_trim(0);
#endif
    } else
        for (const auto& s : src.model->shards()) a.source_paths.push_back(s.path);
}

// One pass over the bytes of every shard, in parallel; its findings join the report's.
std::vector<ShardBytes> byte_pass(const AuditOptions& o, bool with_source, bool hash, const OutputSet& out,
                                  const AgainstSource& a, AuditReport& r, const Events& events) {
    BytePassOptions bo;
    bo.events = &events;
    bo.read_all = with_source;
    bo.hash = hash;
    std::vector<std::vector<uint64_t>> slab_bytes;
    if (o.compute_manifest) {
        slab_bytes = output_slab_bytes(out, r);
        bo.slab_bytes = &slab_bytes;
    }
    bo.threads = o.threads;
    bo.buffer_bytes = o.buffer_bytes;
    // Against a source manifest the pass reads one stream, the output, and hashes it: 4 MiB windows read
    // it as fast as 8 MiB ones and keep the peak near --source's (docs/perf/audit.md, "Memory").
    if (o.source_manifest) bo.buffer_bytes = std::min(bo.buffer_bytes, size_t{4} << 20);
    std::vector<ShardBytes> bytes = verify_bytes(out, a.expect, a.source_paths, bo);
    for (auto& b : bytes) {
        for (auto& f : b.findings) r.findings.push_back(std::move(f));
        b.findings.clear();
    }
    return bytes;
}

// The verdict holds only for files that stayed as they were opened: one truncated or rewritten during
// the pass may have been read half old, half new, so the audit stops without one.
void check_unchanged(const Source& src, const OutputSet& out) {
    std::vector<const InputFile*> files;
    if (src.model)
        for (const auto& s : src.model->shards())
            if (s.file) files.push_back(s.file.get());
    for (const OutShard& s : out.shards)
        if (s.file) files.push_back(s.file.get());
    InputFile::check_unchanged_all(files);
}

// The shards as found and the byte pass's counters, added up.
void summarize(const OutputSet& out, const std::vector<ShardBytes>& bytes, AuditReport& r) {
    AuditSummary& sum = r.summary;
    sum.shards = out.shards.size();
    for (size_t i = 0; i < out.shards.size(); ++i) {
        const OutShard& s = out.shards[i];
        AuditShard as;
        as.path = s.path;
        as.present = s.file != nullptr;
        as.readable = s.header.has_value();
        as.size = s.file ? s.file->size() : 0;
        as.tensors = s.header ? s.header->tensors.size() : 0;
        as.sha256 = bytes[i].sha256;
        r.shards.push_back(as);
        sum.tensors += as.tensors;
        const AuditSummary& c = bytes[i].counts;
        sum.tensors_identical += c.tensors_identical;
        sum.expert_tensors += c.expert_tensors;
        sum.slabs += c.slabs;
        sum.tensors_hashed += c.tensors_hashed;
        sum.bytes_compared += c.bytes_compared;
        sum.padding_bytes += c.padding_bytes;
        sum.bytes_read += c.bytes_read;
        sum.source_bytes_read += c.source_bytes_read;
        sum.bytes_hashed += c.bytes_hashed;
    }
}

}  // namespace
}  // namespace audit_detail

AuditReport run_audit(const AuditOptions& o, const Events& events) {
    using namespace audit_detail;
    check_options(o);
    AuditReport r;
    if (o.source) r.source = *o.source;
    if (o.source_manifest) r.source_manifest = *o.source_manifest;
    if (o.keeplist) r.keeplist = *o.keeplist;

    // 1. Inputs that must be sound before anything is judged: the source (or the manifest standing for
    //    it), the manifest.
    Source src;
    open_source(o, src);
    if (o.source)  // an hf:// source: the commit its branch named when it was read
        if (const RemoteFile* f = src.model->shards().front().file->remote())
            r.source_revision = f->hub_revision();
    std::optional<Manifest> manifest;
    if (o.manifest) manifest = Manifest::load(*o.manifest);

    // 2. The output set, from disk: drop its pages, parse every header.
    OutputSet out = open_output_set(o.output, o.drop_cache, r.findings);

    // 3. The set's structure: split keys, duplicates, bounds, sizes.
    check_structure(out, r.findings);
    // 3b. What llama.cpp's loader checks of the experts: counts, groups, every expert tensor's shape.
    check_load_rules(out, r.findings);

    // 4. Against the source: kept experts, metadata, tensor infos → what every tensor's bytes must be.
    AgainstSource against;
    if (src.model) check_against_source(o, src, out, r, against);

    // 5. One pass over the bytes of every shard, in parallel.
    std::vector<ShardBytes> bytes = byte_pass(
        o, src.model.has_value(), manifest.has_value() || o.compute_manifest, out, against, r, events);

    // 6. Manifests: check against the given one, build the output's own.
    if (manifest) check_manifest(*manifest, out, bytes, r.findings);
    if (o.compute_manifest) r.manifest = build_manifest(out, bytes);
    // A file that changed while it was read voids the verdict.
    check_unchanged(src, out);

    // 7. Summary.
    summarize(out, bytes, r);
    return r;
}

namespace ops {

AuditResult audit(const AuditRequest& q, const Events& events) {
    AuditOptions o = q.options;
    o.compute_manifest = !q.manifest_out.empty();
    std::vector<std::string> inputs{o.output};
    for (const auto* p : {&o.source, &o.keeplist, &o.neuron_plan, &o.manifest, &o.source_manifest})
        if (*p) inputs.push_back(**p);
    // Refuse an unusable destination now rather than after reading the whole model: the lock taken and
    // both files created under their temporary names (removed again when no manifest is written).
    std::optional<OutputLock> lock;
    std::optional<OutputFile> json_out, sums_out;
    if (o.compute_manifest) {
        check_manifest_destination(q.manifest_out, inputs, q.force);
        json_out.emplace(q.manifest_out);  // first: its error names the path as given
        sums_out.emplace(manifest_sums_path(q.manifest_out));
        lock.emplace(q.manifest_out);
    }

    AuditResult r{run_audit(o, events), false, nullptr};
    if (r.report.manifest && r.report.passed()) {
        for (const auto& s : r.report.shards) inputs.push_back(s.path);
        // The work is done: a failure to write its manifest still leaves the report to print.
        try {
            check_manifest_destination(q.manifest_out, inputs, q.force);
            save_manifest(*r.report.manifest, *json_out, *sums_out);
            r.manifest_written = true;
        } catch (const Error&) {
            r.write_error = std::current_exception();
        }
    } else if (r.report.manifest) {
        events.warn(
            fmt::format("manifest not written: the audit found {} finding(s)", r.report.findings.size()));
    }
    return r;
}

}  // namespace ops

}  // namespace gguf_reap
