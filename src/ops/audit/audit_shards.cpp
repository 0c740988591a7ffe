// audit, step 1: find the output's shards by name, read their headers from disk, check the set.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gguf_reap/error.h"
#include "io/checked.h"
#include "io/preflight.h"
#include "ops/audit/audit_internal.h"

namespace gguf_reap::audit_detail {

namespace {

// Flushes anything still dirty (a file splice has just written) and drops the file's pages, so the
// reads that follow come from the disk and not from memory. Both calls are advice: a file system that
// refuses them leaves the audit correct, only less strict about where the bytes come from.
void drop_page_cache(const InputFile& f) {
    ::fdatasync(f.fd());
    ::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_DONTNEED);
}

OutShard open_shard(const std::string& path, int number, bool named, bool drop_cache,
                    std::vector<Finding>& findings) {
    OutShard s;
    s.path = path;
    s.number = number;
    s.file = InputFile::open(path);
    if (drop_cache) drop_page_cache(*s.file);
    ParseOptions po;
    po.require_data = false;  // a truncated data section is a finding with every tensor named
    try {
        s.header = parse_gguf_header(*s.file, po);
    } catch (const InputError& e) {
        // A file that is not GGUF at all, named on the command line, is a wrong argument.
        if (named && e.field() == "magic") throw;
        Finding f;
        f.kind = FindingKind::kHeader;
        f.file = path;
        f.subject = e.field();
        f.offset = e.offset();
        f.message = e.detail() + " (the header breaks ggml's rules; nothing in this shard can be verified)";
        findings.push_back(std::move(f));
    }
    return s;
}

Finding set_finding(FindingKind kind, std::string file, std::string subject, std::optional<uint64_t> offset,
                    std::string message) {
    Finding f;
    f.kind = kind;
    f.file = std::move(file);
    f.subject = std::move(subject);
    f.offset = offset;
    f.message = std::move(message);
    return f;
}

// split.* keys must have the types llama.cpp's typed getters demand (u16/u16/i32).
struct SplitKey {
    const Kv* kv = nullptr;
    std::optional<int64_t> value;  // set when present with the right type
};

SplitKey split_key(const OutShard& s, const char* key, GgufType want, std::vector<Finding>& findings) {
    SplitKey k;
    k.kv = s.header->find(key);
    if (!k.kv) return k;
    if (k.kv->type != want) {
        findings.push_back(
            set_finding(FindingKind::kShardSet, s.path, fmt::format("kv '{}'", key),
                        k.kv->file_offset + 8 + k.kv->key.size(),
                        fmt::format("has type {}, but llama.cpp requires {} (it refuses the model)",
                                    gguf_type_name(k.kv->type), gguf_type_name(want))));
        return k;
    }
    k.value = k.kv->as_int();
    return k;
}

void check_split_keys_multi(const OutputSet& out, size_t total_tensors, std::vector<Finding>& findings) {
    // split.no of every shard first, to name swapped pairs.
    std::vector<std::optional<int64_t>> nos(out.shards.size());
    std::vector<SplitKey> no_keys(out.shards.size());
    for (size_t i = 0; i < out.shards.size(); ++i) {
        const OutShard& s = out.shards[i];
        if (!s.header) continue;
        no_keys[i] = split_key(s, kSplitNo, GgufType::kUint16, findings);
        nos[i] = no_keys[i].value;
    }
    for (size_t i = 0; i < out.shards.size(); ++i) {
        const OutShard& s = out.shards[i];
        if (!s.header) continue;
        const int64_t want_no = static_cast<int64_t>(i);
        if (!no_keys[i].kv) {
            findings.push_back(
                set_finding(FindingKind::kShardSet, s.path, "kv 'split.no'", std::nullopt,
                            fmt::format("missing: shard {} of {} must say split.no = {} (llama.cpp "
                                        "refuses a shard without it)",
                                        s.number, out.count, want_no)));
        } else if (nos[i] && *nos[i] != want_no) {
            std::string hint;
            const int64_t other = *nos[i];
            if (other >= 0 && other < out.count && nos[static_cast<size_t>(other)] == want_no)
                hint = fmt::format(": shards {} and {} look swapped", s.number, other + 1);
            else if (other >= 0 && other < out.count)
                hint = fmt::format(": it holds shard {}'s content under this name", other + 1);
            findings.push_back(set_finding(FindingKind::kShardSet, s.path, "kv 'split.no'",
                                           kv_value_offset(*no_keys[i].kv),
                                           fmt::format("is {} but the file is shard {} of {} (expected {}){}",
                                                       other, s.number, out.count, want_no, hint)));
        }
        const SplitKey cnt = split_key(s, kSplitCount, GgufType::kUint16, findings);
        if (!cnt.kv)
            findings.push_back(set_finding(
                FindingKind::kShardSet, s.path, "kv 'split.count'", std::nullopt,
                fmt::format("missing: every shard of a {}-shard set carries split.count", out.count)));
        else if (cnt.value && *cnt.value != out.count)
            findings.push_back(
                set_finding(FindingKind::kShardSet, s.path, "kv 'split.count'", kv_value_offset(*cnt.kv),
                            fmt::format("is {} but the set has {} shards (the file names say -of-{:05d})",
                                        *cnt.value, out.count, out.count)));
        const SplitKey tc = split_key(s, kSplitTensorsCount, GgufType::kInt32, findings);
        if (!tc.kv)
            findings.push_back(set_finding(FindingKind::kShardSet, s.path, "kv 'split.tensors.count'",
                                           std::nullopt,
                                           "missing: every shard of a split set carries split.tensors.count "
                                           "(llama.cpp requires it in the first)"));
        // Compared only when every shard was read: a missing shard is already named, and the count of
        // what is left says nothing more.
        else if (tc.value && out.complete() && *tc.value != static_cast<int64_t>(total_tensors))
            findings.push_back(set_finding(FindingKind::kShardSet, s.path, "kv 'split.tensors.count'",
                                           kv_value_offset(*tc.kv),
                                           fmt::format("is {} but the {} shards hold {} tensors (llama.cpp: "
                                                       "\"corrupted model\")",
                                                       *tc.value, out.count, total_tensors)));
    }
}

void check_split_keys_single(const OutShard& s, std::vector<Finding>& findings) {
    const SplitKey cnt = split_key(s, kSplitCount, GgufType::kUint16, findings);
    if (cnt.value && *cnt.value > 1)
        findings.push_back(
            set_finding(FindingKind::kShardSet, s.path, "kv 'split.count'", kv_value_offset(*cnt.kv),
                        fmt::format("is {} but this file is not named PREFIX-NNNNN-of-{:05d}.gguf, so "
                                    "its other shards cannot be found",
                                    *cnt.value, *cnt.value)));
    const SplitKey no = split_key(s, kSplitNo, GgufType::kUint16, findings);
    if (no.value && *no.value != 0)
        findings.push_back(
            set_finding(FindingKind::kShardSet, s.path, "kv 'split.no'", kv_value_offset(*no.kv),
                        fmt::format("is {} in a file that is the whole model (expected 0)", *no.value)));
}

void check_bounds(const OutShard& s, std::vector<Finding>& findings) {
    const Header& h = *s.header;
    const uint64_t size = s.file->size();
    for (const TensorInfo& t : h.tensors) {
        const uint64_t abs = h.data_start + t.offset;  // cannot overflow: the parser checked data_size
        if (!range_inside(abs, t.nbytes, size)) {
            Finding f =
                set_finding(FindingKind::kBounds, s.path, fmt::format("tensor '{}' data", t.name), abs,
                            fmt::format("[{}, +{}) ends {} bytes past the end of the file ({} bytes): "
                                        "truncated?",
                                        abs, t.nbytes, abs + t.nbytes - size, size));
            f.tensor = t.name;
            findings.push_back(std::move(f));
        }
    }
    const uint64_t expected = h.data_start + h.data_size;
    if (size < expected)
        findings.push_back(set_finding(FindingKind::kBounds, s.path, "file size", size,
                                       fmt::format("the file ends after {} bytes but its header describes {} "
                                                   "(tensor data and padding): {} bytes missing, truncated",
                                                   size, expected, expected - size)));
    else if (size > expected)
        findings.push_back(
            set_finding(FindingKind::kBounds, s.path, "file size", expected,
                        fmt::format("{} trailing bytes after the last tensor's padding (the header "
                                    "describes {} bytes, the file has {})",
                                    size - expected, expected, size)));
}

}  // namespace

