// audit, manifests: build one from the hashes of a pass, or check a pass against one. Without the
// source there is no "first differing byte" to report: a tensor is named with where its payload starts.
#include <filesystem>
#include <unordered_map>

#include <fmt/format.h>

#include "io/units.h"
#include "ops/audit_internal.h"

namespace gguf_reap::audit_detail {

Manifest build_manifest(const OutputSet& out, const std::vector<ShardBytes>& bytes) {
    Manifest m;
    m.tool = std::string("gguf-reap ") + GGUF_REAP_VERSION;
    for (size_t i = 0; i < out.shards.size(); ++i) {
        const OutShard& s = out.shards[i];
        if (!s.file) continue;
        ManifestShard ms;
        ms.name = base_name(s.path);
        ms.size = s.file->size();
        ms.sha256 = bytes[i].sha256;
        if (s.header)
            for (size_t t = 0; t < s.header->tensors.size(); ++t) {
                const TensorInfo& ti = s.header->tensors[t];
                ms.tensors.push_back(
                    {ti.name, s.header->data_start + ti.offset, ti.nbytes, bytes[i].tensor_sha256[t]});
            }
        m.shards.push_back(std::move(ms));
    }
    return m;
}

void check_manifest(const Manifest& m, const OutputSet& out, const std::vector<ShardBytes>& bytes,
                    std::vector<Finding>& findings) {
    auto add = [&](const std::string& file, std::string subject, std::optional<uint64_t> offset,
                   std::string msg, std::string tensor = {}) {
        Finding f;
        f.kind = FindingKind::kManifest;
        f.file = file;
        f.subject = std::move(subject);
        f.offset = offset;
        f.message = std::move(msg);
        f.tensor = std::move(tensor);
        if (!f.tensor.empty()) f.region = "tensor data";
        findings.push_back(std::move(f));
    };
    std::unordered_map<std::string, const OutShard*> found;  // every position of the set, present or not
    for (size_t i = 0; i < out.shards.size(); ++i) {
        const OutShard& s = out.shards[i];
        found.emplace(base_name(s.path), &s);
        if (!s.file) continue;  // a missing shard is named by the structure check
        const ManifestShard* ms = m.find_shard(base_name(s.path));
        if (!ms) {
            add(s.path, "shard", std::nullopt,
                "not in the manifest (a file of another model, or another manifest?)");
            continue;
        }
        const uint64_t size = s.file->size();
        if (size != ms->size)
            add(s.path, "file size", std::min(size, ms->size),
                fmt::format("{} bytes, the manifest says {}", with_commas(size), with_commas(ms->size)));
        if (bytes[i].sha256 != ms->sha256)
            add(s.path, "sha256", std::nullopt,
                fmt::format("{} differs from the manifest's {}", bytes[i].sha256, ms->sha256));
        if (!s.header) continue;
        std::unordered_map<std::string, const ManifestTensor*> by_name;
        for (const auto& t : ms->tensors) by_name.emplace(t.name, &t);
        for (size_t t = 0; t < s.header->tensors.size(); ++t) {
            const TensorInfo& ti = s.header->tensors[t];
            const std::string subject = fmt::format("tensor '{}' data", ti.name);
            const uint64_t abs = s.header->data_start + ti.offset;
            auto it = by_name.find(ti.name);
            if (it == by_name.end()) {
                add(s.path, subject, abs, "not in the manifest's list for this shard", ti.name);
                continue;
            }
            const ManifestTensor& mt = *it->second;
            by_name.erase(it);
            if (mt.offset != abs || mt.nbytes != ti.nbytes)
                add(s.path, subject, abs,
                    fmt::format("lies at [{}, +{}), the manifest says [{}, +{})", abs, ti.nbytes, mt.offset,
                                mt.nbytes),
                    ti.name);
            else if (bytes[i].tensor_sha256[t] != mt.sha256)
                add(s.path, subject, abs,
                    fmt::format(
                        "sha256 {} differs from the manifest's {} (the bytes changed somewhere in [{}, +{}); "
                        "an audit against the source names the first byte)",
                        bytes[i].tensor_sha256[t], mt.sha256, abs, ti.nbytes),
                    ti.name);
        }
        for (const auto& t : ms->tensors)
            if (by_name.count(t.name))
                add(s.path, fmt::format("tensor '{}'", t.name), std::nullopt,
                    "listed in the manifest for this shard but not in its header", t.name);
    }
    // Shards the manifest lists that are no position of this set at all.
    const std::string dir = std::filesystem::path(out.shards.front().path).parent_path().string();
    for (const auto& ms : m.shards)
        if (!found.count(ms.name))
            add(dir.empty() ? ms.name : dir + "/" + ms.name, "shard", std::nullopt,
                fmt::format("listed in the manifest ({} bytes) but not part of this set",
                            with_commas(ms.size)));
}

}  // namespace gguf_reap::audit_detail
