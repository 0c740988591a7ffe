// The copy engine's writer (io/copy_engine.cpp runs the jobs): what the worker threads share, and the
// writer that gathers each thread's non-kernel bytes into pwritev batches. Included by copy_engine.cpp
// alone; its own file because the gathering (row compaction for width cuts included) is half the engine.
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "gguf_reap/error.h"
#include "io/copy_engine.h"
#include "io/output_file.h"
#include "io/signals.h"
#include "io/writeback.h"

namespace gguf_reap::copy_detail {

struct WorkItem {
    size_t job = 0;
    uint64_t lo = 0;
    uint64_t hi = 0;
};

struct Shared {
    Shared(const std::vector<const CopyJob*>& j, const std::vector<const InputFile*>& s, const CopyOptions& o,
           std::vector<std::unique_ptr<OutputFile>>& out)
        : jobs(j), sources(s), options(o), outputs(out) {}

    const std::vector<const CopyJob*>& jobs;
    const std::vector<const InputFile*>& sources;
    const CopyOptions& options;
    std::vector<std::unique_ptr<OutputFile>>& outputs;
    std::vector<WorkItem> items;
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    std::atomic<bool> kernel_ok{true};
    std::mutex error_mutex;
    std::exception_ptr error;
    std::atomic<uint64_t> kernel_bytes{0}, buffered_bytes{0}, literal_bytes{0}, zero_bytes{0}, calls{0};
    std::atomic<uint64_t> gathered_bytes{0};
    // Early writeback (options.early_writeback, durable only): the workers push, a thread of its own
    // starts it (io/writeback.h).
    WritebackQueue writeback;

    void fail(std::exception_ptr e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = e;
        stop = true;
    }
};

// Gathers consecutive output bytes that are not a kernel copy (header literals and padding, which
// point at memory we hold, and small extents read into the bounce buffer) as an iovec list and writes
// them with one pwritev: a run of 17 KiB slabs with their padding costs one pread per slab and one
// write per 512 KiB, where copy_file_range would cost a heavier syscall per slab.
//
// Measured (docs/perf/splice.md): pwritev straight from the source's mmap (no pread copy) was slower
// still, because faulting the mapping in costs more than the copy it saves.
//
// (A second thread per worker that wrote each batch while the worker read the next helped only warm
// --no-fsync runs; in the default, durable mode it bought 2-7 % on the Kimi-K3-shaped benchmark, under
// the 10 % a mechanism must earn, and it went: docs/perf/splice.md.)
class Writer {
  public:
    Writer(Shared& s, size_t batch) : s_(s), batch_(batch) {}
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    // Starts a work item at `dst` of `out`.
    void begin(OutputFile* out, uint64_t dst) {
        sync();
        out_ = out;
        dst_ = kicked_ = dst;
    }
    // Continues the item at `dst`: everything before it is in the file (a kernel copy just wrote it).
    void resume(uint64_t dst) {
        sync();
        dst_ = dst;
        start_writeback();
    }
    // Writes everything gathered so far.
    void sync() { flush(); }
    // Where the next byte of the current item goes (after sync(): everything before it is written).
    uint64_t position() const { return dst_ + pending_; }

    void put_memory(const uint8_t* p, uint64_t n) {
        while (n > 0) {
            const size_t take = static_cast<size_t>(std::min<uint64_t>(n, room()));
            add(p, take);
            p += take;
            n -= take;
        }
    }
    void put_zeros(uint64_t n) {
        while (n > 0) {
            const size_t take = static_cast<size_t>(std::min<uint64_t>({n, room(), sizeof kZeros}));
            add(kZeros, take);
            n -= take;
        }
    }
    void put_read(const InputFile& src, uint64_t off, uint64_t n) {
        while (n > 0) {
            if (s_.stop) return;
            if (fill_ == batch_) flush();
            const size_t want = static_cast<size_t>(std::min<uint64_t>({n, room(), batch_ - fill_}));
            read_all(src, off, buffer() + fill_, want);  // short reads loop inside
            add(buffer() + fill_, want);
            fill_ += want;
            s_.buffered_bytes.fetch_add(want, std::memory_order_relaxed);
            off += want;
            n -= want;
        }
    }

    // A run of adjacent gather indices: bytes [in, in + len) of a row go to [out, out + len) of its output.
    struct Run {
        uint64_t in = 0, out = 0, len = 0;
    };

