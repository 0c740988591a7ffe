// Early writeback on a thread of its own. The copy engine asks the kernel to start writing each
// finished stretch of an output to the disk (sync_file_range, SYNC_FILE_RANGE_WRITE), so that the
// final fsync has little left to wait for. That call blocks whenever the device's request queue is
// full, which on the copying thread stalls the copy for as long; handed to this queue's own thread, the
// copy goes on while the disk works. Measured on the Kimi-K3-shaped benchmark: docs/perf/splice.md.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

namespace gguf_reap {

class WritebackQueue {
  public:
    // Asks for writeback of [offset, offset + length) of `fd` to start; returns at once. `fd` must stay
    // open until run() has returned.
    void push(int fd, uint64_t offset, uint64_t length);
    // Starts the writeback of every range pushed, in order, until close() and the queue is empty.
    // Failures are ignored: the writeback is advisory, and the final fsync reports any error.
    void run();
    // No more ranges: run() returns once it has started those already queued.
    void close();
    // What run() has started so far: ranges, and the bytes they cover.
    uint64_t started_ranges() const { return started_ranges_; }
    uint64_t started_bytes() const { return started_bytes_; }

  private:
    struct Range {
        int fd;
        uint64_t offset, length;
    };
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<Range> ranges_;
    bool closed_ = false;
    uint64_t started_ranges_ = 0, started_bytes_ = 0;  // run()'s thread only
};

}  // namespace gguf_reap
