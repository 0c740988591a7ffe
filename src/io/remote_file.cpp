#include "io/remote_file.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/remote.h"
#include "io/hub_cache.h"
#include "io/hub_repo.h"
#include "io/input_file.h"
#include "io/remote_engine.h"
#include "io/remote_url.h"
#include "io/signals.h"

namespace gguf_reap {

namespace {

// hf:// revisions pinned so far: "ENDPOINT ORG/REPO REVISION" → the commit, once the first file of
// that revision has been pinned. Files opened at the same time (the shards of a set, in parallel) wait
// for the first one's answer, so that every file of a run is pinned to one commit; when that first
// pin fails, the next waiting file asks for itself (its own error, naming its own path).
struct CommitPins {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, std::optional<std::string>> commits;  // nullopt: being asked
};
CommitPins& commit_pins() {
    static CommitPins p;
    return p;
}

}  // namespace

std::shared_ptr<RemoteFile> RemoteFile::open(const std::string& path) {
    // hf://ORG/REPO:QUANT reads as the first shard of the set it names (io/hub_repo.h).
    if (const auto quant = parse_hub_quant(path)) return open(resolve_hub_quant(path, *quant).first_shard);
    RemoteEngine& e = RemoteEngine::get();
    {
        std::lock_guard<std::mutex> lock(e.open_mu);
        if (auto it = e.files.find(path); it != e.files.end()) return it->second;
    }
    // Pinned outside the lock: several files (a set's shards) are pinned in parallel.
    std::shared_ptr<RemoteFile> f(new RemoteFile());
    if (const auto hub = parse_hub_path(path)) {
        const std::string key = fmt::format("{} {} {}", hub_endpoint(), hub->repo, hub->revision);
        CommitPins& cp = commit_pins();
        std::unique_lock<std::mutex> lock(cp.mu);
        for (;;) {
            auto it = cp.commits.find(key);
            if (it == cp.commits.end()) break;  // nobody has it, nobody is asking: ask
            if (it->second) {
                const std::string commit = *it->second;
                lock.unlock();
                f->pin_ = http_pin(path, hub_resolve_url(*hub, commit), f->redirect_);
                f->hub_revision_ = hub->repo + "@" + commit;
                break;
            }
            cp.cv.wait_for(lock, std::chrono::milliseconds(100));
            if (interrupted()) {
                lock.unlock();
                check_interrupted();
            }
        }
        if (f->hub_revision_.empty()) {
            cp.commits[key] = std::nullopt;
            lock.unlock();
            try {
                f->pin_ = http_pin(path, hub_resolve_url(*hub, hub->revision), f->redirect_);
                const std::string commit = f->pin_.repo_commit.empty() ? hub->revision : f->pin_.repo_commit;
                if (commit != hub->revision)  // from here on, ask for the commit, never the moving name
                    f->pin_ = http_pin(path, hub_resolve_url(*hub, commit), f->redirect_);
                f->hub_revision_ = hub->repo + "@" + commit;
                lock.lock();
                cp.commits[key] = commit;
            } catch (...) {
                if (!lock.owns_lock()) lock.lock();
                cp.commits.erase(key);
                cp.cv.notify_all();
                throw;
            }
            cp.cv.notify_all();
        }
        const std::string commit = f->hub_revision_.substr(f->hub_revision_.find('@') + 1);
        f->hub_sha256_ = hub_listed_sha256(hub->repo, commit, hub->file);
        // Pinned: the Hugging Face cache's copy of the file at that commit, if it is the Hub's file, is
        // read in its place (docs/remote.md, "The local Hugging Face cache").
        const std::string sha256 =
            f->hub_sha256_.empty() ? sha256_of_etag(f->pin_.linked_etag) : f->hub_sha256_;
        const HubCacheEntry cached = find_in_hub_cache(hub->repo, commit, hub->file, f->pin_.size, sha256);
        if (!cached.problem.empty())
            http_notice(fmt::format("{}: the Hugging Face cache's copy {} {}: not used, read from the Hub",
                                    path, cached.path, cached.problem));
        else if (cached.usable())
            f->cached_ = InputFile::open(cached.path);
    } else {
        f->pin_ = http_pin(path, path, f->redirect_);
    }
    std::lock_guard<std::mutex> lock(e.open_mu);
    return e.files.emplace(path, f).first->second;  // a file pinned meanwhile by another thread wins
}

std::string RemoteFile::pinned_path() const {
    const auto hub = parse_hub_path(pin_.display);
    if (!hub || hub_revision_.empty()) return pin_.display;
    return fmt::format("hf://{}/{}@{}", hub->repo, hub->file,
                       hub_revision_.substr(hub_revision_.find('@') + 1));
}

std::string RemoteFile::cache_path() const {
    return cached_ ? cached_->path() : std::string();
}

void RemoteFile::check_unchanged() {
    // A copy in the cache is a local file at a pinned commit: it is the one that could change.
    if (cached_) return cached_->check_unchanged();
    RedirectCache scratch;
    const HttpPin now = http_pin(pin_.display, pin_.origin_url, scratch);
    const auto shown = [](const std::string& tag) { return tag.empty() ? std::string("none") : tag; };
    std::string what;
    if (now.size != pin_.size)
        what = fmt::format("its size went from {} to {} bytes", pin_.size, now.size);
    else if (now.etag != pin_.etag)
        what = fmt::format("its ETag went from {} to {}", shown(pin_.etag), shown(now.etag));
    else if (now.linked_etag != pin_.linked_etag)
        what = fmt::format("its X-Linked-Etag went from {} to {}", shown(pin_.linked_etag),
                           shown(now.linked_etag));
    if (!what.empty()) throw IoError(pin_.display, changed_on_server(what));
}

uint64_t RemoteFile::open_stream() {  // static
    RemoteEngine& e = RemoteEngine::get();
    std::lock_guard<std::mutex> lock(e.mu);
    const uint64_t id = e.next_stream++;
    e.streams[id];
    return id;
}

void RemoteFile::announce(uint64_t stream, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
    if (cached_) return;  // read from the Hugging Face cache: nothing to fetch ahead
    RemoteEngine& e = RemoteEngine::get();
    std::lock_guard<std::mutex> lock(e.mu);
    auto si = e.streams.find(stream);
    if (si == e.streams.end()) return;
    auto& q = si->second.chunks;
    auto& idx = e.index[this];
    for (auto [offset, length] : ranges) {
        if (length == 0 || offset >= size()) continue;
        length = std::min(length, size() - offset);
        if (!q.empty()) {  // the gap policy: into the last request when it is close and little is wasted
            Chunk& last = *q.back();
            const uint64_t end = last.off + last.len;
            if (last.file == this && last.state == ChunkState::kQueued && offset >= end) {
                const uint64_t gap = offset - end;
                const uint64_t waste = last.len - last.needed + gap;
                const uint64_t take = std::min(length, kChunkMax - std::min(kChunkMax, last.len + gap));
                if (gap <= kMaxGap && take > 0 && waste * kWasteShare <= last.needed + take) {
                    last.len += gap + take;
                    last.needed += take;
                    offset += take;
                    length -= take;
                }
            }
        }
        while (length > 0) {
            auto c = std::make_shared<Chunk>();
            c->file = this;
            c->stream = stream;
            c->off = offset;
            c->len = c->needed = std::min(length, kChunkMax);
            idx.emplace(c->off, c);
            q.push_back(c);
            offset += c->len;
            length -= c->len;
        }
    }
    e.start_threads();
    e.work_cv.notify_all();
}

void RemoteFile::end_stream(uint64_t stream) {  // static
    RemoteEngine& e = RemoteEngine::get();
    std::lock_guard<std::mutex> lock(e.mu);
    auto si = e.streams.find(stream);
    if (si == e.streams.end()) return;
    si->second.ended = true;
    e.work_cv.notify_all();
}

void RemoteFile::close_stream(uint64_t stream) {  // static
    RemoteEngine& e = RemoteEngine::get();
    std::lock_guard<std::mutex> lock(e.mu);
    auto si = e.streams.find(stream);
    if (si == e.streams.end()) return;
    for (const ChunkPtr& c : si->second.chunks) e.free_chunk(c);
    e.streams.erase(si);
}

void RemoteFile::read(uint64_t offset, void* dst_, size_t n) {
    if (offset > size() || n > size() - offset)
        throw IoError(path(), "read past the end of the file (was it truncated?)");
    if (cached_) return cached_->read(offset, dst_, n);
    auto* dst = static_cast<uint8_t*>(dst_);
    RemoteEngine& e = RemoteEngine::get();
    std::unique_lock<std::mutex> lock(e.mu);
    while (n > 0) {
        if (const size_t got = e.from_window(this, offset, dst, n)) {
            offset += got;
            dst += got;
            n -= got;
            continue;
        }
        ChunkPtr c = e.find(this, offset);
        if (!c) {
            // Not announced: a direct request, up to the next announced chunk.
            const uint64_t stop = std::min<uint64_t>(offset + n, e.next_start(this, offset));
            const uint64_t piece = stop - offset;
            if (piece >= kWindowMin) {
                lock.unlock();
                http_get_range(pin_, redirect_, offset, piece, dst);
                lock.lock();
                offset += piece;
                dst += piece;
                n -= static_cast<size_t>(piece);
                continue;
            }
            uint64_t w = kWindowMin;
            if (auto it = e.next_window.find(this); it != e.next_window.end() && it->second == offset)
                w = std::min(kWindowMax, e.window_size[this] * 2);
            w = std::min(w, size() - offset);
            Window win{this, offset, std::vector<uint8_t>(static_cast<size_t>(w))};
            lock.unlock();
            http_get_range(pin_, redirect_, offset, w, win.bytes.data());
            lock.lock();
            e.next_window[this] = offset + w;
            e.window_size[this] = w;
            e.add_window(std::move(win));
            continue;
        }
        if (c->state == ChunkState::kQueued) {  // the pool has not reached it: fetch it here
            e.claim(c);
            lock.unlock();
            e.fetch(c, true);
            lock.lock();
            continue;
        }
        if (c->state == ChunkState::kFetching) {
            if (!c->wanted) {
                c->wanted = true;
                e.buffer_cv.notify_all();
            }
            e.done_cv.wait_for(lock, std::chrono::milliseconds(100));
            if (interrupted()) {
                lock.unlock();
                check_interrupted();
            }
            continue;
        }
        if (c->state == ChunkState::kFailed) std::rethrow_exception(c->error);
        const uint64_t take = std::min<uint64_t>(n, c->off + c->len - offset);
        std::memcpy(dst, c->data.get() + (offset - c->off), static_cast<size_t>(take));
        offset += take;
        dst += take;
        n -= static_cast<size_t>(take);
        e.passed(c);
        e.consumed(c, take);
    }
}

}  // namespace gguf_reap