    // to[j] = from[index[j]] for elements of N bytes, where to <= from and index is ascending: each
    // element is loaded before any store could reach it.
    template <size_t N>
    static void move_elements(uint8_t* to, const uint8_t* from, const std::vector<uint32_t>& index) {
        for (size_t j = 0; j < index.size(); ++j) {
            uint8_t e[N];
            std::memcpy(e, from + size_t{index[j]} * N, N);
            std::memcpy(to + j * N, e, N);
        }
    }

    // Bytes [skip, skip + n) of a gather segment's output (copy_engine.h) whose rows start at `base`.
    void put_gather(const InputFile& src, const CopyGather& g, uint64_t base, uint64_t skip, uint64_t n) {
        std::vector<Run> runs;
        for (size_t j = 0; j < g.index->size(); ++j) {
            const uint64_t in = uint64_t{(*g.index)[j]} * g.elem_bytes;
            if (!runs.empty() && runs.back().in + runs.back().len == in)
                runs.back().len += g.elem_bytes;
            else
                runs.push_back({in, j * uint64_t{g.elem_bytes}, g.elem_bytes});
        }
        const uint64_t out_row = g.index->size() * uint64_t{g.elem_bytes};
        const uint64_t end = skip + n;
        uint64_t row = skip / out_row;
        const uint64_t last = (end + out_row - 1) / out_row;  // one past the last row touched
        if (g.row_bytes > batch_) {
            for (; row < last; ++row)
                put_long_row(src, base + row * g.row_bytes, runs, row * out_row, skip, end);
            return;
        }
        const uint64_t per_chunk = batch_ / g.row_bytes;
        while (row < last) {
            if (s_.stop) return;
            flush();  // the whole buffer is ours
            const uint64_t rows = std::min(per_chunk, last - row);
            uint8_t* buf = buffer();
            read_all(src, base + row * g.row_bytes, buf, static_cast<size_t>(rows * g.row_bytes));
            // In place: with ascending indices every element moves towards the front, never over an
            // element still to be moved.
            for (uint64_t r = 0; r < rows; ++r) {
                uint8_t* to = buf + r * out_row;
                const uint8_t* from = buf + r * g.row_bytes;
                // Scattered channels make runs of one or two elements: a fixed-size copy per element
                // is then several times cheaper than a memmove call per run.
                if (g.elem_bytes == 2 && runs.size() * 2 > g.index->size())
                    move_elements<2>(to, from, *g.index);
                else if (g.elem_bytes == 4 && runs.size() * 2 > g.index->size())
                    move_elements<4>(to, from, *g.index);
                else
                    for (const Run& run : runs) std::memmove(to + run.out, from + run.in, run.len);
            }
            const uint64_t lo = std::max(skip, row * out_row);
            const uint64_t hi = std::min(end, (row + rows) * out_row);
            add(buf + (lo - row * out_row), static_cast<size_t>(hi - lo));
            fill_ = static_cast<size_t>(rows * out_row);
            s_.gathered_bytes.fetch_add(hi - lo, std::memory_order_relaxed);
            row += rows;
        }
    }

    // One row longer than the buffer, read in windows of the buffer's size that start at the next kept
    // element; `out` is the row's first byte in the segment's output, of which [skip, end) is wanted.
    void put_long_row(const InputFile& src, uint64_t row_at, const std::vector<Run>& runs, uint64_t out,
                      uint64_t skip, uint64_t end) {
        size_t ri = 0;
        uint64_t done = 0;  // bytes of runs[ri] already taken
        while (ri < runs.size()) {
            if (s_.stop) return;
            flush();
            uint8_t* buf = buffer();
            const uint64_t win = runs[ri].in + done;
            const uint64_t win_end = std::min(win + batch_, runs.back().in + runs.back().len);
            const uint64_t o_lo = out + runs[ri].out + done;
            read_all(src, row_at + win, buf, static_cast<size_t>(win_end - win));
            uint64_t n = 0;  // compacted bytes; in place, as in put_gather
            while (ri < runs.size() && runs[ri].in + done < win_end) {
                const uint64_t take = std::min(runs[ri].len - done, win_end - (runs[ri].in + done));
                std::memmove(buf + n, buf + (runs[ri].in + done - win), take);
                n += take;
                done += take;
                if (done == runs[ri].len) ++ri, done = 0;
            }
            const uint64_t lo = std::max(skip, o_lo), hi = std::min(end, o_lo + n);
            if (lo < hi) {
                add(buf + (lo - o_lo), static_cast<size_t>(hi - lo));
                fill_ = static_cast<size_t>(n);
                s_.gathered_bytes.fetch_add(hi - lo, std::memory_order_relaxed);
            }
        }
    }

