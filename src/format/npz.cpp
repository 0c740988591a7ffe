#include "format/npz.h"

#include <fcntl.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/checked.h"
#include "io/input_file.h"
#include "io/output_file.h"
#include "io/remote_url.h"
#include "io/sequential_reader.h"

namespace gguf_reap {

namespace {

template <typename T>
NpyArray make(std::string descr, std::vector<int64_t> shape, const std::vector<T>& v) {
    NpyArray a;
    a.descr = std::move(descr);
    a.shape = std::move(shape);
    a.data.resize(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(a.data.data(), v.data(), a.data.size());
    return a;
}

// UTF-8 → code points; malformed bytes become U+FFFD (names are ours or the user's, never binary).
std::u32string decode_utf8(const std::string& s) {
    std::u32string out;
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (len == 0 || i + static_cast<size_t>(len) > s.size()) {
            out.push_back(0xFFFD);
            ++i;
            continue;
        }
        char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
        bool ok = true;
        for (int k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
            if ((cc >> 6) != 2) ok = false;
            cp = (cp << 6) | (cc & 0x3F);
        }
        out.push_back(ok ? cp : 0xFFFD);
        i += ok ? static_cast<size_t>(len) : 1;
    }
    return out;
}

std::string header_text(const NpyArray& a) {
    std::string shape = "(";
    for (size_t i = 0; i < a.shape.size(); ++i)
        shape +=
            fmt::format("{}{}", a.shape[i], a.shape.size() == 1 ? "," : (i + 1 < a.shape.size() ? ", " : ""));
    shape += ")";
    std::string h = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", a.descr, shape);
    // numpy pads so that magic + version + length + header is a multiple of 64, ending in '\n'.
    const size_t total = 10 + h.size() + 1;
    h.append((64 - total % 64) % 64, ' ');
    h.push_back('\n');
    return h;
}

// --- a minimal reader for the header's Python dict literal --------------------------------------

struct HeaderFields {
    std::string descr;
    bool fortran = false;
    std::vector<int64_t> shape;
    bool have_descr = false, have_shape = false;
};

class DictParser {
  public:
    explicit DictParser(const std::string& s) : s_(s) {}

    bool parse(HeaderFields& f) {
        skip();
        if (!eat('{')) return false;
        for (;;) {
            skip();
            if (eat('}')) return true;
            std::string key;
            if (!quoted(key)) return false;
            skip();
            if (!eat(':')) return false;
            skip();
            if (key == "descr") {
                if (!quoted(f.descr)) return false;
                f.have_descr = true;
            } else if (key == "fortran_order") {
                if (word("True"))
                    f.fortran = true;
                else if (word("False"))
                    f.fortran = false;
                else
                    return false;
            } else if (key == "shape") {
                if (!tuple(f.shape)) return false;
                f.have_shape = true;
            } else {
                return false;
            }
            skip();
            eat(',');
        }
    }

  private:
    void skip() {
        while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    bool eat(char c) {
        if (i_ < s_.size() && s_[i_] == c) {
            ++i_;
            return true;
        }
        return false;
    }
    bool word(const char* w) {
        const size_t n = std::strlen(w);
        if (s_.compare(i_, n, w) != 0) return false;
        i_ += n;
        return true;
    }
    bool quoted(std::string& out) {
        if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return false;
        const char q = s_[i_++];
        const size_t end = s_.find(q, i_);
        if (end == std::string::npos) return false;
        out = s_.substr(i_, end - i_);
        i_ = end + 1;
        return true;
    }
    bool tuple(std::vector<int64_t>& out) {
        if (!eat('(')) return false;
        for (;;) {
            skip();
            if (eat(')')) return true;
            int64_t v = 0;
            size_t digits = 0;
            while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
                if (v > (INT64_MAX - 9) / 10) return false;
                v = v * 10 + (s_[i_++] - '0');
                ++digits;
            }
            if (digits == 0) return false;
            out.push_back(v);
            skip();
            if (!eat(',')) {
                skip();
                return eat(')');
            }
        }
    }

