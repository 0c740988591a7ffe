// A file read over HTTP range requests (docs/remote.md): the remote twin of InputFile, which holds one
// when its path is a URL, so that every layer above reads a remote model as it reads a local one.
//
// Opening pins the file: its size and ETag (io/http_client.h), and for hf:// paths the revision,
// resolved once per repository and revision to the commit the Hub names in X-Repo-Commit, so that a push
// during a run cannot mix two versions. Every later response is checked against the pin.
//
// Reads come two ways. Passes over many ranges (splice's kept slabs, audit's source runs) announce
// them first through io/prefetcher.h: each announcement is cut into requests of at most 4 MiB, ranges
// closer than the gap policy allows are merged into one request, and a pool of 16 connections fetches
// them ahead of the reader, in parallel, into memory bounded by a budget (six 4 MiB buffers in all,
// whatever the number of files, passes or threads). A request takes its buffer only when its first
// body byte arrives, so requests waiting on their round trips hold none. A read takes its bytes from
// there and frees them. Anything not
// announced (a header being parsed) is read through a small window that doubles while the reads stay
// sequential (256 KiB up to 2 MiB), so a header costs a few requests and little more than its size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/http_client.h"

namespace gguf_reap {

class InputFile;

class RemoteFile {
  public:
    // Pins `path` (https://, http:// or hf://); several files may be opened in parallel from different
    // threads (a remote shard set's siblings are). The same path opened again in this process gives the
    // same pinned file, which lives until the process ends. Throws Error (exit 2: malformed, 404, 401/403),
    // IoError, Interrupted.
    static std::shared_ptr<RemoteFile> open(const std::string& path);

    const std::string& path() const { return pin_.display; }
    uint64_t size() const { return pin_.size; }
    // The ETag that names this version: the Hub's X-Linked-Etag when its redirect sent one (the storage it
    // redirects to may send no ETag), else the file's ETag; "" when the server sent neither.
    const std::string& etag() const { return pin_.identity(); }
    // hf:// only: "ORG/REPO@COMMIT", the pinned revision (or REVISION when the server named no commit).
    const std::string& hub_revision() const { return hub_revision_; }
    // The path as a record names it: hf://ORG/REPO/PATH@COMMIT at the pinned commit, any other URL as given.
    std::string pinned_path() const;
    // hf:// only: the file's sha256 as the Hub's listing gives it (lfs.oid), when the file belongs to a set
    // named as hf://ORG/REPO:QUANT in this process (io/hub_repo.h); "" otherwise. Not checked against the
    // bytes (only ranges are read).
    const std::string& hub_sha256() const { return hub_sha256_; }
    // hf:// only: the copy in the Hugging Face cache its bytes are read from (io/hub_cache.h), when the
    // cache holds the Hub's file at the pinned commit; "" when they come from the server.
    std::string cache_path() const;

    // [offset, offset + n) into dst. Thread-safe. Throws IoError, Interrupted.
    void read(uint64_t offset, void* dst, size_t n);
    // Asks the server again: IoError when the size or ETag is no longer what was pinned.
    void check_unchanged();

    // Read-ahead (used by io/prefetcher.h): a stream is a sequence of ranges, of any remote files, that
    // one reader will read in this order; the pool fetches each stream in its order and the streams in
    // turn. Closing it frees whatever it still holds.
    static uint64_t open_stream();
    static void close_stream(uint64_t stream);
    // Ranges (offset, length) the stream will read, in order, after those announced before. The stream's
    // last request is not fetched ahead until the stream is ended or more is announced (it may still grow
    // by the gap policy), so that the requests are the same however the announcements are timed; its
    // reader fetches it itself if it gets there first.
    void announce(uint64_t stream, const std::vector<std::pair<uint64_t, uint64_t>>& ranges);
    // Nothing more will be announced on the stream.
    static void end_stream(uint64_t stream);

    ~RemoteFile() = default;  // at exit, after the fetching threads are joined
    RemoteFile(const RemoteFile&) = delete;
    RemoteFile& operator=(const RemoteFile&) = delete;

  private:
    RemoteFile() = default;
    friend struct RemoteEngine;
    HttpPin pin_;
    RedirectCache redirect_;
    std::string hub_revision_;
    std::string hub_sha256_;
    std::shared_ptr<InputFile> cached_;  // the copy in the Hugging Face cache, when its bytes come from there
};

}  // namespace gguf_reap
