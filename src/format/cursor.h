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
#include <vector>

#include "gguf_reap/error.h"
#include "gguf_reap/input_file.h"

namespace gguf_reap {

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
    void read(void* dst, uint64_t n, const std::string& field) {
        if (n > remaining())
            throw InputError(path(), pos_, field,
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
    T read_le(const std::string& field) {
        // GGUF is little-endian; this tool runs on little-endian hosts only (checked at build time).
        static_assert(std::endian::native == std::endian::little);
        T v;
        read(&v, sizeof(T), field);
        return v;
    }

    void skip(uint64_t n, const std::string& field) {
        if (n > remaining())
            throw InputError(path(), pos_, field,
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
