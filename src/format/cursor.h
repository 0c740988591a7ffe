// A bounded, buffered reader over an InputFile: knows how many bytes remain and refuses to read past
// the end, so every length or count from the file can be checked against what is left before anything
// is allocated (the ggml reader's discipline). Internal to format/.
#pragma once

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
    explicit Cursor(const InputFile& file, uint64_t start = 0) : file_(file), pos_(start) {}

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
        // A mapped file is read in place: copying exactly the bytes asked for keeps a header parse on
        // the header's own pages. Filling a 64 KiB buffer would fault in (and, on a cold cache, read
        // from disk) up to 64 KiB of tensor data past the end of every header.
        if (const auto map = file_.mapping(); !map.empty()) {
            if (n > 0) std::memcpy(out, map.data() + pos_, n);  // out may be null when n is 0
            pos_ += n;
            return;
        }
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
