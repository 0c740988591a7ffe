#include "io/sequential_reader.h"

#include <fcntl.h>

#include <algorithm>

#include <fmt/format.h>

#include "gguf_reap/error.h"

namespace gguf_reap {

SequentialReader::SequentialReader(const InputFile& f, size_t buffer_bytes, bool prefetch)
    : file_(f), cap_(std::max<size_t>(buffer_bytes, 1)), prefetch_(prefetch) {}

SequentialReader::SequentialReader(const InputFile& f, std::span<uint8_t> buffer, bool prefetch)
    : file_(f), cap_(buffer.size()), prefetch_(prefetch), buf_(buffer.data()) {}

void SequentialReader::refill(uint64_t off, uint64_t limit, uint64_t need) {
    if (!buf_) {
        owned_ = std::make_unique_for_overwrite<uint8_t[]>(cap_);
        buf_ = owned_.get();
    }
    const uint64_t stop = std::min<uint64_t>(std::max(limit, off + need), file_.size());
    const uint64_t n = std::min<uint64_t>(cap_, stop > off ? stop - off : need);
    if (prefetch_ && file_.fd() >= 0 && off + n < stop)
        ::posix_fadvise(file_.fd(), static_cast<off_t>(off + n),
                        static_cast<off_t>(std::min<uint64_t>(cap_, stop - off - n)), POSIX_FADV_WILLNEED);
    file_.read(off, buf_, static_cast<size_t>(n));  // IoError if the file shrank meanwhile
    start_ = off;
    len_ = n;
    bytes_read_ += n;
}

std::span<const uint8_t> SequentialReader::view(uint64_t off, uint64_t want, uint64_t fill_limit) {
    if (!(len_ && off >= start_ && off - start_ < len_)) refill(off, fill_limit, want);
    const uint64_t avail = len_ - (off - start_);
    return {buf_ + (off - start_), static_cast<size_t>(std::min(avail, want))};
}

std::span<const uint8_t> SequentialReader::span(uint64_t off, size_t n, uint64_t fill_limit) {
    if (n > cap_) throw IoError(file_.path(), "a read larger than its buffer (a caller bug)");
    if (!(len_ && off >= start_ && off + n <= start_ + len_)) refill(off, fill_limit, n);
    if (off + n > start_ + len_)
        throw IoError(file_.path(), "read past the end of the file (was it truncated?)");
    return {buf_ + (off - start_), n};
}

void check_small_file(const InputFile& f, uint64_t limit, const char* what) {
    if (f.size() > limit)
        throw InputError(
            f.path(), std::nullopt, "file",
            fmt::format("{} bytes is too large for a {} (limit {} MiB)", f.size(), what, limit >> 20));
}

std::string read_small_file(const std::string& path, uint64_t limit, const char* what) {
    const auto f = InputFile::open(path);
    check_small_file(*f, limit, what);
    std::string text;
    text.reserve(static_cast<size_t>(f->size()));
    read_sequential(*f, 0, f->size(), size_t{1} << 20, [&](std::span<const uint8_t> v) {
        text.append(reinterpret_cast<const char*>(v.data()), v.size());
    });
    return text;
}

}  // namespace gguf_reap
