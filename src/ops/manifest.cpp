#include "ops/manifest.h"

#include <sys/stat.h>

#include <unordered_set>

#include <fmt/format.h>

#include "format/json_input.h"
#include "io/base64.h"
#include "io/error.h"
#include "io/output_file.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "model/shard_set.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;

constexpr const char* kFormat = "gguf-reap.manifest";
// A manifest holds ~150 bytes per tensor: 256 MiB is room for over a million tensors.
constexpr uint64_t kMaxManifestBytes = 256ull << 20;
// The schema nests 4 levels; anything much deeper is not a manifest (and deep nesting is how a hostile
// document makes a recursive reader overflow its stack).
constexpr int kMaxDepth = 16;
// Each parsed value costs nlohmann 16+ bytes: 256 MiB of "0," would take ~5 GB. 16 million values is
// four per tensor for 4 million tensors (or a slab hash for each of 16 million expert slabs) and bounds
// the parse to a few hundred MB.
constexpr size_t kMaxValues = size_t{16} << 20;

[[noreturn]] void bad(const std::string& path, const std::string& field, const std::string& msg) {
    throw InputError(path, std::nullopt, field, msg);
}

const json& member(const json& o, const char* key, const std::string& path, const std::string& at) {
    if (!o.is_object()) bad(path, at, "must be an object");
    if (!o.contains(key)) bad(path, at, fmt::format("missing \"{}\"", key));
    return o[key];
}

uint64_t get_uint(const json& v, const std::string& path, const std::string& at) {
    if (!v.is_number_unsigned())
        bad(path, at, fmt::format("must be a non-negative integer, found {}", v.dump().substr(0, 40)));
    return v.get<uint64_t>();
}

std::string get_string(const json& v, const std::string& path, const std::string& at) {
    if (!v.is_string()) bad(path, at, fmt::format("must be a string, found {}", v.dump().substr(0, 40)));
    return v.get<std::string>();
}

std::string get_sha(const json& v, const std::string& path, const std::string& at) {
    std::string s = get_string(v, path, at);
    if (!is_sha256_hex(s))
        bad(path, at, fmt::format("\"{}\" is not a sha256 (64 lower-case hex digits)", s.substr(0, 70)));
    return s;
}

// A shard name is a bare file name: a manifest must never steer the verifier to another directory.
std::string get_file_name(const json& v, const std::string& path, const std::string& at) {
    std::string s = get_string(v, path, at);
    if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos ||
        s.find('\0') != std::string::npos || s.find('\n') != std::string::npos)
        bad(path, at, fmt::format("\"{}\" is not a plain file name", s.substr(0, 70)));
    return s;
}

}  // namespace

const ManifestShard* Manifest::find_shard(std::string_view name) const {
    for (const auto& s : shards)
        if (s.name == name) return &s;
    return nullptr;
}

