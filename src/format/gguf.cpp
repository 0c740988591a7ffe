#include "format/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <unordered_set>

#include <fmt/format.h>

#include "format/cursor.h"
#include "format/ggml_types.h"
#include "format/le_bytes.h"
#include "gguf_reap/error.h"
#include "io/checked.h"

namespace gguf_reap {

using le::append_le;
using le::append_string;
using le::load_le;

namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
// Smallest possible encodings, used to refuse counts the rest of the file cannot hold before any
// allocation: a kv is key length (8) + one key byte + type (4) + one value byte; a tensor info is
// name length (8) + n_dims (4) + type (4) + offset (8).
constexpr uint64_t kMinKvBytes = 14;
constexpr uint64_t kMinTensorInfoBytes = 24;
// The counts above are bounded by the bytes left in the whole file, tensor data included, so a
// 100 GB model with a forged n_kv could still pass them; reserving that many ~100-byte Kv objects up
// front would ask for terabytes. Reserve at most this many and let the vectors grow with what the
// header really holds (each element then costs bytes that were actually read).
constexpr uint64_t kMaxReserve = 4096;

bool valid_type(int32_t t) {
    return t >= 0 && t < kGgufTypeCount;
}

// Reads a GGUF string (u64 length + bytes) with ggml's limits; returns the bytes.
std::string read_string(Cursor& c, Field field) {
    const uint64_t at = c.pos();
    const uint64_t len = c.read_le<uint64_t>([&] { return field.str() + " length"; });
    if (len > kGgufMaxStringLength)
        throw InputError(c.path(), at, field.str(),
                         fmt::format("string length {} exceeds the 1 GiB limit ggml enforces", len));
    if (len > c.remaining())
        throw InputError(c.path(), at, field.str(),
                         fmt::format("string of {} bytes runs past the end of the file ({} bytes left)", len,
                                     c.remaining()));
    std::string s(len, '\0');
    c.read(s.data(), len, field);
    return s;
}

void read_value(Cursor& c, Kv& kv, Field field) {
    const auto type = kv.type;
    if (type == GgufType::kString) {
        std::string s = read_string(c, field);
        kv.raw.reserve(8 + s.size());
        append_string(kv.raw, s);
        return;
    }
    if (type != GgufType::kArray) {
        const size_t n = gguf_scalar_size(type);
        kv.raw.resize(n);
        c.read(kv.raw.data(), n, field);
        return;
    }
    const uint64_t elem_at = c.pos();
    const int32_t et = c.read_le<int32_t>([&] { return field.str() + " element type"; });
    if (et == static_cast<int32_t>(GgufType::kArray))
        throw InputError(c.path(), elem_at, field.str(), "nested arrays are not supported by ggml");
    if (!valid_type(et))
        throw InputError(c.path(), elem_at, field.str(), fmt::format("invalid array element type {}", et));
    const uint64_t count_at = c.pos();
    const uint64_t count = c.read_le<uint64_t>([&] { return field.str() + " element count"; });
    if (count > kGgufMaxArrayElements)
        throw InputError(c.path(), count_at, field.str(),
                         fmt::format("array of {} elements exceeds the 2^30 limit ggml enforces", count));
    kv.elem_type = static_cast<GgufType>(et);
    kv.count = count;
    append_le<int32_t>(kv.raw, et);
    append_le<uint64_t>(kv.raw, count);
    if (kv.elem_type == GgufType::kString) {
        // Each element is at least its 8-byte length.
        if (count > c.remaining() / 8)
            throw InputError(
                c.path(), count_at, field.str(),
                fmt::format("array of {} strings cannot fit in the {} bytes left", count, c.remaining()));
        for (uint64_t i = 0; i < count; ++i) {
            std::string s = read_string(c, [&] { return fmt::format("{}[{}]", field.str(), i); });
            append_string(kv.raw, s);
        }
        return;
    }
    const uint64_t esize = gguf_scalar_size(kv.elem_type);
    if (count > c.remaining() / esize)
        throw InputError(c.path(), count_at, field.str(),
                         fmt::format("array of {} × {} bytes runs past the end of the file ({} bytes left)",
                                     count, esize, c.remaining()));
    const size_t head = kv.raw.size();
    kv.raw.resize(head + count * esize);
    c.read(kv.raw.data() + head, count * esize, field);
}

std::string tensor_field(size_t i, const std::string& name, const std::string& what) {
    return fmt::format("tensor #{} '{}' {}", i, name, what);
}

}  // namespace

