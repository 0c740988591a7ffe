// audit, manifests: build one from the hashes of a pass, or check a pass against one. Without the
// source there is no "first differing byte" to report: a tensor is named with where its payload starts.
#include <filesystem>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/version.h"
#include "io/sha256.h"
#include "io/units.h"
#include "model/moe_layout.h"
#include "ops/audit/audit_internal.h"

namespace gguf_reap::audit_detail {

namespace {

// A digest the byte pass printed (always 64 hex digits).
Sha256::Digest digest_of(const std::string& hex) {
    const auto d = sha256_from_hex(hex);
    if (!d) throw std::logic_error("audit: a pass hash is not a sha256: " + hex);
    return *d;
}

}  // namespace

Manifest build_manifest(const OutputSet& out, const std::vector<ShardBytes>& bytes) {
    Manifest m;
    m.tool = std::string(GGUF_REAP_TOOL);
    for (size_t i = 0; i < out.shards.size(); ++i) {
        const OutShard& s = out.shards[i];
        if (!s.file) continue;
        ManifestShard ms;
        ms.name = base_name(s.path);
        ms.size = s.file->size();
        ms.sha256 = bytes[i].sha256;
        const ShardBytes& b = bytes[i];
        if (s.header) {
            if (b.header.size() == s.header->infos_end) ms.header = b.header;
            for (size_t t = 0; t < s.header->tensors.size(); ++t) {
                const TensorInfo& ti = s.header->tensors[t];
                ManifestTensor mt;
                mt.name = ti.name;
                mt.offset = s.header->data_start + ti.offset;
                mt.nbytes = ti.nbytes;
                mt.sha256 = digest_of(b.tensor_sha256[t]);
                if (t < b.slab_sha256.size() && !b.slab_sha256[t].empty() &&
                    std::none_of(b.slab_sha256[t].begin(), b.slab_sha256[t].end(),
                                 [](const std::string& h) { return h.empty(); })) {
                    for (const std::string& h : b.slab_sha256[t]) mt.slabs.push_back(digest_of(h));
                    mt.slab_bytes = ti.nbytes / mt.slabs.size();
                }
                ms.tensors.push_back(std::move(mt));
            }
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
            else if (bytes[i].tensor_sha256[t] != to_hex(mt.sha256))
                add(s.path, subject, abs,
                    fmt::format(
                        "sha256 {} differs from the manifest's {} (the bytes changed somewhere in [{}, +{}); "
                        "an audit against the source names the first byte)",
                        bytes[i].tensor_sha256[t], to_hex(mt.sha256), abs, ti.nbytes),
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

std::vector<std::vector<uint64_t>> output_slab_bytes(const OutputSet& out, AuditReport& report) {
    if (!out.complete()) return {};
    std::vector<std::pair<std::string, Header>> headers;
    for (const OutShard& s : out.shards) headers.emplace_back(s.path, *s.header);
    try {
        const ShardSet set = ShardSet::from_headers(std::move(headers));
        const MoeLayout layout = build_moe_layout(set);
        std::vector<std::vector<uint64_t>> slabs(out.shards.size());
        for (size_t i = 0; i < out.shards.size(); ++i)
            slabs[i].assign(out.shards[i].header->tensors.size(), 0);
        for (const MoeBlock& b : layout.blocks)
            for (const ExpertTensor& et : b.tensors) {
                const TensorRef& r = set.tensors()[et.tensor];
                slabs[r.shard][r.index] = et.slab;
            }
        return slabs;
    } catch (const InputError& e) {
        report.notes.push_back(fmt::format(
            "the manifest records no per-expert slab hashes (it cannot serve as the source's manifest): {}",
            e.what()));
        return {};
    }
}

std::vector<Sha256::Digest> attach_source_hashes(Expectations& expect, const ShardSet& src, const Manifest& m,
                                                 const std::string& path) {
    size_t runs = 0;
    for (const auto& shard : expect)
        for (const auto& te : shard) runs += te.runs.size();
    std::vector<Sha256::Digest> hashes;
    hashes.reserve(runs);  // never reallocated below: the runs point into it
    auto point = [&](SourceRun& run, const Sha256::Digest& d) {
        hashes.push_back(d);
        run.sha256 = &hashes.back();
    };
    // Shard i of the set is manifest shard i (source_from_manifest built it so).
    std::vector<std::map<uint64_t, size_t>> by_offset(m.shards.size());
    for (size_t i = 0; i < m.shards.size(); ++i)
        for (size_t t = 0; t < m.shards[i].tensors.size(); ++t)
            if (m.shards[i].tensors[t].nbytes > 0)  // an empty tensor shares its offset with the next
                by_offset[i].emplace(m.shards[i].tensors[t].offset, t);
    for (auto& shard : expect)
        for (auto& te : shard)
            for (SourceRun& run : te.runs) {
                const auto& idx = by_offset.at(run.src_shard);
                auto it = idx.upper_bound(run.src_offset);
                if (it == idx.begin()) throw std::logic_error("attach_source_hashes: run before any tensor");
                --it;
                const ManifestTensor& mt = m.shards[run.src_shard].tensors[it->second];
                const uint64_t at = run.src_offset - mt.offset;
                if (at == 0 && run.length == mt.nbytes && run.expert < 0) {
                    point(run, mt.sha256);
                    continue;
                }
                auto field = [&] { return fmt::format("shards[{}].tensors[{}]", run.src_shard, it->second); };
                if (mt.slabs.empty())
                    throw InputError(path, std::nullopt, field(),
                                     fmt::format("'{}' is expert-indexed but its entry has no \"slabs\": the "
                                                 "manifest cannot vouch for expert {} alone",
                                                 mt.name, run.source_expert));
                if (at % mt.slab_bytes != 0 || run.length != mt.slab_bytes)
                    throw InputError(path, std::nullopt, field() + ".slab_bytes",
                                     fmt::format("'{}' has slabs of {} bytes, but its layout in {} makes "
                                                 "expert {}'s [{}, +{})",
                                                 mt.name, mt.slab_bytes, src.shards().front().path,
                                                 run.source_expert, run.src_offset, run.length));
                point(run, mt.slabs.at(at / mt.slab_bytes));
            }
    return hashes;
}

}  // namespace gguf_reap::audit_detail
