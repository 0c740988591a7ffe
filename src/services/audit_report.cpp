// The `audit --json` document, written (audit_report_json) and read back (read_audit_document) with the
// same key names.
#include "services/audit_report.h"

#include <ctime>

#include <fmt/format.h>

#include "format/json_input.h"
#include "gguf_reap/audit.h"
#include "gguf_reap/error.h"
#include "gguf_reap/version.h"
#include "io/input_file.h"
#include "io/remote_url.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "model/shard_set.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;
namespace key = audit_key;

// `audit --json` documents are a few hundred bytes per shard and finding; 64 MiB and 4 M values are
// far beyond any real one and keep a hostile file from exhausting memory.
constexpr uint64_t kAuditFileLimit = uint64_t{64} << 20;
constexpr size_t kAuditMaxValues = size_t{1} << 22;

// "2026-12-01T21:30:05Z"
std::string utc_now_iso8601() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

json or_null(const std::string& s) {
    return s.empty() ? json(nullptr) : json(s);
}
json or_null(const std::optional<std::string>& s) {
    return or_null(s.value_or(std::string()));
}
// An input the report names: at a URL by its URL, an hf:// one at the commit it was read at
// (io/input_file.h); a local path as given.
json input_or_null(const std::optional<std::string>& s) {
    if (s && is_remote_path(*s)) return input_name(*s);
    return or_null(s);
}
template <typename T>
json or_null(const std::optional<T>& v) {
    return v ? json(*v) : json(nullptr);
}

json shard_json(const AuditShard& s) {
    json o{{key::kPath, s.path},
           {key::kPresent, s.present},
           {key::kReadable, s.readable},
           {key::kSize, s.size},
           {key::kTensors, s.tensors}};
    o[key::kSha256] = or_null(s.sha256);
    return o;
}

json summary_json(const AuditReport& r) {
    const AuditSummary& m = r.summary;
    json s = {{key::kShards, m.shards},
              {key::kTensors, m.tensors},
              {key::kTensorsIdentical, m.tensors_identical},
              {key::kExpertTensors, m.expert_tensors},
              {key::kSlabs, m.slabs},
              {key::kTensorsHashed, m.tensors_hashed},
              {key::kKvsChecked, m.kvs_checked},
              {key::kBytesCompared, m.bytes_compared},
              {key::kPaddingBytes, m.padding_bytes},
              {key::kBytesRead, m.bytes_read},
              {key::kSourceBytesRead, m.source_bytes_read},
              {key::kBytesHashed, m.bytes_hashed},
              {key::kFindings, r.findings.size()}};
    if (m.hash_tables > 0) s[key::kHashTables] = m.hash_tables;  // deepseek4 only
    return s;
}

json finding_json(const Finding& f) {
    json o;
    o[key::kKind] = finding_kind_name(f.kind);
    o[key::kFile] = f.file;
    o[key::kSubject] = f.subject;
    o[key::kOffset] = or_null(f.offset);
    o[key::kTensor] = or_null(f.tensor);
    o[key::kExpert] = or_null(f.expert);
    o[key::kSourceExpert] = or_null(f.source_expert);
    o[key::kRegion] = or_null(f.region);
    o[key::kChannel] = or_null(f.channel);
    o[key::kMessage] = f.message;
    return o;
}

uint64_t read_uint(const json& obj, const char* k, const std::string& path, const std::string& where) {
    if (!obj.is_object() || !obj.contains(k) || !obj[k].is_number_unsigned())
        throw InputError(path, std::nullopt, where + k, "missing or not a non-negative integer");
    return obj[k].get<uint64_t>();
}

std::string read_string(const json& obj, const char* k, const std::string& path, const std::string& where) {
    if (!obj.is_object() || !obj.contains(k) || !obj[k].is_string())
        throw InputError(path, std::nullopt, where + k, "missing or not a string");
    return obj[k].get<std::string>();
}

// A path the audit was run with: a string, or absent (null) when it was not given.
std::optional<std::string> read_given(const json& j, const char* k) {
    if (j.contains(k) && j[k].is_string()) return j[k].get<std::string>();
    return std::nullopt;
}

}  // namespace