    const std::string& s_;
    size_t i_ = 0;
};

NpyArray parse_npy(const std::vector<uint8_t>& b, const std::string& path, const std::string& member) {
    const std::string field = fmt::format("member '{}'", member);
    auto bad = [&](uint64_t off, const std::string& msg) -> NpyArray {
        throw InputError(path, off, field, msg);
    };
    if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) return bad(0, "not a NumPy .npy array");
    const int major = b[6];
    uint64_t hlen = 0, hstart = 0;
    if (major == 1) {
        hlen = static_cast<uint64_t>(b[8]) | static_cast<uint64_t>(b[9]) << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (b.size() < 12) return bad(0, "truncated .npy header");
        hlen = static_cast<uint64_t>(b[8]) | static_cast<uint64_t>(b[9]) << 8 |
               static_cast<uint64_t>(b[10]) << 16 | static_cast<uint64_t>(b[11]) << 24;
        hstart = 12;
    } else {
        return bad(6, fmt::format(".npy format version {} is not supported (1, 2 and 3 are)", major));
    }
    if (!range_inside(hstart, hlen, b.size()))
        return bad(8, fmt::format("header of {} bytes runs past the member", hlen));
    const std::string text(reinterpret_cast<const char*>(b.data() + hstart), hlen);
    HeaderFields f;
    if (!DictParser(text).parse(f) || !f.have_descr || !f.have_shape)
        return bad(hstart, fmt::format("cannot read the .npy header {}", text.substr(0, 80)));
    if (f.fortran) return bad(hstart, "Fortran-order arrays are not supported (save with C order)");
    NpyArray a;
    a.descr = f.descr;
    a.shape = f.shape;
    const int64_t item = a.item_size();
    if (item == 0) return bad(hstart, fmt::format("dtype '{}' is not supported", f.descr));
    uint64_t n = 1;
    for (int64_t d : f.shape) {
        auto m = checked_mul(n, static_cast<uint64_t>(d));
        if (!m) return bad(hstart, "shape overflows");
        n = *m;
    }
    const auto bytes = checked_mul(n, static_cast<uint64_t>(item));
    const uint64_t data_at = hstart + hlen;
    if (!bytes || *bytes != b.size() - data_at)
        return bad(data_at, fmt::format("holds {} data bytes but shape and dtype need {}", b.size() - data_at,
                                        bytes ? fmt::to_string(*bytes) : std::string("more than 2^64")));
    a.data.assign(b.begin() + static_cast<std::ptrdiff_t>(data_at), b.end());
    return a;
}

struct ZipErrorGuard {
    zip_error_t e;
    ZipErrorGuard() { zip_error_init(&e); }
    ~ZipErrorGuard() { zip_error_fini(&e); }
};

}  // namespace

int64_t NpyArray::element_count() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

int64_t NpyArray::item_size() const {
    if (descr.size() < 3) return 0;
    const char order = descr[0], kind = descr[1];
    if (order != '<' && order != '|' && order != '=') return 0;
    int64_t n = 0;
    for (size_t i = 2; i < descr.size(); ++i) {
        if (!std::isdigit(static_cast<unsigned char>(descr[i])) || n > 1'000'000) return 0;
        n = n * 10 + (descr[i] - '0');
    }
    switch (kind) {
        case 'b':
            return n == 1 ? 1 : 0;
        case 'i':
        case 'u':
            return (n == 1 || n == 2 || n == 4 || n == 8) ? n : 0;
        case 'f':
            return (n == 4 || n == 8) ? n : 0;
        case 'U':
            return n >= 1 ? 4 * n : 0;
        default:
            return 0;
    }
}

NpyArray NpyArray::f64(std::vector<int64_t> shape, const std::vector<double>& v) {
    return make("<f8", std::move(shape), v);
}
NpyArray NpyArray::i32(std::vector<int64_t> shape, const std::vector<int32_t>& v) {
    return make("<i4", std::move(shape), v);
}
NpyArray NpyArray::i64(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
    return make("<i8", std::move(shape), v);
}
NpyArray NpyArray::u16(std::vector<int64_t> shape, const std::vector<uint16_t>& v) {
    return make("<u2", std::move(shape), v);
}
NpyArray NpyArray::boolean(std::vector<int64_t> shape, const std::vector<uint8_t>& v) {
    NpyArray a = make("|b1", std::move(shape), v);
    for (auto& x : a.data) x = x ? 1 : 0;
    return a;
}

NpyArray NpyArray::strings(const std::vector<std::string>& v) {
    std::vector<std::u32string> cps;
    size_t width = 1;
    for (const auto& s : v) {
        cps.push_back(decode_utf8(s));
        width = std::max(width, cps.back().size());
    }
    NpyArray a;
    a.descr = fmt::format("<U{}", width);
    a.shape = {static_cast<int64_t>(v.size())};
    a.data.assign(v.size() * width * 4, 0);
    for (size_t i = 0; i < cps.size(); ++i)
        for (size_t k = 0; k < cps[i].size(); ++k) {
            const uint32_t c = cps[i][k];
            std::memcpy(a.data.data() + (i * width + k) * 4, &c, 4);
        }
    return a;
}

