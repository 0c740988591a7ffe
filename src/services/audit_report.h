// The `audit --json` document: written here for the CLI (ops::audit_report_json, in gguf_reap/audit.h)
// and read back here for `card --audit`, so that its key names are spelled in one file
// (audit_key below). The document itself is described in docs/audit.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gguf_reap {

// The document's keys, top level first, then summary.*, shards[].* and findings[].*.
namespace audit_key {
constexpr const char* kResult = "result";
constexpr const char* kTool = "tool";
constexpr const char* kDate = "date";
constexpr const char* kOutput = "output";
constexpr const char* kSource = "source";
constexpr const char* kSourceRevision = "source_revision";
constexpr const char* kSourceManifest = "source_manifest";
constexpr const char* kKeeplist = "keeplist";
constexpr const char* kNeuronPlan = "neuron_plan";
constexpr const char* kExpertWidth = "expert_width";
constexpr const char* kManifest = "manifest";
constexpr const char* kKeptFrom = "kept_from";
constexpr const char* kExpertCount = "expert_count";
constexpr const char* kShards = "shards";
constexpr const char* kSummary = "summary";
constexpr const char* kFindings = "findings";
constexpr const char* kNotes = "notes";
constexpr const char* kManifestOut = "manifest_out";
// summary.*
constexpr const char* kTensors = "tensors";
constexpr const char* kTensorsIdentical = "tensors_identical";
constexpr const char* kExpertTensors = "expert_tensors";
constexpr const char* kSlabs = "slabs";
constexpr const char* kTensorsHashed = "tensors_hashed";
constexpr const char* kKvsChecked = "kvs_checked";
constexpr const char* kBytesCompared = "bytes_compared";
constexpr const char* kPaddingBytes = "padding_bytes";
constexpr const char* kBytesRead = "bytes_read";
constexpr const char* kSourceBytesRead = "source_bytes_read";
constexpr const char* kBytesHashed = "bytes_hashed";
constexpr const char* kHashTables = "hash_tables";
// shards[].*
constexpr const char* kPath = "path";
constexpr const char* kPresent = "present";
constexpr const char* kReadable = "readable";
constexpr const char* kSize = "size";
constexpr const char* kSha256 = "sha256";
// findings[].*
constexpr const char* kKind = "kind";
constexpr const char* kFile = "file";
constexpr const char* kSubject = "subject";
constexpr const char* kOffset = "offset";
constexpr const char* kTensor = "tensor";
constexpr const char* kExpert = "expert";
constexpr const char* kSourceExpert = "source_expert";
constexpr const char* kRegion = "region";
constexpr const char* kChannel = "channel";
constexpr const char* kMessage = "message";
// expert_width.*, expert_count.*, manifest_out.*
constexpr const char* kFrom = "source";
constexpr const char* kTo = "output";
constexpr const char* kJson = "json";
constexpr const char* kSha256sum = "sha256sum";
}  // namespace audit_key

// What a passing `audit --json` document says, as card reads it back. Paths are as the audit wrote them.
struct AuditDocument {
    std::string tool, date;
    // summary.*
    uint64_t shards = 0, tensors = 0, tensors_identical = 0, expert_tensors = 0, slabs = 0;
    uint64_t kvs_checked = 0, bytes_compared = 0;
    struct Shard {
        std::string path;
        uint64_t size = 0;
        std::string sha256;  // "" when the audit did not hash it
    };
    std::vector<Shard> shard_list;               // shards[], in order
    std::optional<std::string> source;           // --source, when the audit ran with it
    std::optional<std::string> source_manifest;  // --source-manifest, when the audit ran with it
    std::optional<std::string> neuron_plan;      // --neuron-plan, when the audit ran with it
};

// Reads and checks an `audit --json` document. A document whose result is not "pass" is refused,
// naming `audited` (the output it is meant to be the audit of). Throws InputError (malformed, not a
// pass, or not what `audit --json` writes), IoError.
AuditDocument read_audit_document(const std::string& path, const std::string& audited);

}  // namespace gguf_reap
