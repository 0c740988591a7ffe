#include "ops/manifest.h"

#include <sys/stat.h>

#include <unordered_set>

#include <fmt/format.h>

#include "format/json_input.h"
#include "io/error.h"
#include "io/output_file.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"

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
// four per tensor for 4 million tensors and bounds the parse to a few hundred MB.
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
    j["version"] = 1;
    j["tool"] = tool;
    json sh = json::array();
    for (const auto& s : shards) {
        json o;
        o["name"] = s.name;
        o["size"] = s.size;
        o["sha256"] = s.sha256;
        json ts = json::array();
        for (const auto& t : s.tensors)
            ts.push_back(
                {{"name", t.name}, {"offset", t.offset}, {"nbytes", t.nbytes}, {"sha256", t.sha256}});
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
    if (version != 1)
        bad(path, "version",
            fmt::format("manifest version {} is not supported (this gguf-reap reads version 1)", version));
    Manifest m;
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
            s.tensors.push_back(std::move(t));
        }
        m.shards.push_back(std::move(s));
    }
    return m;
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
