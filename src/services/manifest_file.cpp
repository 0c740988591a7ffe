#include "gguf_reap/manifest.h"

#include <sys/stat.h>

#include <iterator>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

#include "format/json_input.h"
#include "gguf_reap/error.h"
#include "io/base64.h"
#include "io/input_file.h"
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

[[noreturn]] void not_a_sha(const std::string& s, const std::string& path, const std::string& at) {
    bad(path, at, fmt::format("\"{}\" is not a sha256 (64 lower-case hex digits)", s.substr(0, 70)));
}

std::string get_sha_hex(const json& v, const std::string& path, const std::string& at) {
    std::string s = get_string(v, path, at);
    if (!is_sha256_hex(s)) not_a_sha(s, path, at);
    return s;
}

Sha256::Digest get_sha(const json& v, const std::string& path, const std::string& at) {
    const std::string s = get_string(v, path, at);
    const auto d = sha256_from_hex(s);
    if (!d) not_a_sha(s, path, at);
    return *d;
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

namespace {

// ---- reading: one SAX pass, no tree of the slab hashes -------------------------------------------
// A manifest of a Kimi-K3-shaped model holds 412,160 slab hashes in 31 MB of text; parsed whole, as
// text plus a DOM of strings, they took 140 MiB. The reader streams the file through nlohmann's SAX
// interface and builds a DOM of everything but the slab arrays (a few hundred bytes per tensor): each
// array at shards[i].tensors[k].slabs becomes 32-byte digests as its strings arrive, and the DOM holds
// a binary value in its place (JSON text cannot make one) that names the list. The checks below then
// walk the DOM as they always did, so each message, and which of two faults is named, stay the same.

// One slabs array as it was read.
struct SlabList {
    std::vector<Sha256::Digest> digests;  // the elements before the first one that is not a sha256
    size_t count = 0;                     // every element
    std::optional<size_t> first_bad;      // the first element that is not a sha256 string,
    json bad;                             // as a value (for its message)
};

// Builds a DOM from SAX events: what nlohmann's own SAX DOM parser does.
class DomBuilder {
  public:
    void add(json v) { place(std::move(v)); }
    void open(json empty) { stack_.push_back(place(std::move(empty))); }
    void close() { stack_.pop_back(); }
    void key(std::string k) { key_ = std::move(k); }
    json take() { return std::move(root_); }

  private:
    json* place(json v) {
        if (stack_.empty()) {
            root_ = std::move(v);
            return &root_;
        }
        json& top = *stack_.back();
        if (top.is_array()) {
            top.push_back(std::move(v));
            return &top.back();
        }
        json& slot = top[key_];  // a repeated key: the last one wins, as in nlohmann's parser
        slot = std::move(v);
        return &slot;
    }

    json root_;
    std::vector<json*> stack_;  // the open containers; only the innermost one grows
    std::string key_;
};

class ManifestSax {
  public:
    explicit ManifestSax(const std::string& path)
        : path_(path), limits_{path, kMaxDepth, kMaxValues, "a manifest"} {}

    json take_dom() { return dom_.take(); }
    std::vector<SlabList>& slab_lists() { return slabs_; }

    bool null() { return primitive(json(nullptr)); }
    bool boolean(bool v) { return primitive(json(v)); }
    bool number_integer(json::number_integer_t v) { return primitive(json(v)); }
    bool number_unsigned(json::number_unsigned_t v) { return primitive(json(v)); }
    bool number_float(json::number_float_t v, const std::string&) { return primitive(json(v)); }
    bool binary(json::binary_t&) { return true; }  // JSON text has none
    bool string(std::string& v) {
        if (depth_ == slab_depth_ && slab_depth_ > 0) {  // an element of a slabs array: no json value
            limits_.at_depth(depth_);
            limits_.count_value();
            SlabList& list = slabs_.back();
            const size_t i = list.count++;
            if (list.first_bad) return true;
            if (auto d = sha256_from_hex(v)) {
                list.digests.push_back(*d);
            } else {
                list.first_bad = i;
                list.bad = std::move(v);
            }
            return true;
        }
        return primitive(json(std::move(v)));
    }
    bool key(std::string& k) {
        limits_.at_depth(depth_);
        if (slab_depth_ > 0) {
            if (building_bad_) bad_.key(k);
            return true;
        }
        pending_key_ = k;
        dom_.key(std::move(k));
        return true;
    }
    bool start_object(std::size_t) { return open(json::object(), false); }
    bool start_array(std::size_t) { return open(json::array(), true); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) {
        throw_json_input_error(path_, e);
    }

  private:
    // shards[i].tensors[k].slabs: the key "slabs" in an object 5 containers deep, reached through the
    // keys "shards" and "tensors" (`frames_` holds the key each open container was opened under).
    bool at_slabs() const {
        return depth_ == 5 && pending_key_ == "slabs" && frames_[1] == "shards" && frames_[3] == "tensors" &&
               !frame_is_array_[0] && frame_is_array_[1] && !frame_is_array_[2] && frame_is_array_[3] &&
               !frame_is_array_[4];
    }

    bool primitive(json v) {
        limits_.at_depth(depth_);
        limits_.count_value();
        if (slab_depth_ == 0) {
            dom_.add(std::move(v));
        } else if (depth_ == slab_depth_) {  // a slabs element that is not a string
            SlabList& list = slabs_.back();
            const size_t i = list.count++;
            if (!list.first_bad) {
                list.first_bad = i;
                list.bad = std::move(v);
            }
        } else if (building_bad_) {
            bad_.add(std::move(v));
        }
        return true;
    }

    bool open(json empty, bool is_array) {
        limits_.at_depth(depth_);
        if (slab_depth_ > 0) {
            if (depth_ == slab_depth_) {  // a container as a slabs element: the first one is kept whole
                SlabList& list = slabs_.back();
                const size_t i = list.count++;
                building_bad_ = !list.first_bad;
                if (building_bad_) list.first_bad = i;
            }
            if (building_bad_) bad_.open(std::move(empty));
        } else if (is_array && at_slabs()) {
            dom_.add(json::binary({}, slabs_.size()));
            // Every expert-indexed tensor of a model has as many slabs: room for the last list's count.
            const size_t hint = slabs_.empty() ? 0 : slabs_.back().count;
            slabs_.emplace_back().digests.reserve(hint);
            slab_depth_ = depth_ + 1;
        } else {
            dom_.open(std::move(empty));
            frames_.push_back(frames_.empty() || frame_is_array_.back() ? std::string() : pending_key_);
            frame_is_array_.push_back(is_array);
        }
        ++depth_;
        return true;
    }

    bool close() {
        --depth_;
        if (slab_depth_ > 0) {
            if (depth_ + 1 == slab_depth_) {
                slab_depth_ = 0;  // the slabs array itself
                slabs_.back().digests.shrink_to_fit();
            } else if (building_bad_) {
                bad_.close();
                if (depth_ == slab_depth_) {
                    slabs_.back().bad = bad_.take();
                    building_bad_ = false;
                }
            }
            return true;
        }
        dom_.close();
        frames_.pop_back();
        frame_is_array_.pop_back();
        return true;
    }

    const std::string& path_;
    JsonLimits limits_;
    DomBuilder dom_;
    std::vector<SlabList> slabs_;
    int depth_ = 0;              // containers open
    int slab_depth_ = 0;         // inside a slabs array: the depth of its elements; 0 outside
    bool building_bad_ = false;  // inside the first container element of a slabs array
    DomBuilder bad_;
    std::string pending_key_;
    std::vector<std::string> frames_;
    std::vector<bool> frame_is_array_;
};

// The bytes of a file, front to back, as nlohmann's parser takes them: an input iterator over one
// SequentialReader of 1 MiB (an interrupt is checked at each refill).
class FileChars {
  public:
    explicit FileChars(const InputFile& f) : reader_(f, size_t{1} << 20), size_(f.size()) { refill(); }
    bool done() const { return pos_ >= size_; }
    const char& current() const { return view_[pos_ - view_at_]; }
    void advance() {
        if (++pos_ < size_ && pos_ - view_at_ >= view_.size()) refill();
    }

  private:
    void refill() {
        if (done()) return;
        check_interrupted();
        const auto v = reader_.view(pos_, size_ - pos_, size_);
        view_ = {reinterpret_cast<const char*>(v.data()), v.size()};
        view_at_ = pos_;
    }

    SequentialReader reader_;
    uint64_t size_;
    uint64_t pos_ = 0;
    uint64_t view_at_ = 0;
    std::span<const char> view_;
};

class FileCharIterator {
  public:
    using iterator_category = std::input_iterator_tag;
    using value_type = char;
    using difference_type = std::ptrdiff_t;
    using pointer = const char*;
    using reference = const char&;

    FileCharIterator() = default;  // the end
    explicit FileCharIterator(FileChars& chars) : chars_(&chars) {}
    reference operator*() const { return chars_->current(); }
    FileCharIterator& operator++() {
        chars_->advance();
        return *this;
    }
    bool operator==(const FileCharIterator& o) const { return at_end() == o.at_end(); }
    bool operator!=(const FileCharIterator& o) const { return !(*this == o); }

  private:
    bool at_end() const { return !chars_ || chars_->done(); }
    FileChars* chars_ = nullptr;
};

ManifestTensor parse_tensor(const json& tj, uint64_t version, std::vector<SlabList>& slabs,
                            const std::string& path, const std::string& tat) {
    ManifestTensor t;
    t.name = get_string(member(tj, "name", path, tat), path, tat + ".name");
    t.offset = get_uint(member(tj, "offset", path, tat), path, tat + ".offset");
    t.nbytes = get_uint(member(tj, "nbytes", path, tat), path, tat + ".nbytes");
    t.sha256 = get_sha(member(tj, "sha256", path, tat), path, tat + ".sha256");
    if (version < 2 || !tj.contains("slabs")) return t;
    t.slab_bytes = get_uint(member(tj, "slab_bytes", path, tat), path, tat + ".slab_bytes");
    const json& sl = tj["slabs"];
    // The reader put each slabs array it could in a SlabList; anything else is not a non-empty array.
    SlabList* list = sl.is_binary() ? &slabs.at(sl.get_binary().subtype()) : nullptr;
    if (!list || list->count == 0) bad(path, tat + ".slabs", "must be a non-empty array");
    if (t.slab_bytes == 0 || t.nbytes / t.slab_bytes != list->count || t.nbytes % t.slab_bytes != 0)
        bad(path, tat + ".slabs",
            fmt::format("{} slabs of {} bytes do not make the tensor's {} bytes", list->count, t.slab_bytes,
                        t.nbytes));
    if (list->first_bad) get_sha(list->bad, path, fmt::format("{}.slabs[{}]", tat, *list->first_bad));
    t.slabs = std::move(list->digests);
    return t;
}

ManifestShard parse_shard(const json& sj, uint64_t version, std::vector<SlabList>& slabs,
                          const std::string& path, const std::string& at) {
    ManifestShard s;
    s.name = get_file_name(member(sj, "name", path, at), path, at + ".name");
    s.size = get_uint(member(sj, "size", path, at), path, at + ".size");
    s.sha256 = get_sha_hex(member(sj, "sha256", path, at), path, at + ".sha256");
    if (version >= 2 && sj.contains("header")) {
        auto h = base64_decode(get_string(sj["header"], path, at + ".header"));
        if (!h) bad(path, at + ".header", "is not base64 (RFC 4648, padded, no line breaks)");
        if (h->empty() || h->size() > s.size)
            bad(path, at + ".header",
                fmt::format("holds {} bytes: a shard's header is at least one byte and at most its size ({})",
                            h->size(), s.size));
        s.header = std::move(*h);
    }
    const json& ts = member(sj, "tensors", path, at);
    if (!ts.is_array()) bad(path, at + ".tensors", "must be an array");
    std::unordered_set<std::string> names;
    for (size_t k = 0; k < ts.size(); ++k) {
        const std::string tat = fmt::format("{}.tensors[{}]", at, k);
        // The name is checked for repeats before the rest of the entry.
        const std::string name = get_string(member(ts[k], "name", path, tat), path, tat + ".name");
        if (!names.insert(name).second)
            bad(path, tat + ".name", fmt::format("tensor \"{}\" is listed twice", name));
        s.tensors.push_back(parse_tensor(ts[k], version, slabs, path, tat));
    }
    return s;
}

// The checks of every field, in the order they were always made, on the DOM ManifestSax built.
Manifest from_dom(const json& j, std::vector<SlabList>& slabs, const std::string& path) {
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
        // The name is checked for repeats before the rest of the shard.
        const std::string name = get_file_name(member(shards[i], "name", path, at), path, at + ".name");
        if (!shard_names.insert(name).second)
            bad(path, at + ".name", fmt::format("shard \"{}\" is listed twice", name));
        m.shards.push_back(parse_shard(shards[i], version, slabs, path, at));
    }
    return m;
}

template <typename It>
Manifest read_manifest(It first, It last, const std::string& path) {
    ManifestSax sax(path);
    json::sax_parse(first, last, &sax);
    return from_dom(sax.take_dom(), sax.slab_lists(), path);
}

}  // namespace

Manifest Manifest::parse(const std::string& text, const std::string& path) {
    return read_manifest(text.data(), text.data() + text.size(), path);
}

ShardSet manifest_model(const Manifest& m, const std::string& path) {
    if (m.version < 2)
        throw InputError(
            path, std::nullopt, "version",
            Message{fmt::format("a version {} manifest records no headers and no slab hashes, so "
                                "it cannot stand for the source: make one with `gguf-reap audit "
                                "SOURCE ",
                                m.version),
                    RequestField::kManifestOut, " FILE`"});
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
                                     RequestField::kManifestOut, " records one for every shard)"});
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
    const auto f = InputFile::open(path);
    check_small_file(*f, kMaxManifestBytes, "manifest");
    FileChars chars(*f);
    return read_manifest(FileCharIterator(chars), FileCharIterator(), path);
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
        if (!force) throw RequestError({dest + ": exists; pass ", RequestField::kForce, " to replace it"});
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