    // Writes the gathered batch.
    void flush() {
        write_batch(out_, iov_, dst_);
        dst_ += pending_;
        iov_.clear();
        pending_ = 0;
        fill_ = 0;
        check_interrupted();
    }

  private:
    static constexpr size_t kMaxIov = 1024;  // IOV_MAX on Linux

    // pwritev of `iov` at `dst` of `out`, however many calls it takes; then writeback and interrupts.
    void write_batch(OutputFile* out, std::vector<iovec>& iov, uint64_t dst) {
        size_t first = 0;
        while (first < iov.size()) {
            const int count = static_cast<int>(iov.size() - first);
            const ssize_t w = ::pwritev(out->fd(), iov.data() + first, count, static_cast<off_t>(dst));
            s_.calls.fetch_add(1, std::memory_order_relaxed);
            if (w < 0) {
                if (errno == EINTR) {
                    check_interrupted();
                    continue;
                }
                throw IoError(out->final_path(), "write", errno);
            }
            if (w == 0) throw IoError(out->final_path(), "write: no progress");
            auto done = static_cast<size_t>(w);
            dst += done;
            if (s_.options.on_progress) s_.options.on_progress(done);
            while (done > 0) {  // partial write: skip what went out
                iovec& v = iov[first];
                const size_t k = std::min(done, v.iov_len);
                v.iov_base = static_cast<uint8_t*>(v.iov_base) + k;
                v.iov_len -= k;
                done -= k;
                if (v.iov_len == 0) ++first;
            }
            while (first < iov.size() && iov[first].iov_len == 0) ++first;
        }
        start_writeback(out, dst);
        check_interrupted();
    }

    // Every options.writeback_bytes (256 MiB), the kernel is asked to start writing them to disk, so the
    // disk works while we copy instead of only in the final fsync. The request goes to the writeback
    // thread (io/writeback.h): made here, it stalled the copy whenever the device queue was full.

    void start_writeback() { start_writeback(out_, dst_); }
    // Everything of the current item before `dst` is in `out`.
    void start_writeback(OutputFile* out, uint64_t dst) {
        if (!out || !s_.options.early_writeback || !s_.options.durable ||
            dst < kicked_ + std::max<uint64_t>(s_.options.writeback_bytes, 1))
            return;
        s_.writeback.push(out->fd(), kicked_, dst - kicked_);
        kicked_ = dst;
    }

    static inline const uint8_t kZeros[64 << 10] = {};

    void read_all(const InputFile& src, uint64_t off, uint8_t* p, size_t n) {
        if (src.remote()) {
            s_.calls.fetch_add(1, std::memory_order_relaxed);
            src.read(off, p, n);
            check_interrupted();
            return;
        }
        while (n > 0) {
            const ssize_t got = ::pread(src.fd(), p, n, static_cast<off_t>(off));
            s_.calls.fetch_add(1, std::memory_order_relaxed);
            if (got < 0) {
                if (errno == EINTR) {
                    check_interrupted();
                    continue;
                }
                throw IoError(src.path(), "read", errno);
            }
            if (got == 0)
                throw IoError(src.path(), "unexpected end of file (was it truncated while copying?)");
            p += got;
            off += static_cast<uint64_t>(got);
            n -= static_cast<size_t>(got);
        }
    }

    uint8_t* buffer() {
        if (!bounce_) bounce_ = std::make_unique<uint8_t[]>(batch_);
        return bounce_.get();
    }
    uint64_t room() {
        if (pending_ >= batch_ || iov_.size() >= kMaxIov) flush();
        return batch_ - pending_;
    }
    void add(const uint8_t* p, size_t n) {
        if (n == 0) return;
        // Contiguous memory (consecutive reads into the bounce buffer) extends the last iovec.
        if (!iov_.empty() && static_cast<const uint8_t*>(iov_.back().iov_base) + iov_.back().iov_len == p)
            iov_.back().iov_len += n;
        else
            iov_.push_back({const_cast<uint8_t*>(p), n});
        pending_ += n;
    }
    Shared& s_;
    size_t batch_;
    std::vector<iovec> iov_;
    size_t pending_ = 0;
    std::unique_ptr<uint8_t[]> bounce_;
    size_t fill_ = 0;
    OutputFile* out_ = nullptr;
    uint64_t dst_ = 0;     // where the next batch goes
    uint64_t kicked_ = 0;  // writeback has been started for [item start, kicked_)
};

}  // namespace gguf_reap::copy_detail
