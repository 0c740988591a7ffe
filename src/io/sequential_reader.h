// Sequential reading, the one way gguf-reap reads bulk bytes (rank's imatrix pass, audit's streams,
// sha256): pread into one reused buffer, front to back, with the next window announced to the kernel
// (POSIX_FADV_WILLNEED) as each refill lands, so the disk works on it while this one is used: double
// buffering through the page cache. Inputs are never mapped: a mapped file that shrinks under the
// process raises SIGBUS, where a read returns an error that names the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "io/input_file.h"
#include "io/signals.h"

namespace gguf_reap {

class SequentialReader {
  public:
    // `buffer_bytes`: the largest span one call returns (and the refill size). `prefetch`: announce the
    // next window after each refill.
    SequentialReader(const InputFile& f, size_t buffer_bytes, bool prefetch = true);
    // Reads into `buffer` (its size is the buffer size), which the caller owns and may reuse for the
    // next reader: a pass of many short readers then touches fresh memory once, not once per reader
    // (1.7 GB of page faults for rank's benchmark, 0.5 s of system time, when each allocated its own).
    SequentialReader(const InputFile& f, std::span<uint8_t> buffer, bool prefetch = true);

    // Up to `want` bytes at `off` (at least one when off < the file size), straight from the buffer
    // when they are there. A refill starts at `off` and reads at most up to max(fill_limit, off + want)
    // (clipped to the file and the buffer), so a reader of gathered ranges never reads into the next
    // one. Throws IoError when the file ends early (it shrank while it was read).
    std::span<const uint8_t> view(uint64_t off, uint64_t want, uint64_t fill_limit);

    // Exactly [off, off + n), n <= buffer_bytes, contiguous: what a pass over whole rows needs.
    std::span<const uint8_t> span(uint64_t off, size_t n, uint64_t fill_limit);

    uint64_t bytes_read() const { return bytes_read_; }
    const InputFile& file() const { return file_; }

  private:
    void refill(uint64_t off, uint64_t limit, uint64_t need);

    const InputFile& file_;
    size_t cap_;
    bool prefetch_;
    std::unique_ptr<uint8_t[]> owned_;
    uint8_t* buf_ = nullptr;
    uint64_t start_ = 0;
    uint64_t len_ = 0;
    uint64_t bytes_read_ = 0;
};

// Feeds [from, to) of `f` to `sink(span)` in order, through a SequentialReader of `buffer_bytes`;
// checks for an interrupt (Interrupted) between refills.
template <typename Sink>
void read_sequential(const InputFile& f, uint64_t from, uint64_t to, size_t buffer_bytes, Sink&& sink) {
    SequentialReader r(f, buffer_bytes);
    while (from < to) {
        check_interrupted();
        const auto v = r.view(from, to - from, to);
        sink(v);
        from += v.size();
    }
}

// The whole of a small file (a keeplist, a manifest, a score file) for a parser over bytes. Throws
// IoError (open, read) and InputError naming the file when it is larger than `limit` bytes, which the
// message calls "too large for a <what> (limit N MiB)".
std::string read_small_file(const std::string& path, uint64_t limit, const char* what);
// read_small_file's limit alone, for a parser that streams the file: the same InputError.
void check_small_file(const InputFile& f, uint64_t limit, const char* what);

}  // namespace gguf_reap
