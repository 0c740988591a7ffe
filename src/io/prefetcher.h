// The one read-ahead for passes that read byte ranges with gaps between them (splice's kept slabs,
// audit's source runs, rank's imatrix entries): the kernel's own readahead follows one sequential
// stream, and every range after a gap would otherwise be a synchronous read from the disk (a
// Kimi-K3-shaped splice ran 4× slower than cp from a cold cache without it, docs/perf/splice.md). The
// next `horizon` bytes of the queued ranges are announced with POSIX_FADV_WILLNEED, again when half of
// that window is used; ranges of one file closer than `merge_gap` are announced as one request.
//
// A remote file (io/remote_file.h) has no kernel to ask: its ranges go to the file's own read-ahead,
// which fetches them over HTTP within its memory budget and its gap policy. They are announced by the
// same horizon, whole ranges at a time, and the stream is ended after the last one; the read-ahead
// holds a stream's last request back until more is announced or the stream ends, so the ranges are
// merged into the same requests whatever the timing. (They were announced all at once, for that
// reason: about 200 bytes of requests per kept extent of the pass, 7.4 MiB of the 50.6 MiB peak heap
// of a 13 GB Kimi-K3-shaped splice with 77,260 extents; announced by the horizon, its peak RSS went
// from 49.5 to 42.1 MiB, docs/performance.md "Remote".)
#pragma once

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "io/input_file.h"

namespace gguf_reap {

class Prefetcher {
  public:
    Prefetcher(uint64_t horizon, uint64_t merge_gap) : horizon_(horizon), merge_gap_(merge_gap) {}
    ~Prefetcher();
    Prefetcher(const Prefetcher&) = delete;
    Prefetcher& operator=(const Prefetcher&) = delete;

    // Queues a range the pass will read after those queued before it.
    void add(const InputFile& file, uint64_t offset, uint64_t length);
    // The pass has read `consumed` bytes of the queued ranges, counted in queue order. Thread-safe:
    // threads sharing one queue may report out of order (the largest count so far counts). Call it
    // with 0 before the first read.
    void advance(uint64_t consumed);

  private:
    struct Range {
        const InputFile* file;
        uint64_t offset, length;
    };
    void announce(int fd, uint64_t offset, uint64_t length);
    void flush();
    void announce_remote(RemoteFile* file, uint64_t offset, uint64_t length);
    void flush_remote();

    uint64_t horizon_, merge_gap_;
    std::vector<Range> ranges_;
    std::mutex mu_;
    size_t next_ = 0;      // the range being announced
    uint64_t within_ = 0;  // bytes of ranges_[next_] already announced
    uint64_t issued_ = 0;  // bytes of all ranges announced
    uint64_t consumed_ = 0;
    int pending_fd_ = -1;  // the merged request being built
    uint64_t pending_lo_ = 0, pending_hi_ = 0;
    uint64_t stream_ = 0;               // the remote read-ahead stream of this pass, 0 before any
    bool ended_ = false;                // its last range announced
    RemoteFile* batch_file_ = nullptr;  // consecutive ranges of one remote file, announced together
    std::vector<std::pair<uint64_t, uint64_t>> batch_;
};

}  // namespace gguf_reap
