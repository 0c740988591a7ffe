// A manifest written, and turned into the model it records (include/gguf_reap/manifest.h); manifest_read.cpp
// reads one.
#include "gguf_reap/audit.h"
#include "gguf_reap/manifest.h"

#include <sys/stat.h>

#include <optional>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/base64.h"
#include "io/input_file.h"
#include "io/output_file.h"
#include "io/sha256.h"
#include "model/shard_set.h"
#include "services/manifest_file.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;

}  // namespace

const ManifestShard* Manifest::find_shard(std::string_view name) const {
    for (const auto& s : shards)
        if (s.name == name) return &s;
    return nullptr;
}

json Manifest::to_json() const {
    json j;
    j["format"] = kManifestFormat;
    j["version"] = kVersion;
    j["tool"] = tool;
    json sh = json::array();
    for (const auto& s : shards) {
        json o;
        o["name"] = s.name;
        o["size"] = s.size;
        o["sha256"] = s.sha256;
        if (!s.header.empty()) o["header"] = base64_encode(s.header);
        json ts = json::array();
        for (const auto& t : s.tensors) {
            json to{
                {"name", t.name}, {"offset", t.offset}, {"nbytes", t.nbytes}, {"sha256", to_hex(t.sha256)}};
            if (!t.slabs.empty()) {
                to["slab_bytes"] = t.slab_bytes;
                json& slabs = to["slabs"] = json::array();
                for (const Sha256::Digest& d : t.slabs) slabs.push_back(to_hex(d));
            }
            ts.push_back(std::move(to));
        }
        o["tensors"] = std::move(ts);
        sh.push_back(std::move(o));
    }
    j["shards"] = std::move(sh);
    return j;
}

std::string Manifest::sha256sum_text() const {
    std::string out;
    for (const auto& s : shards) out += s.sha256 + "  " + s.name + "\n";
    return out;
}

ShardSet manifest_model(const Manifest& m, const std::string& path) {
    if (m.version < 2)
        throw InputError(
            path, std::nullopt, "version",
            Message{fmt::format("a version {} manifest records no headers and no slab hashes, so "
                                "it cannot stand for the source: make one with `gguf-reap audit "
                                "SOURCE ",
                                m.version),
                    ops::AuditRequest::kManifestOut, " FILE`"});
    if (m.shards.empty()) throw InputError(path, std::nullopt, "shards", "lists no shard");
    std::vector<std::pair<std::string, Header>> headers;
    for (size_t i = 0; i < m.shards.size(); ++i) {
        const ManifestShard& ms = m.shards[i];
        const std::string at = fmt::format("shards[{}]", i);
        if (ms.header.empty())
            throw InputError(path, std::nullopt, at + ".header",
                             Message{fmt::format("missing: shard \"{}\" has no header recorded (a manifest "
                                                 "written with ",
                                                 ms.name),
                                     ops::AuditRequest::kManifestOut, " records one for every shard)"});
        // Named "MANIFEST:SHARD" in messages: the header's bytes are the manifest's copy of that shard's.
        ParseOptions po;
        po.require_data = false;
        Header h = parse_gguf_header(ms.header, path + ":" + ms.name, po);
        if (h.infos_end != ms.header.size())
            throw InputError(path, std::nullopt, at + ".header",
                             fmt::format("holds {} bytes, but the header it encodes ends at byte {}",
                                         ms.header.size(), h.infos_end));
        if (h.data_start + h.data_size > ms.size)
            throw InputError(path, std::nullopt, at + ".size",
                             fmt::format("{} bytes, but the shard's header puts tensor data up to byte {}",
                                         ms.size, h.data_start + h.data_size));
        if (h.tensors.size() != ms.tensors.size())
            throw InputError(
                path, std::nullopt, at + ".tensors",
                fmt::format("lists {} tensors, the shard's header {}", ms.tensors.size(), h.tensors.size()));
        for (size_t t = 0; t < h.tensors.size(); ++t) {
            const TensorInfo& ti = h.tensors[t];
            const ManifestTensor& mt = ms.tensors[t];
            if (mt.name != ti.name || mt.offset != h.data_start + ti.offset || mt.nbytes != ti.nbytes)
                throw InputError(
                    path, std::nullopt, fmt::format("{}.tensors[{}]", at, t),
                    fmt::format("'{}' at [{}, +{}) disagrees with the shard's header: '{}' at "
                                "[{}, +{})",
                                mt.name, mt.offset, mt.nbytes, ti.name, h.data_start + ti.offset, ti.nbytes));
        }
        headers.emplace_back(path + ":" + ms.name, std::move(h));
    }
    return ShardSet::from_headers(std::move(headers));
}

std::string manifest_sums_path(const std::string& json_path) {
    const std::string ext = ".json";
    if (json_path.size() > ext.size() &&
        json_path.compare(json_path.size() - ext.size(), ext.size(), ext) == 0)
        return json_path.substr(0, json_path.size() - ext.size()) + ".sha256";
    return json_path + ".sha256";
}

void check_manifest_destination(const std::string& path, const std::vector<std::string>& inputs, bool force) {
    for (const std::string& dest : {path, manifest_sums_path(path)}) {
        struct stat d {};
        if (::stat(dest.c_str(), &d) != 0) continue;  // does not exist yet
        for (const auto& in : inputs) {
            struct stat s {};
            if (::stat(in.c_str(), &s) == 0 && s.st_dev == d.st_dev && s.st_ino == d.st_ino)
                throw UsageError(fmt::format("{}: the manifest would overwrite an input ({})", dest, in));
        }
        if (!force)
            throw RequestError({dest + ": exists; pass ", ops::AuditRequest::kForce, " to replace it"});
    }
}

void save_manifest(const Manifest& m, const std::string& path) {
    OutputFile json_out(path);
    OutputFile sums_out(manifest_sums_path(path));
    save_manifest(m, json_out, sums_out);
}

void save_manifest(const Manifest& m, OutputFile& json_out, OutputFile& sums_out) {
    // Both files are complete under temporary names before either is renamed into place.
    const std::string text = m.to_json().dump(1) + "\n";
    const std::string sums = m.sha256sum_text();
    json_out.write_at(0, text.data(), text.size());
    sums_out.write_at(0, sums.data(), sums.size());
    json_out.commit();
    sums_out.commit();
}

}  // namespace gguf_reap
