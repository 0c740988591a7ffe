// audit: prove a pruned model byte for byte from the disk, by a code path independent of splice.
//
// Expectations are rebuilt from the source model, the output's own headers and the keeplist (or the
// gguf_reap.kept.* provenance keys splice writes into the output); nothing of splice's planner or copy
// engine is used, so a bug there cannot hide itself. Every output shard's pages are dropped from the
// page cache (fdatasync + posix_fadvise DONTNEED) before its header is parsed and its bytes read, so the
// audit checks what is on the disk. Every finding is collected before the report is made; only setup
// errors (a bad source model, a keeplist that does not fit the source, an unreadable manifest) stop at
// once as exceptions.
//
// Three levels, combinable:
//  - structural (always): file names, split.no sequence, split.count, split.tensors.count, duplicate
//    names, every header valid as ggml requires, every tensor inside its file, file sizes, padding zero,
//    and the load-time rules of llama.cpp for experts (counts, groups, expert tensor shapes);
//  - source (--source): metadata equal to the source except the documented changes, every tensor info
//    and every byte of tensor data equal to the source (kept expert slabs against source slab kept[k]);
//  - manifest (--manifest): every shard and tensor sha256 equal to a manifest written earlier;
//  - source manifest (--source-manifest): the source level, with the source's headers and hashes taken
//    from a manifest of the source: every check of --source, tensor bytes by sha256 (untouched tensors
//    whole, kept expert slabs slab by slab), and the source is not read at all.
// A manifest of the output can be computed in the same single pass over the bytes.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/events.h"
#include "gguf_reap/manifest.h"

namespace gguf_reap {

struct AuditOptions {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kSource{"source"}, kKeeplist{"keeplist"}, kNeuronPlan{"neuron_plan"},
        kManifest{"manifest"}, kSourceManifest{"source_manifest"};
    std::string output;                      // any shard of the output (or the single file)
    std::optional<std::string> source;       // any shard of the source model
    std::optional<std::string> keeplist;     // needs source
    std::optional<std::string> neuron_plan;  // width-spliced output: the plan it was cut with (needs source)
    std::optional<std::string> manifest;     // verify against this manifest
    // Verify against the source as its manifest records it (headers, tensor and slab hashes) instead of
    // reading the source: excludes `source`; takes `keeplist`; refuses `neuron_plan`.
    std::optional<std::string> source_manifest;
    bool compute_manifest = false;   // fill AuditReport::manifest
    int threads = 0;                 // shards verified in parallel; 0 = one per core
    bool drop_cache = true;          // fdatasync + DONTNEED on output shards before reading them
    size_t buffer_bytes = 8u << 20;  // per-stream read buffer (output and each source stream)
};

enum class FindingKind {
    kShardSet,    // file names, missing/extra/swapped shards, split.* values, duplicate tensors
    kHeader,      // a shard's header breaks ggml's rules (cannot be parsed)
    kBounds,      // file size: tensor data outside the file, truncation, trailing bytes
    kMetadata,    // key/value pairs differ from the source beyond the documented changes
    kTensorInfo,  // tensor missing, unexpected, reordered, or with another type or shape
    kData,        // tensor bytes differ from the source (or from the manifest's hash)
    kPadding,     // a padding byte is not zero
    kKeeplist,    // keeplist and provenance disagree, or the provenance is unusable
    kManifest,    // shard or tensor hash/size differs from the manifest, or a shard is missing from it
    kLoadRule,    // llama.cpp's loader would refuse the model: expert keys against each other and the shapes
};
const char* finding_kind_name(FindingKind k);

// One difference. `file` is the output shard it concerns (for a missing shard: the path it should have).
struct Finding {
    FindingKind kind = FindingKind::kData;
    std::string file;
    std::string
        subject;  // "tensor 'blk.1.ffn_up_exps.weight' expert 3 (source expert 4) kept slab", "kv 'x'", ...
    std::optional<uint64_t> offset;  // absolute byte offset in `file` of the first difference
    std::string message;
    // Set for tensor findings, so tools can group them without parsing `subject`.
    std::string tensor;
    std::optional<int64_t> expert;         // output expert index k
    std::optional<int64_t> source_expert;  // kept[k]
    std::string region;  // "kept slab", "router row", "exp_probs_b", "tensor data", "padding", ...
    std::optional<int64_t> channel;  // width cut: the source FFN channel of the first difference

