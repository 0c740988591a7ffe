// The engine behind every RemoteFile (io/remote_file.cpp, the one file that includes this): one pool of
// connections for all files, the requests announced ahead (gaps merged by the gap policy), and the
// buffers they fill, under one memory budget.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/remote.h"
#include "io/remote_file.h"
#include "io/signals.h"

namespace gguf_reap {

namespace remote_detail {

// Requests of at most 4 MiB: large enough that a request's round trip is small against its transfer
// on a fast link, few enough that a server answering a few hundred requests a second keeps up.
constexpr uint64_t kChunkMax = uint64_t{4} << 20;
// Bytes fetched ahead and not yet read, all files and passes together, counted in whole buffers (plus
// one buffer for the first waiting request of a stream, and one per reader that waits for a request
// or fetches one itself): the copy engine's buffers and this stay under 64 MiB. A request holds
// no buffer while it waits for its answer: it takes one when its first body byte arrives, and waits
// there (the server's bytes wait in the socket) while the budget is full. So requests in flight are
// bounded by the connections, not by the budget, and a link with latency is kept busy (with the
// buffer taken at the request, at most six requests of 4 MiB were in flight, and 40 ms before every
// response made a splice 2.6x slower; docs/performance.md "Remote"). Chunks live in buffers of
// kChunkMax that are reused (freed and allocated again by eleven threads, 4 MiB blocks stayed in
// glibc's per-thread arenas and a splice peaked at 99 MiB), mapped from the kernel, not taken from
// malloc (Buffer, below).
constexpr uint64_t kBudget = uint64_t{24} << 20;
// Gap policy (docs/remote.md, measured in docs/performance.md "Remote"): two announced ranges of one
// stream become one request when the gap between them is at most 256 KiB and the unread bytes of the
// request stay within 1/16 of the bytes it is for. On 17 KiB slabs 1/10 was 16 % faster (1,064
// requests against 1,306), but a small splice then fetched 1.106x its output with the headers'
// windows, over the 1.10x a splice may fetch; 1/16 fetched 1.04x.
constexpr uint64_t kMaxGap = uint64_t{256} << 10;
constexpr uint64_t kWasteShare = 16;
// Unannounced reads: windows from 256 KiB, doubling while sequential, up to 2 MiB; at most 8 MiB held.
constexpr uint64_t kWindowMin = uint64_t{256} << 10;
constexpr uint64_t kWindowMax = uint64_t{2} << 20;
constexpr uint64_t kWindowBudget = uint64_t{8} << 20;

unsigned connections() {
    return remote_settings().http_connections;
}

enum class ChunkState { kQueued, kFetching, kDone, kFailed, kFreed };

// A chunk's buffer: kChunkMax bytes mapped for it and unmapped when it goes, never malloc's. glibc
// maps a block that large only until it frees a mapped block as large: it then raises its threshold
// and serves such blocks from the arenas of the threads that ask (sixteen fetching threads here),
// which keep their pages once freed. With malloc's buffers a 13 GB splice peaked at 77-81 MiB; with
// glibc's threshold held at 128 KiB (GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072), or with
// these, at 47-50 MiB (docs/performance.md "Remote").
struct Unmap {
    void operator()(uint8_t* p) const { ::munmap(p, kChunkMax); }
};
using Buffer = std::unique_ptr<uint8_t, Unmap>;
inline Buffer map_buffer() {
    void* p = ::mmap(nullptr, kChunkMax, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return Buffer(static_cast<uint8_t*>(p));
}

struct Chunk {
    RemoteFile* file = nullptr;
    uint64_t stream = 0;
    uint64_t off = 0, len = 0;
    uint64_t needed = 0;  // announced bytes not read yet
    ChunkState state = ChunkState::kQueued;
    Buffer data;
    std::exception_ptr error;
    bool orphan = false;  // its stream closed while it was being fetched
    bool wanted = false;  // a reader waits for it
};
using ChunkPtr = std::shared_ptr<Chunk>;

struct Stream {
    std::deque<ChunkPtr> chunks;  // announcement order, unread ones only
    uint64_t ahead = 0;           // bytes fetched or being fetched, not freed
    bool ended = false;           // nothing more will be announced (RemoteFile::end_stream)
};

struct Window {
    RemoteFile* file = nullptr;
    uint64_t off = 0;
    std::vector<uint8_t> bytes;
};

}  // namespace remote_detail

// (remote_file.cpp, the one file that includes this, reads the names above unqualified.)
using namespace remote_detail;

struct RemoteEngine {
    std::mutex mu;
    std::condition_variable work_cv, done_cv, buffer_cv;
    std::map<uint64_t, Stream> streams;
    uint64_t next_stream = 1;
    uint64_t held = 0;
    std::map<RemoteFile*, std::multimap<uint64_t, ChunkPtr>> index;  // live chunks by file and offset
    std::list<Window> windows;                                       // most recently used first
    uint64_t window_bytes = 0;
    std::map<RemoteFile*, uint64_t> next_window;  // where a sequential read would continue, its size
    std::map<RemoteFile*, uint64_t> window_size;
    std::vector<std::thread> threads;
    bool stop = false;
    std::vector<Buffer> spare;  // chunk buffers not in use
    // Every file opened, by path. The engine owns them: a worker may be fetching for any of them until
    // the threads are joined, so they are destroyed after that, in ~RemoteEngine (a registry of its own,
    // a static constructed after the engine, was destroyed first at exit, under a running fetch).
    std::mutex open_mu;
    std::map<std::string, std::shared_ptr<RemoteFile>> files;

