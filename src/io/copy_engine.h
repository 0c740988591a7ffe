// The copy engine: writes output files described byte for byte by a list of segments (literal bytes,
// zero padding, or a range of a source file), each under a temporary name, and renames them into place
// only when every file is complete and flushed. It knows nothing about GGUF or experts.
//
// Source extents of at least kernel_min_bytes move with copy_file_range (the kernel copies page to
// page, or the filesystem clones); smaller ones are read into a bounded buffer and written together
// with the header bytes and padding around them in one pwritev. Where the kernel refuses
// copy_file_range (EXDEV, EINVAL, EOPNOTSUPP, ENOSYS) every extent goes through the buffer. Gather
// segments (selected elements of every row of a source range) always go through the buffer, a chunk of
// whole rows at a time (a row longer than the buffer: one read per run of adjacent elements). Each
// worker reads and writes through one buffer of its own, so memory is at most threads × buffer_bytes
// (32 MiB in all) plus the segment lists, whatever the size of the model or of any tensor: no tensor is
// ever held in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf_reap/copy_report.h"
#include "io/copy_job.h"
#include "io/input_file.h"

namespace gguf_reap {

struct CopyOptions {
    unsigned threads = 1;
    CopyMethod method = CopyMethod::kAuto;
    // Per thread: the most bytes gathered before one pwritev, and the pread buffer's size. All
    // threads together stay under 32 MiB whatever this says.
    size_t buffer_bytes = size_t{512} << 10;
    // kAuto: extents of at least this many bytes go through copy_file_range; smaller ones are read
    // into the buffer and written with the bytes around them in one pwritev, which on the
    // Kimi-K3-shaped benchmark (100k extents of 17-34 KiB) took 1.3 s where copy_file_range took 2.3 s.
    uint64_t kernel_min_bytes = uint64_t{1} << 20;  // L2-sized: pread+pwritev through 8 MiB measured slower
    // 0: each file is one work item, written front to back by one thread (what a disk likes best).
    // Otherwise files are cut into items of this many bytes that threads write in parallel.
    uint64_t work_item_bytes = 0;
    // Reserve each file's full size before copying (fallocate), so a full disk fails at once rather
    // than hours in. Ignored where the filesystem cannot do it.
    bool preallocate = true;
    // Announce the next 64 MiB of source ranges to the kernel (POSIX_FADV_WILLNEED) as the copy
    // goes: from a cold cache, extents with gaps between them otherwise defeat its readahead.
    bool prefetch = true;
    // Start writeback of every finished writeback_bytes at once (sync_file_range, on a thread of its
    // own: io/writeback.h), so the final fsync is short.
    bool early_writeback = true;
    uint64_t writeback_bytes = uint64_t{256} << 20;
    // fsync every output (and its directory) before and after renaming it into place. false (splice
    // --no-fsync): outputs are still complete before their names appear, but not yet on the disk.
    bool durable = true;
    // Called from worker threads with the number of output bytes just finished; must be thread-safe.
    std::function<void(uint64_t)> on_progress;

    // Resumable runs (splice from a URL, docs/splice.md "Resume"). When partial_paths is not empty
    // (one per job), each job is written into that file, which is kept on failure, starting at
    // resume_from[job] (the bytes before it are already there and durable); each file is one work
    // item written front to back; and every checkpoint_bytes its bytes so far are made durable
    // (fdatasync) and on_durable(job, bytes) is called, from the worker, for the caller's journal.
    std::vector<std::string> partial_paths;
    std::vector<uint64_t> resume_from;
    uint64_t checkpoint_bytes = uint64_t{64} << 20;
    std::function<void(size_t, uint64_t)> on_durable;
};

// Writes every job to a temporary in its final directory, flushes them all, checks that no source
// changed while it was read (InputFile::check_unchanged, IoError), removes existing files under the
// final names, then renames the temporaries into place last job first. On any error or interrupt
// (SIGINT/SIGTERM via signals.h) every temporary is removed, files already renamed by this call are
// removed again, and the error propagates (IoError, Interrupted).
CopyReport run_copy_jobs(const std::vector<const CopyJob*>& jobs,
                         const std::vector<const InputFile*>& sources, const CopyOptions& options);

}  // namespace gguf_reap