    // "<file>: <subject> at offset <dec> (0x<hex>): <message>" (the shape of an InputError).
    std::string line() const;
};

struct AuditSummary {
    size_t shards = 0;   // output shards found (readable or not)
    size_t tensors = 0;  // tensors in the readable output headers
    // "Compared" means byte for byte with --source and by sha256 with --source-manifest.
    size_t tensors_identical = 0;    // non-expert tensors compared equal to the source
    size_t expert_tensors = 0;       // expert-indexed tensors whose every kept slab compared equal
    size_t slabs = 0;                // per-expert pieces (weight slabs, router rows, bias elements) equal
    size_t hash_tables = 0;          // deepseek4 token → expert tables whose rewrite was verified
    size_t tensors_hashed = 0;       // tensors hashed (manifest computed or checked)
    uint64_t bytes_compared = 0;     // tensor bytes compared with the source
    uint64_t padding_bytes = 0;      // padding bytes checked to be zero
    uint64_t bytes_read = 0;         // output bytes read from disk (headers included)
    uint64_t source_bytes_read = 0;  // source bytes read
    uint64_t bytes_hashed = 0;       // output bytes fed to sha256 (file hash)
    size_t kvs_checked = 0;          // key/value pairs compared with the expectation
};

// One output shard as found.
struct AuditShard {
    std::string path;
    bool present = false;   // the file exists
    bool readable = false;  // its header parsed
    uint64_t size = 0;
    size_t tensors = 0;
    std::string sha256;  // when the bytes were hashed (manifest computed or checked)
};

struct AuditReport {
    std::vector<AuditShard> shards;  // the output set, in shard order (missing positions included)
    std::string source;              // "" without --source
    std::string source_revision;     // hf:// --source only: "ORG/REPO@COMMIT", the revision it was read at
    std::string source_manifest;     // "" without --source-manifest
    std::string keeplist;            // "" without --keeplist
    std::string kept_from;           // "keeplist", "provenance", "unchanged" (no pruning), or ""
    uint64_t source_expert_count = 0;
    uint64_t output_expert_count = 0;
    std::string neuron_plan;   // "" without --neuron-plan
    int64_t source_width = 0;  // width cut: the source's expert FFN width ...
    int64_t output_width = 0;  // ... and K
    std::vector<Finding> findings;
    std::vector<std::string> notes;  // things worth knowing that are not differences
    AuditSummary summary;
    std::optional<Manifest> manifest;  // when compute_manifest

    bool passed() const { return findings.empty(); }
};

namespace ops {

// One `gguf-reap audit`: the audit, then the manifest of the output when one is asked for and the
// audit passed (hashes of a wrong output must not travel as if they vouched for it).
struct AuditRequest {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kManifestOut{"manifest_out"}, kForce{"force"};
    AuditOptions options;  // compute_manifest is set from manifest_out
    std::string manifest_out;
    bool force = false;  // replace an existing manifest_out
};
struct AuditResult {
    AuditReport report;
    bool manifest_written = false;
    // The audit ran but its manifest could not be written (a full disk): the report is still printed,
    // then this is rethrown (exit 3).
    std::exception_ptr write_error;
};
AuditResult audit(const AuditRequest& request, const Events& events = {});

// The `audit --json` document of one audit (docs/audit.md); `card --audit` reads it back
// (src/services/audit_report.h), and both take its key names from one file.
nlohmann::ordered_json audit_report_json(const AuditRequest& request, const AuditResult& result);

}  // namespace ops

}  // namespace gguf_reap
