// A bounded reader over a ByteSource: knows how many bytes remain and refuses to read past the end, so
// every length or count from the file can be checked against what is left before anything is
// allocated (the ggml reader's discipline). Internal to format/.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "format/byte_source.h"
#include "gguf_reap/error.h"

namespace gguf_reap {

// The name of the field a read is for, as error messages give it ("tensor #12 'blk.3.ffn_up' ne[1]").
// Built only if an error needs it: a header has a few fields per tensor and per vocabulary entry, and
// formatting every name up front was most of the time spent parsing one (hundreds of thousands of
// names for a real model's shards). Holds a reference to a string or a callable that makes one, so it
// lives only as long as the call it is passed to.
class Field {
  public:
    Field(const char* s) : obj_(s), make_(&from_cstr) {}            // NOLINT: implicit by design
    Field(const std::string& s) : obj_(&s), make_(&from_string) {}  // NOLINT
    template <typename F, typename = std::enable_if_t<std::is_invocable_r_v<std::string, const F&>>>
    Field(const F& f)  // NOLINT
        : obj_(&f), make_([](const void* o) { return std::string((*static_cast<const F*>(o))()); }) {}
    std::string str() const { return make_(obj_); }

  private:
    static std::string from_cstr(const void* o) { return static_cast<const char*>(o); }
    static std::string from_string(const void* o) { return *static_cast<const std::string*>(o); }
    const void* obj_;
    std::string (*make_)(const void*);
};

class Cursor {
  public:
    explicit Cursor(ByteSource& src, uint64_t start = 0) : src_(src), pos_(start) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return pos_ <= src_.size() ? src_.size() - pos_ : 0; }
    const std::string& path() const { return src_.name(); }

    // Copies n bytes, or throws InputError("<field>: file ends ...") at the current position.
    void read(void* dst, uint64_t n, Field field) {
        if (n > remaining())
            throw InputError(path(), pos_, field.str(),
                             "file ends after " + std::to_string(remaining()) + " more byte(s), " +
                                 std::to_string(n) + " needed (truncated file?)");
        src_.read(pos_, dst, static_cast<size_t>(n));
        pos_ += n;
    }

    template <typename T>
    T read_le(Field field) {
        // GGUF is little-endian; this tool runs on little-endian hosts only (checked at build time).
        static_assert(std::endian::native == std::endian::little);
        T v;
        read(&v, sizeof(T), field);
        return v;
    }

    void skip(uint64_t n, Field field) {
        if (n > remaining())
            throw InputError(path(), pos_, field.str(),
                             "file ends after " + std::to_string(remaining()) + " more byte(s), " +
                                 std::to_string(n) + " needed (truncated file?)");
        pos_ += n;
    }

  private:
    ByteSource& src_;
    uint64_t pos_;
};

}  // namespace gguf_reap