std::string gguf_type_name(GgufType t) {
    switch (t) {
        case GgufType::kUint8:
            return "u8";
        case GgufType::kInt8:
            return "i8";
        case GgufType::kUint16:
            return "u16";
        case GgufType::kInt16:
            return "i16";
        case GgufType::kUint32:
            return "u32";
        case GgufType::kInt32:
            return "i32";
        case GgufType::kFloat32:
            return "f32";
        case GgufType::kBool:
            return "bool";
        case GgufType::kString:
            return "str";
        case GgufType::kArray:
            return "arr";
        case GgufType::kUint64:
            return "u64";
        case GgufType::kInt64:
            return "i64";
        case GgufType::kFloat64:
            return "f64";
    }
    return fmt::format("type{}", static_cast<int32_t>(t));
}

size_t gguf_scalar_size(GgufType t) {
    switch (t) {
        case GgufType::kUint8:
        case GgufType::kInt8:
        case GgufType::kBool:
            return 1;
        case GgufType::kUint16:
        case GgufType::kInt16:
            return 2;
        case GgufType::kUint32:
        case GgufType::kInt32:
        case GgufType::kFloat32:
            return 4;
        case GgufType::kUint64:
        case GgufType::kInt64:
        case GgufType::kFloat64:
            return 8;
        case GgufType::kString:
        case GgufType::kArray:
            return 0;
    }
    return 0;
}

uint64_t TensorInfo::n_elements() const {
    uint64_t n = 1;
    for (int64_t d : ne) n *= static_cast<uint64_t>(d);
    return n;
}

const Kv* Header::find(std::string_view key) const {
    for (const auto& kv : kvs)
        if (kv.key == key) return &kv;
    return nullptr;
}

// ---- parser ---------------------------------------------------------------------------------------

Header parse_gguf_header(const InputFile& file, const ParseOptions& opts) {
    FileSource src(file);
    return parse_gguf_header(src, opts);
}

Header parse_gguf_header(std::span<const uint8_t> bytes, const std::string& name, const ParseOptions& opts) {
    SpanSource src(bytes, name);
    return parse_gguf_header(src, opts);
}

