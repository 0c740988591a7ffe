#include "io/copy_engine.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/copy_writer.h"
#include "io/output_file.h"
#include "io/parallel.h"
#include "io/prefetcher.h"
#include "io/signals.h"
#include "io/writeback.h"

namespace gguf_reap {

namespace {

using copy_detail::Shared;
using copy_detail::WorkItem;
using copy_detail::Writer;

// One syscall moves at most this much, so an interrupt is noticed within a fraction of a second even
// on a slow disk, and progress moves smoothly.
constexpr uint64_t kMaxCallBytes = uint64_t{64} << 20;
// All per-thread buffers together stay under this, whatever --threads says (peak RSS target 64 MiB).
constexpr size_t kBufferBudget = size_t{32} << 20;
constexpr size_t kMinBuffer = size_t{64} << 10;
constexpr unsigned kMaxThreads = 64;

// Errors after which copy_file_range cannot work for this pair of files but pread/pwrite can: across
// filesystems on older kernels (EXDEV), filesystems without support (EINVAL, EOPNOTSUPP), kernels
// before 4.5 (ENOSYS).
bool kernel_refuses(int err) {
    return err == EXDEV || err == EINVAL || err == EOPNOTSUPP || err == ENOSYS;
}

// copy_file_range [off, off+n) of `src` to `dst_off` of `out`. Returns the bytes it could not move
// because the kernel refused (they are then copied through the buffer); 0 when all moved.
uint64_t kernel_copy(Shared& s, const InputFile& src, OutputFile& out, uint64_t off, uint64_t dst_off,
                     uint64_t n) {
    loff_t in_off = static_cast<loff_t>(off);
    loff_t out_off = static_cast<loff_t>(dst_off);
    while (n > 0) {
        if (s.stop) return 0;
        const size_t want = static_cast<size_t>(std::min(n, kMaxCallBytes));
        const ssize_t got = ::copy_file_range(src.fd(), &in_off, out.fd(), &out_off, want, 0);
        s.calls.fetch_add(1, std::memory_order_relaxed);
        if (got < 0) {
            const int err = errno;
            if (err == EINTR) {
                check_interrupted();
                continue;
            }
            if (kernel_refuses(err) && s.options.method == CopyMethod::kAuto) {
                s.kernel_ok = false;
                return n;
            }
            throw IoError(out.final_path(), fmt::format("copy_file_range from {}", src.path()), err);
        }
        if (got == 0) throw IoError(src.path(), "unexpected end of file (was it truncated while copying?)");
        s.kernel_bytes.fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
        if (s.options.on_progress) s.options.on_progress(static_cast<uint64_t>(got));
        n -= static_cast<uint64_t>(got);
        check_interrupted();
    }
    return 0;
}

// Source extents with gaps between them (the pruned slabs) defeat the kernel's own readahead, so the
// next 64 MiB of them are announced ahead of the copy (io/prefetcher.h); extents at most 32 KiB apart
// are announced as one (one pruned slab of a few KiB is cheaper to read than to skip; merging gaps up
// to 128 KiB read the whole tensor and was slower, docs/perf/splice.md). Gathers read whole rows front
// to back, which the kernel's readahead serves.
constexpr uint64_t kPrefetchBytes = uint64_t{64} << 20;
constexpr uint64_t kPrefetchGap = uint64_t{32} << 10;

bool is_extent(const CopySegment& c) {
    return c.src != kSegmentLiteral && c.src != kSegmentZeros && c.gather == kNoGather;
}

void run_item(Shared& s, Writer& w, const WorkItem& item) {
    const CopyJob& job = *s.jobs[item.job];
    OutputFile& out = *s.outputs[item.job];
    const auto& segs = job.segments;
    // First segment that ends after item.lo.
    auto it = std::upper_bound(segs.begin(), segs.end(), item.lo,
                               [](uint64_t v, const CopySegment& c) { return v < c.dst_offset + c.length; });
    w.begin(&out, item.lo);
    // The item's source extents, in copy order (nothing past the item: another one reads beyond it).
    Prefetcher prefetch(kPrefetchBytes, kPrefetchGap);
    if (s.options.prefetch)
        for (auto c = it; c != segs.end() && c->dst_offset < item.hi; ++c) {
            if (is_extent(*c)) {
                const uint64_t lo = std::max(item.lo, c->dst_offset);
                prefetch.add(*s.sources[c->src], c->src_offset + (lo - c->dst_offset),
                             std::min(item.hi, c->dst_offset + c->length) - lo);
            } else if (c->gather != kNoGather && s.sources[c->src]->remote()) {
                // Over HTTP nothing reads ahead but the prefetcher: a gather's whole rows are announced.
                const CopyGather& g = job.gathers[c->gather];
                const uint64_t out_row = g.index->size() * uint64_t{g.elem_bytes};
                const uint64_t lo = std::max(item.lo, c->dst_offset) - c->dst_offset;
                const uint64_t hi = std::min(item.hi, c->dst_offset + c->length) - c->dst_offset;
                const uint64_t first = lo / out_row, last = (hi + out_row - 1) / out_row;
                prefetch.add(*s.sources[c->src], c->src_offset + first * g.row_bytes,
                             (last - first) * g.row_bytes);
            }
        }
    if (s.options.prefetch) prefetch.advance(0);
    uint64_t consumed = 0;  // source bytes of the extents copied so far
    uint64_t checkpoint = item.lo;
    // A resumable run: every checkpoint_bytes, the bytes so far are made durable, then reported for the
    // journal (data first, then the journal that says it is there: docs/splice.md "Resume").
    const auto maybe_checkpoint = [&] {
        if (!s.options.on_durable || w.position() < checkpoint + s.options.checkpoint_bytes) return;
        w.sync();
        checkpoint = w.position();
        if (::fdatasync(out.fd()) != 0) throw IoError(out.final_path(), "fsync", errno);
        s.options.on_durable(item.job, checkpoint);
    };
    for (; it != segs.end() && it->dst_offset < item.hi; ++it) {
        if (s.stop) return;
        check_interrupted();
        maybe_checkpoint();
        const uint64_t lo = std::max(item.lo, it->dst_offset);
        const uint64_t hi = std::min(item.hi, it->dst_offset + it->length);
        if (s.options.prefetch && is_extent(*it)) {
            prefetch.advance(consumed);
            consumed += hi - lo;
        }
        const uint64_t skip = lo - it->dst_offset;
        const uint64_t n = hi - lo;
        if (it->src == kSegmentLiteral) {
            w.put_memory(job.literals[it->src_offset].data() + skip, n);
            s.literal_bytes.fetch_add(n, std::memory_order_relaxed);
        } else if (it->src == kSegmentZeros) {
            w.put_zeros(n);
            s.zero_bytes.fetch_add(n, std::memory_order_relaxed);
        } else if (it->gather != kNoGather) {
            w.put_gather(*s.sources[it->src], job.gathers[it->gather], it->src_offset, skip, n);
        } else {
            const InputFile& src = *s.sources[it->src];
            const uint64_t from = it->src_offset + skip;
            uint64_t left = n;
            // A remote source has no descriptor: its bytes always come through the buffer.
            const bool kernel = !src.remote() && (s.options.method == CopyMethod::kKernel ||
                                                  (s.options.method == CopyMethod::kAuto && s.kernel_ok &&
                                                   it->length >= s.options.kernel_min_bytes));
            if (kernel) {
                w.sync();
                left = kernel_copy(s, src, out, from, lo, n);
                w.resume(hi - left);
            }
            // In pieces of at most a checkpoint when resumable: an extent may be hundreds of MiB.
            for (uint64_t at = from + (n - left); left > 0;) {
                const uint64_t piece =
                    s.options.on_durable ? std::min(left, s.options.checkpoint_bytes) : left;
                w.put_read(src, at, piece);
                at += piece;
                left -= piece;
                if (left > 0) maybe_checkpoint();
            }
        }
    }
    if (!s.stop) w.sync();
}

void worker(Shared& s, size_t buffer_bytes) {
    Writer w(s, buffer_bytes);
    try {
        for (;;) {
            const size_t i = s.next.fetch_add(1);
            if (i >= s.items.size() || s.stop) break;
            run_item(s, w, s.items[i]);
        }
    } catch (...) {
        s.fail(std::current_exception());
    }
}

// Reserves the file's blocks up front: a full disk fails now, not after hours of copying.
void preallocate(OutputFile& out, uint64_t size) {
    if (size == 0) return;
    if (::fallocate(out.fd(), 0, 0, static_cast<off_t>(size)) == 0) return;
    const int err = errno;
    if (err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) return;  // not supported here: copy anyway
    throw IoError(out.final_path(), fmt::format("reserve {} bytes (fallocate)", size), err);
}

// fsync of every temporary, in parallel: the flushes overlap on the device instead of queueing.
void flush_all(std::vector<std::unique_ptr<OutputFile>>& outputs, unsigned threads) {
    parallel_for(outputs.size(), static_cast<int>(threads), [&](size_t i) {
        if (::fdatasync(outputs[i]->fd()) != 0) throw IoError(outputs[i]->final_path(), "fsync", errno);
    });
}

}  // namespace

const char* copy_method_name(CopyMethod m) {
    switch (m) {
        case CopyMethod::kAuto:
            return "auto";
        case CopyMethod::kKernel:
            return "copy_file_range";
        case CopyMethod::kReadWrite:
            return "pread/pwrite";
    }
    return "?";
}

CopyReport run_copy_jobs(const std::vector<const CopyJob*>& jobs,
                         const std::vector<const InputFile*>& sources, const CopyOptions& options) {
    const auto t0 = std::chrono::steady_clock::now();
    check_copy_jobs(jobs, sources);
    check_interrupted();

    // Temporaries first: they exist (and are removed again by their destructors) from here on.
    const bool resumable = !options.partial_paths.empty();
    if (resumable &&
        (options.partial_paths.size() != jobs.size() || options.resume_from.size() != jobs.size()))
        throw std::logic_error("run_copy_jobs: one partial path and resume offset per job");
    std::vector<std::unique_ptr<OutputFile>> outputs;
    for (size_t j = 0; j < jobs.size(); ++j) {
        const CopyJob* job = jobs[j];
        outputs.push_back(resumable ? std::make_unique<OutputFile>(job->path, options.partial_paths[j])
                                    : std::make_unique<OutputFile>(job->path));
        if (options.preallocate) preallocate(*outputs.back(), job->size);
    }
    for (const InputFile* src : sources) src->advise_sequential(0, src->size());

    Shared s(jobs, sources, options, outputs);
    const uint64_t item_bytes = options.work_item_bytes && !resumable ? options.work_item_bytes : UINT64_MAX;
    for (size_t j = 0; j < jobs.size(); ++j)
        for (uint64_t lo = resumable ? std::min(options.resume_from[j], jobs[j]->size) : 0;
             lo<jobs[j]->size; lo = jobs[j]->size - lo> item_bytes ? lo + item_bytes : jobs[j]->size)
            s.items.push_back({j, lo, std::min(jobs[j]->size - lo, item_bytes) + lo});

    const unsigned threads = static_cast<unsigned>(std::clamp<size_t>(
        options.threads, 1, std::min<size_t>(kMaxThreads, std::max<size_t>(s.items.size(), 1))));
    const size_t buffer = std::max(kMinBuffer, std::min(options.buffer_bytes, kBufferBudget / threads));
    // One more worker starts the early writeback, last, so that it runs only if every copy worker
    // started (run_workers); the last copy worker to finish closes its queue.
    const bool writeback = options.early_writeback && options.durable;
    std::atomic<unsigned> copying{threads};
    run_workers(threads + (writeback ? 1 : 0), [&](size_t w) {
        if (w == threads) return s.writeback.run();
        worker(s, buffer);
        if (copying.fetch_sub(1) == 1) s.writeback.close();
    });
    if (s.error) std::rethrow_exception(s.error);

    // Complete: flush everything, then rename. A failure in between takes back the renames done.
    check_interrupted();
    if (options.durable) flush_all(outputs, threads);
    // Every source must still be the file that was parsed and planned: one truncated or rewritten while
    // it was copied leaves old and new bytes mixed in the output (docs/reliability.md).
    InputFile::check_unchanged_all(sources);
    check_interrupted();
    // Renamed last to first: the first shard, the one llama.cpp is given, appears only once every
    // other file of the set is in place, so a crash between two renames leaves no loadable partial set.
    // Files of an earlier set being replaced (--force) go first, the first shard first: a crash then
    // cannot leave old and new shards of the same shape mixed into one loadable set.
    const size_t n = outputs.size();
    for (const auto& out : outputs) ::unlink(out->final_path().c_str());  // ENOENT: nothing to replace
    size_t committed = 0;
    try {
        for (; committed < n; ++committed) outputs[n - 1 - committed]->commit(options.durable);
    } catch (...) {
        for (size_t i = 0; i < committed; ++i) ::unlink(outputs[n - 1 - i]->final_path().c_str());
        throw;
    }

    CopyReport r;
    r.kernel_bytes = s.kernel_bytes;
    r.buffered_bytes = s.buffered_bytes;
    r.literal_bytes = s.literal_bytes;
    r.zero_bytes = s.zero_bytes;
    r.gathered_bytes = s.gathered_bytes;
    r.copy_calls = s.calls;
    r.writeback_ranges = s.writeback.started_ranges();
    r.writeback_bytes = s.writeback.started_bytes();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

}  // namespace gguf_reap
