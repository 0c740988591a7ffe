#include "io/prefetcher.h"

#include <fcntl.h>

#include <algorithm>

#include "io/remote_file.h"

namespace gguf_reap {

Prefetcher::~Prefetcher() {
    if (stream_) RemoteFile::close_stream(stream_);
}

void Prefetcher::add(const InputFile& file, uint64_t offset, uint64_t length) {
    if (length == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (RemoteFile* remote = file.remote()) {
        if (!stream_) stream_ = RemoteFile::open_stream();
        remote_.push_back({remote, offset, length});
        return;
    }
    ranges_.push_back({file.fd(), offset, length});
}

void Prefetcher::advance(uint64_t consumed) {
    std::lock_guard<std::mutex> lock(mu_);
    // Runs of one file's ranges, in the order the pass reads them.
    for (size_t i = 0; i < remote_.size();) {
        std::vector<std::pair<uint64_t, uint64_t>> run;
        size_t j = i;
        for (; j < remote_.size() && remote_[j].file == remote_[i].file; ++j)
            run.emplace_back(remote_[j].offset, remote_[j].length);
        remote_[i].file->announce(stream_, run);
        i = j;
    }
    remote_.clear();
    consumed_ = std::max(consumed_, consumed);
    if (issued_ >= consumed_ + horizon_ / 2 && issued_ > 0) return;
    const uint64_t target = consumed_ + horizon_;
    while (issued_ < target && next_ < ranges_.size()) {
        const Range& r = ranges_[next_];
        const uint64_t n = std::min(r.length - within_, target - issued_);
        announce(r.fd, r.offset + within_, n);
        issued_ += n;
        within_ += n;
        if (within_ < r.length) break;  // the rest of this range next time
        ++next_;
        within_ = 0;
    }
    flush();
}

void Prefetcher::announce(int fd, uint64_t offset, uint64_t length) {
    if (fd == pending_fd_ && offset >= pending_hi_ && offset - pending_hi_ <= merge_gap_) {
        pending_hi_ = offset + length;
        return;
    }
    flush();
    pending_fd_ = fd;
    pending_lo_ = offset;
    pending_hi_ = offset + length;
}

void Prefetcher::flush() {
    if (pending_fd_ >= 0 && pending_hi_ > pending_lo_)
        ::posix_fadvise(pending_fd_, static_cast<off_t>(pending_lo_),
                        static_cast<off_t>(pending_hi_ - pending_lo_), POSIX_FADV_WILLNEED);
    pending_fd_ = -1;
    pending_lo_ = pending_hi_ = 0;
}

}  // namespace gguf_reap