    Buffer buffer() {  // under mu
        if (spare.empty()) return map_buffer();
        auto b = std::move(spare.back());
        spare.pop_back();
        return b;
    }
    void give_back(Buffer b) {  // under mu
        if (b && spare.size() < kBudget / kChunkMax + 1) spare.push_back(std::move(b));
    }

    static RemoteEngine& get() {
        static RemoteEngine e;
        return e;
    }
    ~RemoteEngine() {
        {
            std::lock_guard<std::mutex> lock(mu);
            stop = true;
        }
        cancel_http();  // at exit nobody reads what is still being fetched
        work_cv.notify_all();
        for (auto& t : threads) t.join();
        files.clear();
    }

    // A chunk's share of the budget: the whole buffer it occupies, whatever its length (a 1 MiB run
    // in a 4 MiB buffer touches 4 MiB once the buffer has held a full chunk).
    static uint64_t cost(const ChunkPtr&) { return kChunkMax; }

    void start_threads() {  // under mu
        if (!threads.empty()) return;
        for (unsigned i = 0; i < connections(); ++i) threads.emplace_back([this] { work(); });
    }

    void free_chunk(const ChunkPtr& c) {  // under mu
        if (c->state == ChunkState::kFetching) {
            c->orphan = true;
            buffer_cv.notify_all();
            return;
        }
        if (c->data) held -= std::min(held, cost(c));
        if (c->state != ChunkState::kQueued) {
            auto s = streams.find(c->stream);
            if (s != streams.end()) s->second.ahead -= std::min(s->second.ahead, c->len);
        }
        give_back(std::move(c->data));
        c->state = ChunkState::kFreed;
        buffer_cv.notify_all();
        auto& idx = index[c->file];
        for (auto [it, end] = idx.equal_range(c->off); it != end; ++it)
            if (it->second == c) {
                idx.erase(it);
                break;
            }
        work_cv.notify_all();
    }

    // The next chunk to fetch: the first queued one of the stream with the least fetched ahead. Not held
    // back by the budget: a request holds no buffer until its answer arrives (take_buffer), so the
    // connections stay busy while the budget is full (with 200 ms before every response, the data
    // of a splice took 1.89-1.94 s against 2.11-2.57 s when no request was sent while it was full).
    ChunkPtr pick() {  // under mu
        ChunkPtr best;
        uint64_t best_ahead = UINT64_MAX;
        for (auto& [id, s] : streams) {
            if (s.ahead >= best_ahead) continue;
            for (const ChunkPtr& c : s.chunks)
                if (c->state == ChunkState::kQueued) {
                    if (held_back(s, c)) break;
                    best = c;
                    best_ahead = s.ahead;
                    break;
                }
        }
        return best;
    }

    // The last request of a stream still being announced, while the gap policy may grow it: fetched
    // once more is announced or the stream ends (or by its reader, which then needs it), never ahead,
    // so that the ranges are merged into requests the same way whatever the timing.
    static bool held_back(const Stream& s, const ChunkPtr& c) {  // under mu
        return !s.ended && c == s.chunks.back() && c->len < kChunkMax;
    }

    void claim(const ChunkPtr& c) {  // under mu
        c->state = ChunkState::kFetching;
        streams[c->stream].ahead += c->len;
    }

    // Whether `c` is the first chunk of its stream still waiting for its bytes: its reader will need it
    // before any other, so it may take one buffer over the budget (the budget is often held by chunks
    // fetched after it, which its reader reads only after it).
    bool first_waiting(const ChunkPtr& c) {  // under mu
        auto s = streams.find(c->stream);
        if (s == streams.end()) return false;
        for (const ChunkPtr& q : s->second.chunks)
            if (q->state == ChunkState::kQueued || (q->state == ChunkState::kFetching && !q->data))
                return q == c;
        return false;
    }

