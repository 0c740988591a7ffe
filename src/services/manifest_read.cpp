// Reading a manifest (include/gguf_reap/manifest.h): one SAX pass, checked as it goes, that never builds a
// tree of the slab hashes; manifest_file.cpp writes one and turns one into a model.
#include <iterator>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

#include "format/json_input.h"
#include "gguf_reap/error.h"
#include "gguf_reap/manifest.h"
#include "io/base64.h"
#include "io/input_file.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;

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
    if (format != kManifestFormat)
        bad(path, "format", fmt::format("is \"{}\", expected \"{}\"", format.substr(0, 60), kManifestFormat));
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

Manifest Manifest::load(const std::string& path) {
    const auto f = InputFile::open(path);
    check_small_file(*f, kMaxManifestBytes, "manifest");
    FileChars chars(*f);
    return read_manifest(FileCharIterator(chars), FileCharIterator(), path);
}

}  // namespace gguf_reap
