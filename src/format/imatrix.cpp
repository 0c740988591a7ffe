#include "format/imatrix.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "format/cursor.h"
#include "format/ggml_types.h"
#include "format/gguf.h"
#include "gguf_reap/error.h"
#include "io/checked.h"

namespace gguf_reap {

namespace {

bool has_gguf_magic(ByteSource& f) {
    if (f.size() < 4) return false;
    char m[4];
    f.read(0, m, 4);
    return std::memcmp(m, "GGUF", 4) == 0;
}

bool header_is_imatrix(const Header& h) {
    if (const Kv* t = h.find("general.type")) return t->as_string() == std::string("imatrix");
    if (h.find("general.architecture") || h.tensors.empty()) return false;
    for (const auto& t : h.tensors)
        if (!t.name.ends_with(".in_sum2") && !t.name.ends_with(".counts")) return false;
    return true;
}

}  // namespace

const char* imatrix_kind_name(ImatrixKind k) {
    switch (k) {
        case ImatrixKind::kGguf:
            return "gguf";
        case ImatrixKind::kLegacy:
            return "dat";
        case ImatrixKind::kNotImatrix:
            return "none";
    }
    return "?";
}

ImatrixKind detect_imatrix(const std::string& path) {
    auto file = InputFile::open(path);
    FileSource f(*file);
    if (!has_gguf_magic(f)) return path.ends_with(".dat") ? ImatrixKind::kLegacy : ImatrixKind::kNotImatrix;
    ParseOptions o;
    return header_is_imatrix(parse_gguf_header(f, o)) ? ImatrixKind::kGguf : ImatrixKind::kNotImatrix;
}

ImatrixFile ImatrixFile::open(const std::string& path) {
    auto file = InputFile::open(path);
    FileSource src(*file);
    ImatrixFile im = parse(src);
    im.file_ = std::move(file);
    return im;
}

ImatrixFile ImatrixFile::parse(std::span<const uint8_t> bytes, const std::string& name) {
    SpanSource src(bytes, name);
    return parse(src);
}

namespace {

// What an imatrix says of its calibration run.
struct ImatrixMeta {
    std::vector<std::string> datasets;
    std::optional<uint64_t> chunk_count, chunk_size;
};

// GGUF: imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size, each optional.
ImatrixMeta gguf_metadata(const Header& h, const std::string& path) {
    ImatrixMeta m;
    if (const Kv* d = h.find("imatrix.datasets")) {
        auto v = d->as_string_array();
        if (!v)
            throw InputError(path, d->file_offset, "kv 'imatrix.datasets'", "must be an array of strings");
        m.datasets = *v;
    }
    for (const char* key : {"imatrix.chunk_count", "imatrix.chunk_size"}) {
        if (const Kv* kv = h.find(key)) {
            auto v = kv->as_uint();
            if (!v)
                throw InputError(path, kv->file_offset, fmt::format("kv '{}'", key),
                                 "must be an unsigned integer");
            (std::string_view(key) == "imatrix.chunk_count" ? m.chunk_count : m.chunk_size) = *v;
        }
    }
    return m;
}

// One GGUF entry: <name>.in_sum2 [ne0, n_mat] and its <name>.counts [1, n_mat], both F32.
ImatrixEntry gguf_entry(const Header& h, const std::string& path, const TensorInfo& t, const TensorInfo& c,
                        const std::string& name) {
    const auto field = [&t] { return fmt::format("tensor '{}'", t.name); };
    if (t.type != kGgmlF32)
        throw InputError(path, t.info_offset, field(),
                         fmt::format("must be F32, found {}", ggml_type_display(t.type)));
    if (c.type != kGgmlF32)
        throw InputError(path, c.info_offset, fmt::format("tensor '{}'", c.name),
                         fmt::format("must be F32, found {}", ggml_type_display(c.type)));
    if (t.ne[2] != 1 || t.ne[3] != 1)
        throw InputError(path, t.info_offset, field(), "must be 2-D [ne0, n_mat]");
    if (c.ne[0] != 1 || c.ne[1] != t.ne[1] || c.ne[2] != 1 || c.ne[3] != 1)
        throw InputError(
            path, c.info_offset, fmt::format("tensor '{}'", c.name),
            fmt::format("has shape {{{}, {}}} but its in_sum2 has {} matrices: expected {{1, {}}}", c.ne[0],
                        c.ne[1], t.ne[1], t.ne[1]));
    ImatrixEntry e;
    e.name = name;
    e.ne0 = t.ne[0];
    e.n_mat = t.ne[1];
    e.nval = t.ne[0] * t.ne[1];
    e.sums_offset = h.data_start + t.offset;
    e.counts_offset = h.data_start + c.offset;
    e.entry_offset = t.info_offset;
    return e;
}

// GGUF: every <name>.in_sum2 paired with its <name>.counts, in file order of the in_sum2 tensors; a
// tensor of either kind without its pair is refused.
std::vector<ImatrixEntry> gguf_entries(const Header& h, const std::string& path) {
    std::unordered_map<std::string, const TensorInfo*> counts;
    for (const auto& t : h.tensors)
        if (t.name.ends_with(".counts")) counts[t.name.substr(0, t.name.size() - 7)] = &t;
    std::vector<ImatrixEntry> entries;
    for (const auto& t : h.tensors) {
        if (!t.name.ends_with(".in_sum2")) continue;
        const std::string name = t.name.substr(0, t.name.size() - 8);
        auto it = counts.find(name);
        if (it == counts.end())
            throw InputError(path, t.info_offset, fmt::format("tensor '{}'", t.name),
                             fmt::format("has no matching '{}.counts' tensor", name));
        entries.push_back(gguf_entry(h, path, t, *it->second, name));
    }
    if (entries.size() != counts.size()) {
        for (const auto& t : h.tensors) {
            if (!t.name.ends_with(".counts")) continue;
            const std::string name = t.name.substr(0, t.name.size() - 7);
            if (std::none_of(entries.begin(), entries.end(),
                             [&](const ImatrixEntry& e) { return e.name == name; }))
                throw InputError(path, t.info_offset, fmt::format("tensor '{}'", t.name),
                                 fmt::format("has no matching '{}.in_sum2' tensor", name));
        }
    }
    if (entries.empty()) throw InputError(path, std::nullopt, "tensors", "the imatrix holds no entries");
    return entries;
}

// Legacy .dat, entry #i: name length, name, ncall, nval, nval floats.
ImatrixEntry legacy_entry(Cursor& c, int32_t i, const std::string& path) {
    ImatrixEntry e;
    e.entry_offset = c.pos();
    const auto lfield = [i] { return fmt::format("entry #{} name length", i); };
    const int32_t len = c.read_le<int32_t>(lfield);
    if (len < 1 || static_cast<uint64_t>(len) > c.remaining())
        throw InputError(path, e.entry_offset, lfield(),
                         fmt::format("name length {} is invalid ({} bytes left)", len, c.remaining()));
    e.name.resize(static_cast<size_t>(len));
    c.read(e.name.data(), static_cast<uint64_t>(len), [i] { return fmt::format("entry #{} name", i); });
    const auto ef = [&e](const char* what) { return fmt::format("entry '{}'{}", e.name, what); };
    e.ncall = c.read_le<int32_t>([&] { return ef(" ncall"); });
    const uint64_t nval_at = c.pos();
    const int32_t nval = c.read_le<int32_t>([&] { return ef(" nval"); });
    if (nval < 1)
        throw InputError(path, nval_at, ef(" nval"), fmt::format("{} values (must be at least 1)", nval));
    if (static_cast<uint64_t>(nval) > c.remaining() / 4)
        throw InputError(
            path, nval_at, ef(" nval"),
            fmt::format("{} values run past the end of the file ({} bytes left)", nval, c.remaining()));
    e.nval = nval;
    e.sums_offset = c.pos();
    c.skip(static_cast<uint64_t>(nval) * 4, [&] { return ef(" values"); });
    return e;
}

// Legacy .dat: n_entries, then the entries (names unique).
std::vector<ImatrixEntry> legacy_entries(Cursor& c, const std::string& path) {
    const int32_t n = c.read_le<int32_t>("n_entries");
    // Smallest entry: name_len (4) + 1 name byte + ncall (4) + nval (4) + one float (4).
    if (n < 1) throw InputError(path, 0, "n_entries", fmt::format("{} entries (must be at least 1)", n));
    if (static_cast<uint64_t>(n) > c.remaining() / 17)
        throw InputError(path, 0, "n_entries",
                         fmt::format("{} entries cannot fit in the {} bytes left (not a legacy imatrix?)", n,
                                     c.remaining()));
    std::vector<ImatrixEntry> entries;
    std::unordered_map<std::string, size_t> seen;
    for (int32_t i = 0; i < n; ++i) {
        ImatrixEntry e = legacy_entry(c, i, path);
        if (!seen.emplace(e.name, entries.size()).second)
            throw InputError(path, e.entry_offset, fmt::format("entry '{}'", e.name), "duplicate entry name");
        entries.push_back(std::move(e));
    }
    return entries;
}

// Legacy .dat's optional trailer: the last chunk, then the dataset name; nothing after it.
ImatrixMeta legacy_trailer(Cursor& c, const std::string& path) {
    ImatrixMeta m;
    if (c.remaining() == 0) return m;
    const int32_t last = c.read_le<int32_t>("trailer last_chunk");
    if (last < 0)
        throw InputError(path, c.pos() - 4, "trailer last_chunk",
                         fmt::format("negative chunk count {}", last));
    m.chunk_count = static_cast<uint64_t>(last);
    if (c.remaining() > 0) {
        const uint64_t at = c.pos();
        const int32_t dl = c.read_le<int32_t>("trailer dataset length");
        if (dl < 0 || static_cast<uint64_t>(dl) > c.remaining())
            throw InputError(path, at, "trailer dataset length",
                             fmt::format("length {} is invalid ({} bytes left)", dl, c.remaining()));
        std::string ds(static_cast<size_t>(dl), '\0');
        c.read(ds.data(), static_cast<uint64_t>(dl), "trailer dataset");
        m.datasets.push_back(ds);
    }
    if (c.remaining() > 0)
        throw InputError(path, c.pos(), "trailer",
                         fmt::format("{} unexpected bytes after the dataset name", c.remaining()));
    return m;
}

}  // namespace

ImatrixFile ImatrixFile::parse(ByteSource& f) {
    ImatrixFile im;
    im.path_ = f.name();
    const std::string& path = im.path_;
    ImatrixMeta meta;
    if (has_gguf_magic(f)) {
        im.kind_ = ImatrixKind::kGguf;
        const Header h = parse_gguf_header(f);
        if (!header_is_imatrix(h))
            throw InputError(path, std::nullopt, "general.type",
                             "this GGUF file is a model, not an imatrix (general.type is not \"imatrix\")");
        meta = gguf_metadata(h, path);
        im.entries_ = gguf_entries(h, path);
    } else {
        im.kind_ = ImatrixKind::kLegacy;
        Cursor c(f);
        im.entries_ = legacy_entries(c, path);
        meta = legacy_trailer(c, path);
    }
    im.datasets_ = std::move(meta.datasets);
    im.chunk_count_ = meta.chunk_count;
    im.chunk_size_ = meta.chunk_size;
    return im;
}

const ImatrixEntry* ImatrixFile::find(const std::string& name) const {
    for (const auto& e : entries_)
        if (e.name == name) return &e;
    return nullptr;
}

std::vector<float> ImatrixFile::read_values(const ImatrixEntry& e) const {
    std::vector<float> v(static_cast<size_t>(e.nval));
    file_->read(e.sums_offset, v.data(), v.size() * 4);
    return v;
}

void ImatrixFile::read_values_range(const ImatrixEntry& e, uint64_t first, size_t n, float* dst) const {
    if (!range_inside(first, n, static_cast<uint64_t>(e.nval)))
        throw UsageError(fmt::format("{}: values {}..{} requested from entry '{}' of {} values", path(),
                                     first, first + n, e.name, e.nval));
    file_->read(e.sums_offset + first * 4, dst, n * 4);
}

std::vector<float> ImatrixFile::read_counts(const ImatrixEntry& e) const {
    if (kind_ == ImatrixKind::kLegacy) return {static_cast<float>(e.ncall)};
    std::vector<float> v(static_cast<size_t>(e.n_mat));
    file_->read(e.counts_offset, v.data(), v.size() * 4);
    return v;
}

}  // namespace gguf_reap