    // The buffer of a claimed chunk whose first body byte has arrived: waits while the budget is full,
    // unless a reader waits for this very chunk (`wanted`) or fetches it itself (`now`): those always
    // get one, so that every waiting reader makes progress whatever holds the budget (at most one
    // buffer over the budget per reading thread, as when a reader fetches for itself). nullptr when
    // the chunk is no longer wanted (its stream closed, the process stopping, an interrupt).
    uint8_t* take_buffer(const ChunkPtr& c, bool now) {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
            if (stop || c->orphan || interrupted()) return nullptr;
            if (now || c->wanted || held + cost(c) <= kBudget ||
                (held + cost(c) <= kBudget + kChunkMax && first_waiting(c))) {
                c->data = buffer();
                held += cost(c);
                return c->data.get();
            }
            buffer_cv.wait_for(lock, std::chrono::milliseconds(100));
        }
    }

    // Fetches a claimed chunk; called without the lock. `now`: the reader fetches it for itself.
    void fetch(const ChunkPtr& c, bool now = false) {
        std::exception_ptr err;
        try {
            const std::function<uint8_t*()> acquire = [this, &c, now] { return take_buffer(c, now); };
            http_get_range(c->file->pin_, c->file->redirect_, c->off, c->len, acquire);
        } catch (...) {
            err = std::current_exception();
        }
        std::lock_guard<std::mutex> lock(mu);
        c->state = err ? ChunkState::kFailed : ChunkState::kDone;
        c->error = err;
        if (c->orphan) free_chunk(c);
        done_cv.notify_all();
    }

    void work() {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
            ChunkPtr c;
            work_cv.wait(lock, [&] { return stop || (c = pick()) != nullptr; });
            if (stop) return;
            claim(c);
            lock.unlock();
            fetch(c);
            lock.lock();
        }
    }

    // A live chunk of `f` holding `offset`, a finished one first.
    ChunkPtr find(RemoteFile* f, uint64_t offset) {  // under mu
        auto fi = index.find(f);
        if (fi == index.end()) return nullptr;
        auto& idx = fi->second;
        ChunkPtr found;
        for (auto it = idx.lower_bound(offset > kChunkMax ? offset - kChunkMax : 0);
             it != idx.end() && it->first <= offset; ++it) {
            const ChunkPtr& c = it->second;
            if (offset >= c->off + c->len) continue;
            if (!found || (c->state == ChunkState::kDone && found->state != ChunkState::kDone)) found = c;
        }
        return found;
    }
    // The first chunk start of `f` after `offset` (a direct read stops there), or UINT64_MAX.
    uint64_t next_start(RemoteFile* f, uint64_t offset) {  // under mu
        auto fi = index.find(f);
        if (fi == index.end()) return UINT64_MAX;
        auto it = fi->second.upper_bound(offset);
        return it == fi->second.end() ? UINT64_MAX : it->first;
    }

    // The reader of `c`'s stream has moved on to `c`: chunks announced before it are behind it.
    void passed(const ChunkPtr& c) {  // under mu
        auto s = streams.find(c->stream);
        if (s == streams.end()) return;
        auto& q = s->second.chunks;
        if (std::find(q.begin(), q.end(), c) == q.end()) return;
        while (!q.empty() && q.front() != c) {
            free_chunk(q.front());
            q.pop_front();
        }
    }
    void consumed(const ChunkPtr& c, uint64_t n) {  // under mu
        c->needed -= std::min(c->needed, n);
        if (c->needed > 0) return;
        auto s = streams.find(c->stream);
        if (s != streams.end()) {
            auto& q = s->second.chunks;
            if (auto it = std::find(q.begin(), q.end(), c); it != q.end()) q.erase(it);
        }
        free_chunk(c);
    }

    // Bytes at `offset` from a window, or 0.
    size_t from_window(RemoteFile* f, uint64_t offset, uint8_t* dst, size_t n) {  // under mu
        for (auto it = windows.begin(); it != windows.end(); ++it)
            if (it->file == f && offset >= it->off && offset - it->off < it->bytes.size()) {
                const size_t take =
                    static_cast<size_t>(std::min<uint64_t>(n, it->bytes.size() - (offset - it->off)));
                std::memcpy(dst, it->bytes.data() + (offset - it->off), take);
                windows.splice(windows.begin(), windows, it);
                return take;
            }
        return 0;
    }
    void add_window(Window w) {  // under mu
        window_bytes += w.bytes.size();
        windows.push_front(std::move(w));
        while (window_bytes > kWindowBudget && windows.size() > 1) {
            window_bytes -= windows.back().bytes.size();
            windows.pop_back();
        }
    }
};

}  // namespace gguf_reap