std::vector<int64_t> NpyArray::to_int64() const {
    const int64_t item = item_size();
    const char kind = descr.size() > 1 ? descr[1] : '?';
    if (kind != 'i' && kind != 'u' && kind != 'b')
        throw UsageError(fmt::format("expected an integer array, found dtype '{}'", descr));
    std::vector<int64_t> out(static_cast<size_t>(element_count()));
    for (size_t i = 0; i < out.size(); ++i) {
        const uint8_t* p = data.data() + i * static_cast<size_t>(item);
        uint64_t u = 0;
        std::memcpy(&u, p, static_cast<size_t>(item));
        if (kind == 'i' && item < 8 && (u >> (item * 8 - 1)) & 1)
            u |= ~uint64_t{0} << (item * 8);  // sign-extend
        out[i] = static_cast<int64_t>(u);
    }
    return out;
}

std::vector<uint8_t> npy_header_bytes(const NpyArray& a) {
    const std::string h = header_text(a);
    // Sized up front and filled with memcpy (g++ 12 warns falsely on inserting small constant arrays).
    std::vector<uint8_t> out(10 + h.size());
    std::memcpy(out.data(), "\x93NUMPY\x01\x00", 8);
    out[8] = static_cast<uint8_t>(h.size() & 0xFF);
    out[9] = static_cast<uint8_t>(h.size() >> 8);
    std::memcpy(out.data() + 10, h.data(), h.size());
    return out;
}

std::vector<uint8_t> npy_bytes(const NpyArray& a) {
    std::vector<uint8_t> out = npy_header_bytes(a);
    out.insert(out.end(), a.data.begin(), a.data.end());
    return out;
}

void write_npz_to(OutputFile& out, const std::vector<std::pair<std::string, NpyArray>>& arrays) {
    const std::string& path = out.final_path();  // names the archive in error messages
    // The archive is built in memory (the arrays are small: blocks × experts) from members that point
    // at each array's header and at its elements where they are (no copy), then streamed to `out` in
    // pieces: the ranking's 9.5 MB once made four copies, each touching fresh memory.
    ZipErrorGuard err;
    zip_source_t* src = zip_source_buffer_create(nullptr, 0, 0, &err.e);
    if (!src) throw IoError(path, fmt::format("zip: {}", zip_error_strerror(&err.e)));
    zip_t* za = zip_open_from_source(src, ZIP_TRUNCATE, &err.e);
    if (!za) {
        zip_source_free(src);
        throw IoError(path, fmt::format("zip: {}", zip_error_strerror(&err.e)));
    }
    zip_source_keep(src);
    std::vector<std::vector<uint8_t>> headers;  // must outlive zip_close
    headers.reserve(arrays.size());
    auto fail = [&](const std::string& what) {
        const std::string msg = fmt::format("zip: {}: {}", what, zip_strerror(za));
        zip_discard(za);
        zip_source_free(src);
        throw IoError(path, msg);
    };
    for (const auto& [name, arr] : arrays) {
        headers.push_back(npy_header_bytes(arr));
        zip_buffer_fragment_t parts[2] = {{headers.back().data(), headers.back().size()},
                                          {const_cast<uint8_t*>(arr.data.data()), arr.data.size()}};
        zip_source_t* s = zip_source_buffer_fragment(za, parts, arr.data.empty() ? 1 : 2, 0);
        if (!s) fail(name);
        const std::string member = name + ".npy";
        const zip_int64_t idx = zip_file_add(za, member.c_str(), s, ZIP_FL_ENC_UTF_8);
        if (idx < 0) {
            zip_source_free(s);
            fail(name);
        }
        // Stored, and stamped 1980-01-01 00:00 (the DOS epoch): the same arrays give the same bytes.
        if (zip_set_file_compression(za, static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0) < 0 ||
            zip_file_set_dostime(za, static_cast<zip_uint64_t>(idx), 0, (0 << 9) | (1 << 5) | 1, 0) < 0)
            fail(name);
    }
    if (zip_close(za) < 0) fail("close");
    struct Free {
        zip_source_t* s;
        ~Free() { zip_source_free(s); }
    } free_src{src};
    if (zip_source_open(src) < 0) throw IoError(path, "zip: cannot read back the archive built in memory");
    std::vector<uint8_t> piece(size_t{1} << 20);
    uint64_t at = 0;
    for (;;) {
        const zip_int64_t got = zip_source_read(src, piece.data(), piece.size());
        if (got < 0) {
            zip_source_close(src);
            throw IoError(path, "zip: cannot read back the archive built in memory");
        }
        if (got == 0) break;
        out.write_at(at, piece.data(), static_cast<size_t>(got));
        at += static_cast<uint64_t>(got);
    }
    zip_source_close(src);
}

void write_npz(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>& arrays) {
    // Through OutputFile, so that no half-written .npz ever carries the final name.
    OutputFile out(path);
    write_npz_to(out, arrays);
    out.commit();
}