bool OutputSet::complete() const {
    for (const auto& s : shards)
        if (!s.header) return false;
    return true;
}

size_t OutputSet::meta_index() const {
    if (!multi()) return 0;
    for (size_t i = 0; i < shards.size(); ++i) {
        if (!shards[i].header) continue;
        const Kv* no = shards[i].header->find(kSplitNo);
        if (no && no->type == GgufType::kUint16 && no->as_uint() == 0u) return i;
    }
    return 0;
}

uint64_t kv_value_offset(const Kv& kv) {
    return kv.file_offset + 8 + kv.key.size() + 4;
}

std::string shape_string(const TensorInfo& t) {
    std::string s = "{";
    for (uint32_t d = 0; d < std::max<uint32_t>(t.n_dims, 1); ++d)
        s += (d ? ", " : "") + std::to_string(t.ne[d]);
    return s + "}";
}

OutputSet open_output_set(const std::string& path, bool drop_cache, std::vector<Finding>& findings) {
    OutputSet out;
    const auto name = parse_split_name(path);
    const bool split_named = name && name->count >= 1 && name->number >= 1 && name->number <= name->count;
    if (name && !split_named)
        findings.push_back(
            set_finding(FindingKind::kShardSet, path, "file name", std::nullopt,
                        fmt::format("says shard {} of {}, which is no position in a set; audited "
                                    "as a single file",
                                    name->number, name->count)));
    if (!split_named) {
        out.shards.push_back(open_shard(path, 1, true, drop_cache, findings));
        return out;
    }
    out.count = name->count;
    for (int i = 1; i <= out.count; ++i) {
        const std::string p = split_path(name->prefix, i, out.count);
        if (i == name->number) {
            out.shards.push_back(open_shard(path, i, true, drop_cache, findings));
            continue;
        }
        std::error_code ec;
        if (!std::filesystem::exists(p, ec)) {
            OutShard missing;
            missing.path = p;
            missing.number = i;
            out.shards.push_back(std::move(missing));
            findings.push_back(
                set_finding(FindingKind::kShardSet, p, "shard", std::nullopt,
                            fmt::format("missing: shard {} of {} does not exist", i, out.count)));
            continue;
        }
        out.shards.push_back(open_shard(p, i, false, drop_cache, findings));
    }

    // Extra shards: the same prefix with another count, or a number past the count. Sorted so that the
    // report does not depend on directory order.
    const std::filesystem::path prefix_path(name->prefix);
    const std::string base = prefix_path.filename().string();
    std::filesystem::path dir = prefix_path.parent_path();
    if (dir.empty()) dir = ".";
    std::vector<std::string> extras;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const auto other = parse_split_name(entry.path().filename().string());
        if (!other || other->prefix != base) continue;
        if (other->count != out.count || other->number < 1 || other->number > out.count)
            extras.push_back((dir / entry.path().filename()).string());
    }
    std::sort(extras.begin(), extras.end());
    for (const auto& e : extras)
        findings.push_back(
            set_finding(FindingKind::kShardSet, e, "shard", std::nullopt,
                        fmt::format("extra file beside a set of {}: it would be mistaken for part of "
                                    "the model (remove it or move it away)",
                                    out.count)));
    return out;
}

void check_structure(const OutputSet& out, std::vector<Finding>& findings) {
    // Duplicate names across shards (within one shard the parser already refuses them).
    std::unordered_map<std::string, const OutShard*> seen;
    for (const OutShard& s : out.shards) {
        if (!s.header) continue;
        for (const TensorInfo& t : s.header->tensors) {
            auto [it, inserted] = seen.emplace(t.name, &s);
            if (!inserted) {
                Finding f = set_finding(
                    FindingKind::kShardSet, s.path, fmt::format("tensor '{}'", t.name), t.info_offset,
                    fmt::format("duplicate tensor name (also in {}): llama.cpp refuses the model",
                                it->second->path));
                f.tensor = t.name;
                findings.push_back(std::move(f));
            }
        }
    }
    if (out.multi())
        check_split_keys_multi(out, seen.size(), findings);
    else if (out.shards.front().header)
        check_split_keys_single(out.shards.front(), findings);
    for (const OutShard& s : out.shards)
        if (s.header) check_bounds(s, findings);
}

}  // namespace gguf_reap::audit_detail