json Manifest::to_json() const {
    json j;
    j["format"] = kFormat;
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
            json to{{"name", t.name}, {"offset", t.offset}, {"nbytes", t.nbytes}, {"sha256", t.sha256}};
            if (!t.slabs.empty()) {
                to["slab_bytes"] = t.slab_bytes;
                to["slabs"] = t.slabs;
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

Manifest Manifest::parse(const std::string& text, const std::string& path) {
    const json j = parse_json_input<json>(text, path, kMaxDepth, kMaxValues, "a manifest");
    if (!j.is_object()) bad(path, "json", "a manifest must be a JSON object");
    const std::string format = get_string(member(j, "format", path, "json"), path, "format");
    if (format != kFormat)
        bad(path, "format", fmt::format("is \"{}\", expected \"{}\"", format.substr(0, 60), kFormat));
    const uint64_t version = get_uint(member(j, "version", path, "json"), path, "version");
    if (version != 1 && version != 2)
        bad(path, "version",
            fmt::format("manifest version {} is not supported (this gguf-reap reads versions 1 and 2)",
                        version));
    Manifest m;
    m.version = static_cast<int>(version);
    if (j.contains("tool")) m.tool = get_string(j["tool"], path, "tool");
    const json& shards = member(j, "shards", path, "json");
    if (!shards.is_array()) bad(path, "shards", "must be an array");
    std::unordered_set<std::string> shard_names;
    for (size_t i = 0; i < shards.size(); ++i) {
        const std::string at = fmt::format("shards[{}]", i);
        const json& sj = shards[i];
        ManifestShard s;
        s.name = get_file_name(member(sj, "name", path, at), path, at + ".name");
        if (!shard_names.insert(s.name).second)
            bad(path, at + ".name", fmt::format("shard \"{}\" is listed twice", s.name));
        s.size = get_uint(member(sj, "size", path, at), path, at + ".size");
        s.sha256 = get_sha(member(sj, "sha256", path, at), path, at + ".sha256");
        if (version >= 2 && sj.contains("header")) {
            auto h = base64_decode(get_string(sj["header"], path, at + ".header"));
            if (!h) bad(path, at + ".header", "is not base64 (RFC 4648, padded, no line breaks)");
            if (h->empty() || h->size() > s.size)
                bad(path, at + ".header",
                    fmt::format("holds {} bytes: a shard's header is at least one byte and at most its "
                                "size ({})",
                                h->size(), s.size));
            s.header = std::move(*h);
        }
        const json& ts = member(sj, "tensors", path, at);
        if (!ts.is_array()) bad(path, at + ".tensors", "must be an array");
        std::unordered_set<std::string> names;
        for (size_t k = 0; k < ts.size(); ++k) {
            const std::string tat = fmt::format("{}.tensors[{}]", at, k);
            ManifestTensor t;
            t.name = get_string(member(ts[k], "name", path, tat), path, tat + ".name");
            if (!names.insert(t.name).second)
                bad(path, tat + ".name", fmt::format("tensor \"{}\" is listed twice", t.name));
            t.offset = get_uint(member(ts[k], "offset", path, tat), path, tat + ".offset");
            t.nbytes = get_uint(member(ts[k], "nbytes", path, tat), path, tat + ".nbytes");
            t.sha256 = get_sha(member(ts[k], "sha256", path, tat), path, tat + ".sha256");
            if (version >= 2 && ts[k].contains("slabs")) {
                t.slab_bytes = get_uint(member(ts[k], "slab_bytes", path, tat), path, tat + ".slab_bytes");
                const json& sl = ts[k]["slabs"];
                if (!sl.is_array() || sl.empty()) bad(path, tat + ".slabs", "must be a non-empty array");
                if (t.slab_bytes == 0 || t.nbytes / t.slab_bytes != sl.size() || t.nbytes % t.slab_bytes != 0)
                    bad(path, tat + ".slabs",
                        fmt::format("{} slabs of {} bytes do not make the tensor's {} bytes", sl.size(),
                                    t.slab_bytes, t.nbytes));
                t.slabs.reserve(sl.size());
                for (size_t e = 0; e < sl.size(); ++e)
                    t.slabs.push_back(get_sha(sl[e], path, fmt::format("{}.slabs[{}]", tat, e)));
            }
            s.tensors.push_back(std::move(t));
        }
        m.shards.push_back(std::move(s));
    }
    return m;
}

ShardSet manifest_model(const Manifest& m, const std::string& path) {
    if (m.version < 2)
        throw InputError(path, std::nullopt, "version",
                         fmt::format("a version {} manifest records no headers and no slab hashes, so it "
                                     "cannot stand for the source: make one with `gguf-reap audit SOURCE "
                                     "--manifest-out FILE`",
                                     m.version));
    if (m.shards.empty()) throw InputError(path, std::nullopt, "shards", "lists no shard");
    std::vector<std::pair<std::string, Header>> headers;
    for (size_t i = 0; i < m.shards.size(); ++i) {
        const ManifestShard& ms = m.shards[i];
        const std::string at = fmt::format("shards[{}]", i);
        if (ms.header.empty())
            throw InputError(path, std::nullopt, at + ".header",
                             fmt::format("missing: shard \"{}\" has no header recorded (a manifest written "
                                         "with --manifest-out records one for every shard)",
                                         ms.name));
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

Manifest Manifest::load(const std::string& path) {
    const std::string text = read_small_file(path, kMaxManifestBytes, "manifest");
    return parse(text, path);
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
        if (!force) throw UsageError(fmt::format("{}: exists; pass --force to replace it", dest));
    }
}

void save_manifest(const Manifest& m, const std::string& path) {
    // Both files are complete under temporary names before either is renamed into place.
    const std::string text = m.to_json().dump(1) + "\n";
    const std::string sums = m.sha256sum_text();
    OutputFile json_out(path);
    json_out.write_at(0, text.data(), text.size());
    OutputFile sums_out(manifest_sums_path(path));
    sums_out.write_at(0, sums.data(), sums.size());
    json_out.commit();
    sums_out.commit();
}

}  // namespace gguf_reap
