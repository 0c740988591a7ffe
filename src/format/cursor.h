// A bounded, buffered reader over an InputFile: knows how many bytes remain and refuses to read past
// the end, so every length or count from the file can be checked against what is left before anything
// is allocated (the ggml reader's discipline). Internal to format/.
#pragma once

#include <fcntl.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "io/error.h"
#include "io/input_file.h"

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
    // While a cursor parses a header, the kernel reads exactly what it asks for (POSIX_FADV_RANDOM):
    // its readahead would otherwise pull hundreds of KiB of tensor data from the disk after every
    // header of a cold shard set. Ordinary readahead is restored when the cursor goes.
    explicit Cursor(const InputFile& file, uint64_t start = 0) : file_(file), pos_(start) {
        ::posix_fadvise(file_.fd(), 0, 0, POSIX_FADV_RANDOM);
    }
    ~Cursor() { ::posix_fadvise(file_.fd(), 0, 0, POSIX_FADV_NORMAL); }
    Cursor(const Cursor&) = delete;
    Cursor& operator=(const Cursor&) = delete;

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return pos_ <= file_.size() ? file_.size() - pos_ : 0; }
    const std::string& path() const { return file_.path(); }

    // Copies n bytes, or throws InputError("<field>: file ends ...") at the current position.
    void read(void* dst, uint64_t n, Field field) {
        if (n > remaining())
            throw InputError(path(), pos_, field.str(),
                             "file ends after " + std::to_string(remaining()) + " more byte(s), " +
                                 std::to_string(n) + " needed (truncated file?)");
        auto* out = static_cast<uint8_t*>(dst);
        // Through a 64 KiB buffer: a header of 100k tensors is a few thousand preads, and a parse reads
        // at most 64 KiB past the header's end.
        while (n > 0) {
            if (pos_ < buf_start_ || pos_ >= buf_start_ + buf_.size()) fill();
            uint64_t off = pos_ - buf_start_;
            uint64_t take = std::min<uint64_t>(n, buf_.size() - off);
            std::memcpy(out, buf_.data() + off, take);
            out += take;
            pos_ += take;
            n -= take;
        }
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
    void fill() {
        const uint64_t want = std::min<uint64_t>(kBuffer, remaining());
        buf_.resize(want);
        file_.read(pos_, buf_.data(), want);
        buf_start_ = pos_;
    }

    static constexpr uint64_t kBuffer = 64 * 1024;
    const InputFile& file_;
    uint64_t pos_;
    std::vector<uint8_t> buf_;
    uint64_t buf_start_ = 0;
};

}  // namespace gguf_reap