namespace {

// Every .npy member of an open archive (which this takes over).
std::map<std::string, NpyArray> read_members(zip_t* za, const std::string& path, uint64_t max_bytes) {
    std::unique_ptr<zip_t, void (*)(zip_t*)> guard(za, [](zip_t* z) { zip_discard(z); });
    std::map<std::string, NpyArray> out;
    uint64_t total = 0;
    const zip_int64_t n = zip_get_num_entries(za, 0);
    for (zip_int64_t i = 0; i < n; ++i) {
        zip_stat_t st;
        if (zip_stat_index(za, static_cast<zip_uint64_t>(i), 0, &st) < 0 || !(st.valid & ZIP_STAT_SIZE) ||
            !(st.valid & ZIP_STAT_NAME))
            throw InputError(path, std::nullopt, fmt::format("zip member #{}", i),
                             "cannot read its directory entry");
        std::string name = st.name;
        if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0) continue;
        total += st.size;
        if (st.size > max_bytes || total > max_bytes)
            throw InputError(
                path, std::nullopt, fmt::format("member '{}'", name),
                fmt::format("{} bytes of arrays is more than the {} this reader accepts", total, max_bytes));
        zip_file_t* zf = zip_fopen_index(za, static_cast<zip_uint64_t>(i), 0);
        if (!zf) throw InputError(path, std::nullopt, fmt::format("member '{}'", name), zip_strerror(za));
        // The size is the directory's claim: grow with the bytes that really inflate, 1 MiB at a time,
        // so that a forged size costs nothing (fuzz_plan_npz: a 907-byte archive claiming a 1.9 GB member).
        std::vector<uint8_t> b;
        zip_int64_t got = 0;
        while (b.size() < st.size) {
            const size_t at = b.size();
            b.resize(at + static_cast<size_t>(std::min<uint64_t>(st.size - at, uint64_t{1} << 20)));
            got = zip_fread(zf, b.data() + at, b.size() - at);
            if (got <= 0) {
                b.resize(at);
                break;
            }
            b.resize(at + static_cast<size_t>(got));
        }
        zip_fclose(zf);
        if (got < 0 || static_cast<uint64_t>(b.size()) != st.size)
            throw InputError(path, std::nullopt, fmt::format("member '{}'", name),
                             "cannot be decompressed (damaged archive?)");
        out[name.substr(0, name.size() - 4)] = parse_npy(b, path, name);
    }
    return out;
}

// A plan at a URL is held in memory while it is read: at most this many bytes.
constexpr uint64_t kMaxRemoteNpzBytes = uint64_t{256} << 20;

}  // namespace

std::map<std::string, NpyArray> read_npz(const std::string& path, uint64_t max_bytes) {
    if (is_remote_path(path)) {  // a plan at a URL: fetched whole, pinned as a model is (docs/remote.md)
        const std::string bytes = read_small_file(path, kMaxRemoteNpzBytes, "plan");
        return read_npz(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), path,
                        max_bytes);
    }
    int code = 0;
    zip_t* za = zip_open(path.c_str(), ZIP_RDONLY, &code);
    if (!za) {
        ZipErrorGuard err;
        zip_error_init_with_code(&err.e, code);
        if (code == ZIP_ER_READ) throw IoError(path, fmt::format("read: {}", zip_error_strerror(&err.e)));
        // libzip's code does not tell a missing file from a damaged archive (a forged directory gives
        // ZIP_ER_NOENT too): ask the file system, so that only an unreadable file is an I/O error.
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) throw_open_error(path, errno);
        ::close(fd);
        // (libzip's own words for ZIP_ER_NOENT, "No such file", would send the user looking for a file.)
        throw InputError(path, 0, "zip",
                         fmt::format("not a valid .npz (zip) archive: {}",
                                     code == ZIP_ER_NOENT ? std::string("its central directory is damaged")
                                                          : std::string(zip_error_strerror(&err.e))));
    }
    return read_members(za, path, max_bytes);
}

std::map<std::string, NpyArray> read_npz(std::span<const uint8_t> bytes, const std::string& path,
                                         uint64_t max_bytes) {
    ZipErrorGuard err;
    zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err.e);
    if (!src) throw std::bad_alloc();
    zip_t* za = zip_open_from_source(src, ZIP_RDONLY, &err.e);
    if (!za) {
        zip_source_free(src);
        throw InputError(path, 0, "zip",
                         fmt::format("not a valid .npz (zip) archive: {}",
                                     zip_error_code_zip(&err.e) == ZIP_ER_NOENT
                                         ? std::string("its central directory is damaged")
                                         : std::string(zip_error_strerror(&err.e))));
    }
    return read_members(za, path, max_bytes);
}

}  // namespace gguf_reap