namespace ops {

nlohmann::ordered_json audit_report_json(const AuditRequest& q, const AuditResult& o) {
    const AuditOptions& c = q.options;
    const AuditReport& r = o.report;
    json j;
    j[key::kResult] = r.passed() ? "pass" : "fail";
    j[key::kTool] = std::string(GGUF_REAP_TOOL);
    j[key::kDate] = utc_now_iso8601();  // when the audit finished
    j[key::kOutput] = c.output;
    j[key::kSource] = or_null(c.source);
    j[key::kSourceRevision] = or_null(r.source_revision);
    j[key::kSourceManifest] = input_or_null(c.source_manifest);
    j[key::kKeeplist] = input_or_null(c.keeplist);
    j[key::kNeuronPlan] = input_or_null(c.neuron_plan);
    if (c.neuron_plan) j[key::kExpertWidth] = {{key::kFrom, r.source_width}, {key::kTo, r.output_width}};
    j[key::kManifest] = or_null(c.manifest);
    j[key::kKeptFrom] = or_null(r.kept_from);
    if (c.source || c.source_manifest)
        j[key::kExpertCount] = {
            {key::kFrom, r.source_expert_count},
            {key::kTo, r.output_expert_count ? json(r.output_expert_count) : json(nullptr)}};
    json shards = json::array();
    for (const auto& s : r.shards) shards.push_back(shard_json(s));
    j[key::kShards] = shards;
    j[key::kSummary] = summary_json(r);
    json fs = json::array();
    for (const auto& f : r.findings) fs.push_back(finding_json(f));
    j[key::kFindings] = fs;
    j[key::kNotes] = r.notes;
    j[key::kManifestOut] = o.manifest_written ? json{{key::kJson, q.manifest_out},
                                                     {key::kSha256sum, manifest_sums_path(q.manifest_out)}}
                                              : json(nullptr);
    return j;
}

}  // namespace ops

AuditDocument read_audit_document(const std::string& path, const std::string& audited) {
    const std::string text = read_small_file(path, kAuditFileLimit, "audit report");
    const json j = parse_json_input<json>(text, path, 64, kAuditMaxValues, "an audit report");
    if (!j.is_object())
        throw InputError(path, std::nullopt, "json", "not an audit report (not a JSON object)");
    AuditDocument a;
    const std::string result = read_string(j, key::kResult, path, "");
    const json& summary = j.contains(key::kSummary) ? j[key::kSummary] : json();
    if (result != "pass")
        throw InputError(path, std::nullopt, key::kResult,
                         fmt::format("'{}' ({} finding(s)): the audit of {} did not pass, and a card states "
                                     "only what a passing audit verified",
                                     result,
                                     summary.is_object() && summary.contains(key::kFindings)
                                         ? summary[key::kFindings].dump()
                                         : "?",
                                     audited));
    a.tool = read_string(j, key::kTool, path, "");
    a.date = read_string(j, key::kDate, path, "");
    const std::string in_summary = std::string(key::kSummary) + ".";
    a.shards = read_uint(summary, key::kShards, path, in_summary);
    a.tensors = read_uint(summary, key::kTensors, path, in_summary);
    a.tensors_identical = read_uint(summary, key::kTensorsIdentical, path, in_summary);
    a.expert_tensors = read_uint(summary, key::kExpertTensors, path, in_summary);
    a.slabs = read_uint(summary, key::kSlabs, path, in_summary);
    a.kvs_checked = read_uint(summary, key::kKvsChecked, path, in_summary);
    a.bytes_compared = read_uint(summary, key::kBytesCompared, path, in_summary);
    if (read_uint(summary, key::kFindings, path, in_summary) != 0)
        throw InputError(path, std::nullopt, in_summary + key::kFindings,
                         "not 0 in a passing audit: this is not the report an audit wrote");

    if (!j.contains(key::kShards) || !j[key::kShards].is_array())
        throw InputError(path, std::nullopt, key::kShards, "missing or not an array");
    const json& shards = j[key::kShards];
    for (size_t i = 0; i < shards.size(); ++i) {
        const std::string where = fmt::format("{}[{}].", key::kShards, i);
        AuditDocument::Shard s;
        s.path = read_string(shards[i], key::kPath, path, where);
        s.size = read_uint(shards[i], key::kSize, path, where);
        if (shards[i].contains(key::kSha256) && !shards[i][key::kSha256].is_null()) {
            s.sha256 = read_string(shards[i], key::kSha256, path, where);
            if (!is_sha256_hex(s.sha256))
                throw InputError(path, std::nullopt, where + key::kSha256, "not 64 lower-case hex digits");
        }
        a.shard_list.push_back(std::move(s));
    }
    a.source = read_given(j, key::kSource);
    a.source_manifest = read_given(j, key::kSourceManifest);
    a.neuron_plan = read_given(j, key::kNeuronPlan);
    return a;
}

}  // namespace gguf_reap