namespace {

// 1-3: magic and version (2 or 3, little-endian).
uint32_t read_magic_and_version(Cursor& c, const ByteSource& file) {
    char magic[4];
    c.read(magic, 4, "magic");
    if (std::memcmp(magic, kMagic, 4) != 0) {
        std::string shown;
        for (char ch : magic)
            shown += (ch >= 0x20 && ch < 0x7f) ? std::string(1, ch)
                                               : fmt::format("\\x{:02x}", static_cast<unsigned char>(ch));
        throw InputError(file.name(), 0, "magic",
                         fmt::format("not a GGUF file (starts with \"{}\", expected \"GGUF\")", shown));
    }
    const uint32_t version = c.read_le<uint32_t>("version");
    if (version == 0) throw InputError(file.name(), 4, "version", "GGUF version 0 is invalid");
    if ((version & 0x0000FFFFu) == 0)
        throw InputError(
            file.name(), 4, "version",
            fmt::format("version field 0x{:08x} is byte-swapped: this is a big-endian GGUF file, "
                        "which gguf-reap does not read (convert it with gguf_convert_endian.py)",
                        version));
    if (version == 1)
        throw InputError(file.name(), 4, "version",
                         "GGUFv1 is no longer supported (ggml removed it in 2023); re-convert the model");
    if (version > 3)
        throw InputError(file.name(), 4, "version",
                         fmt::format("GGUF version {} is newer than this tool supports (2 and 3)", version));
    return version;
}

struct Counts {
    int64_t n_tensors = 0, n_kv = 0;
};

// 4: counts, checked against what the rest of the file can hold before anything is allocated.
Counts read_counts(Cursor& c, const ByteSource& file) {
    Counts n;
    n.n_tensors = c.read_le<int64_t>("n_tensors");
    if (n.n_tensors < 0)
        throw InputError(file.name(), 8, "n_tensors", fmt::format("negative tensor count {}", n.n_tensors));
    n.n_kv = c.read_le<int64_t>("n_kv");
    if (n.n_kv < 0)
        throw InputError(file.name(), 16, "n_kv", fmt::format("negative key/value count {}", n.n_kv));
    if (static_cast<uint64_t>(n.n_kv) > c.remaining() / kMinKvBytes)
        throw InputError(
            file.name(), 16, "n_kv",
            fmt::format("{} key/value pairs cannot fit in the {} bytes left", n.n_kv, c.remaining()));
    if (static_cast<uint64_t>(n.n_tensors) > c.remaining() / kMinTensorInfoBytes)
        throw InputError(
            file.name(), 8, "n_tensors",
            fmt::format("{} tensor infos cannot fit in the {} bytes left", n.n_tensors, c.remaining()));
    return n;
}

// 5-9: key/value pairs, keys unique and non-empty.
void read_kvs(Cursor& c, const ByteSource& file, int64_t n_kv, Header& h) {
    h.kvs.reserve(static_cast<size_t>(std::min<uint64_t>(static_cast<uint64_t>(n_kv), kMaxReserve)));
    std::unordered_set<std::string> keys;
    for (int64_t i = 0; i < n_kv; ++i) {
        Kv kv;
        kv.file_offset = c.pos();
        const auto kfield = [i] { return fmt::format("kv #{} key", i); };
        kv.key = read_string(c, kfield);
        if (kv.key.empty()) throw InputError(file.name(), kv.file_offset, kfield(), "empty key");
        if (!keys.insert(kv.key).second)
            throw InputError(file.name(), kv.file_offset, fmt::format("kv #{} '{}'", i, kv.key),
                             "duplicate key");
        const uint64_t type_at = c.pos();
        const auto vfield = [&kv] { return fmt::format("kv '{}'", kv.key); };
        const int32_t t = c.read_le<int32_t>([&] { return vfield() + " type"; });
        if (!valid_type(t))
            throw InputError(file.name(), type_at, vfield(), fmt::format("invalid value type {}", t));
        kv.type = static_cast<GgufType>(t);
        read_value(c, kv, vfield);
        h.kvs.push_back(std::move(kv));
    }
}

// 13: alignment: general.alignment (u32, a non-zero power of two) or the default.
void read_alignment(const ByteSource& file, Header& h) {
    const Kv* a = h.find("general.alignment");
    if (!a) return;
    if (a->type != GgufType::kUint32)
        throw InputError(file.name(), a->file_offset, "kv 'general.alignment'",
                         fmt::format("must be of type u32, found {}", gguf_type_name(a->type)));
    const uint32_t v = static_cast<uint32_t>(*a->as_uint());
    if (v == 0 || (v & (v - 1)) != 0)
        throw InputError(file.name(), a->file_offset, "kv 'general.alignment'",
                         fmt::format("alignment {} is not a non-zero power of two", v));
    h.alignment = v;
}

// 10, one tensor's dimensions: at most kGgmlMaxDims, none negative, the element count within int64.
// Returns whether one of them is 0 (an empty tensor).
bool read_dims(Cursor& c, const ByteSource& file, size_t idx, uint64_t dims_at, TensorInfo& t) {
    t.n_dims = c.read_le<uint32_t>([&] { return tensor_field(idx, t.name, "n_dims"); });
    if (t.n_dims > static_cast<uint32_t>(kGgmlMaxDims))
        throw InputError(file.name(), dims_at, tensor_field(idx, t.name, "n_dims"),
                         fmt::format("{} dimensions (ggml allows at most {})", t.n_dims, kGgmlMaxDims));
    for (uint32_t d = 0; d < t.n_dims; ++d) {
        const uint64_t ne_at = c.pos();
        const auto f = [&] { return tensor_field(idx, t.name, fmt::format("ne[{}]", d)); };
        t.ne[d] = c.read_le<int64_t>(f);
        if (t.ne[d] < 0)
            throw InputError(file.name(), ne_at, f(), fmt::format("negative dimension {}", t.ne[d]));
    }
    // Element count must fit in int64 (ggml: INT64_MAX/ne[1] <= ne[0] ... checks).
    uint64_t nel = 1;
    bool zero = false;
    for (int64_t d : t.ne) zero |= d == 0;
    if (zero) return true;
    for (int64_t d : t.ne) {
        auto m = checked_mul(nel, static_cast<uint64_t>(d));
        if (!m || *m > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            throw InputError(file.name(), dims_at, tensor_field(idx, t.name, "ne"),
                             "element count overflows int64");
        nel = *m;
    }
    return false;
}

// 10, one tensor's type: known, still supported, whole blocks per row; then its byte size.
void read_type(Cursor& c, const ByteSource& file, size_t idx, uint64_t dims_at, bool zero, TensorInfo& t) {
    const uint64_t type_at = c.pos();
    const auto tfield = [&] { return tensor_field(idx, t.name, "type"); };
    t.type = c.read_le<int32_t>(tfield);
    const GgmlType* gt = ggml_type(t.type);
    if (!gt) throw InputError(file.name(), type_at, tfield(), fmt::format("unknown ggml type id {}", t.type));
    if (gt->block_size == 0)
        throw InputError(file.name(), type_at, tfield(),
                         fmt::format("ggml type id {} is no longer supported: {}", t.type, gt->removed_note));
    if (t.ne[0] % gt->block_size != 0)
        throw InputError(file.name(), t.n_dims > 0 ? dims_at + 4 : dims_at,
                         tensor_field(idx, t.name, "ne[0]"),
                         fmt::format("{} is not a multiple of the {} block size {}", t.ne[0],
                                     ggml_type_display(t.type), gt->block_size));
    if (zero) {
        t.nbytes = 0;
        return;
    }
    auto row = ggml_row_size(t.type, t.ne[0]);
    std::optional<uint64_t> nb = row;
    for (int d = 1; d < 4 && nb; ++d) nb = checked_mul(*nb, static_cast<uint64_t>(t.ne[d]));
    if (!nb || *nb > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw InputError(file.name(), dims_at, tensor_field(idx, t.name, "ne"), "byte size overflows");
    t.nbytes = *nb;
}

// 10: tensor infos: name (unique, shorter than ggml's limit), dimensions, type, offset.
void read_tensor_infos(Cursor& c, const ByteSource& file, int64_t n_tensors, Header& h) {
    h.tensors.reserve(static_cast<size_t>(std::min<uint64_t>(static_cast<uint64_t>(n_tensors), kMaxReserve)));
    std::unordered_set<std::string> names;
    for (int64_t i = 0; i < n_tensors; ++i) {
        const size_t idx = static_cast<size_t>(i);
        TensorInfo t;
        t.info_offset = c.pos();
        const auto nfield = [i] { return fmt::format("tensor #{} name", i); };
        const uint64_t name_len_at = c.pos();
        t.name = read_string(c, nfield);
        if (t.name.size() >= kGgmlMaxName)
            throw InputError(file.name(), name_len_at, nfield(),
                             fmt::format("name of {} bytes is too long (ggml allows at most {})",
                                         t.name.size(), kGgmlMaxName - 1));
        if (!names.insert(t.name).second)
            throw InputError(file.name(), t.info_offset, tensor_field(idx, t.name, "name"),
                             "duplicate tensor name");
        const uint64_t dims_at = c.pos();
        const bool zero = read_dims(c, file, idx, dims_at, t);
        read_type(c, file, idx, dims_at, zero, t);
        t.offset = c.read_le<uint64_t>([&] { return tensor_field(idx, t.name, "offset"); });
        h.tensors.push_back(std::move(t));
    }
    h.infos_end = c.pos();
}

// 11: the data section starts at the next multiple of the alignment (only when there are tensors);
// 14: strictly cumulative offsets; 12: every tensor's data inside the file (with require_data).
void place_data(const ByteSource& file, const ParseOptions& opts, Header& h) {
    if (!h.tensors.empty()) {
        auto ds = pad_to(h.infos_end, h.alignment);
        if (!ds) throw InputError(file.name(), h.infos_end, "data start", "overflows");
        h.data_start = *ds;
    } else {
        h.data_start = h.infos_end;
    }
    uint64_t expected = 0;
    for (size_t i = 0; i < h.tensors.size(); ++i) {
        const TensorInfo& t = h.tensors[i];
        const uint64_t off_field_at = t.info_offset + 8 + t.name.size() + 4 + 8ull * t.n_dims + 4;
        if (t.offset != expected)
            throw InputError(
                file.name(), off_field_at, tensor_field(i, t.name, "offset"),
                fmt::format("has offset {}, expected {} (ggml requires tensor data in info order, "
                            "each padded to {} bytes)",
                            t.offset, expected, h.alignment));
        auto padded = pad_to(t.nbytes, h.alignment);
        auto next = padded ? checked_add(expected, *padded) : std::nullopt;
        if (!next)
            throw InputError(file.name(), off_field_at, tensor_field(i, t.name, "offset"), "size overflows");
        if (opts.require_data) {
            auto abs = checked_add(h.data_start, t.offset);
            if (!abs || !range_inside(*abs, t.nbytes, file.size()))
                throw InputError(
                    file.name(), off_field_at, tensor_field(i, t.name, "data"),
                    fmt::format("data [{}, +{}) lies outside the file of {} bytes (truncated file?)",
                                abs ? *abs : 0, t.nbytes, file.size()));
        }
        expected = *next;
    }
    h.data_size = expected;
}

}  // namespace

Header parse_gguf_header(ByteSource& file, const ParseOptions& opts) {
    Cursor c(file);
    Header h;
    h.version = read_magic_and_version(c, file);  // 1-3
    const Counts n = read_counts(c, file);        // 4
    read_kvs(c, file, n.n_kv, h);                 // 5-9
    read_alignment(file, h);                      // 13
    read_tensor_infos(c, file, n.n_tensors, h);   // 10
    place_data(file, opts, h);                    // 11, 12, 14
    return h;
}

// ---- writer ---------------------------------------------------------------------------------------

uint64_t assign_offsets(std::vector<TensorInfo>& tensors, uint32_t alignment) {
    uint64_t off = 0;
    for (auto& t : tensors) {
        t.offset = off;
        auto padded = pad_to(t.nbytes, alignment);
        auto next = padded ? checked_add(off, *padded) : std::nullopt;
        if (!next) throw std::overflow_error("tensor data size overflows");
        off = *next;
    }
    return off;
}

uint32_t header_alignment(const std::vector<Kv>& kvs) {
    for (const auto& kv : kvs)
        if (kv.key == "general.alignment" && kv.type == GgufType::kUint32)
            return static_cast<uint32_t>(*kv.as_uint());
    return kGgufDefaultAlignment;
}

std::vector<uint8_t> serialize_header(uint32_t version, const std::vector<Kv>& kvs,
                                      const std::vector<TensorInfo>& tensors, uint32_t alignment) {
    std::vector<uint8_t> out;
    out.reserve(4096);
    append_le<uint32_t>(out, 0x46554747u);  // "GGUF" read as a little-endian u32
    append_le<uint32_t>(out, version);
    append_le<int64_t>(out, static_cast<int64_t>(tensors.size()));
    append_le<int64_t>(out, static_cast<int64_t>(kvs.size()));
    for (const auto& kv : kvs) {
        append_string(out, kv.key);
        append_le<int32_t>(out, static_cast<int32_t>(kv.type));
        out.insert(out.end(), kv.raw.begin(), kv.raw.end());
    }
    for (const auto& t : tensors) {
        append_string(out, t.name);
        append_le<uint32_t>(out, t.n_dims);
        for (uint32_t d = 0; d < t.n_dims; ++d) append_le<int64_t>(out, t.ne[d]);
        append_le<int32_t>(out, t.type);
        append_le<uint64_t>(out, t.offset);
    }
    if (!tensors.empty()) out.resize(*pad_to(out.size(), alignment), 0);
    return out;
}

}  // namespace gguf_reap
