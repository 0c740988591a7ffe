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
    if (file.remote() && !stream_) stream_ = RemoteFile::open_stream();
    ranges_.push_back({&file, offset, length});
}

void Prefetcher::advance(uint64_t consumed) {
    std::lock_guard<std::mutex> lock(mu_);
    consumed_ = std::max(consumed_, consumed);
    if (issued_ >= consumed_ + horizon_ / 2 && issued_ > 0) return;
    const uint64_t target = consumed_ + horizon_;
    while (issued_ < target && next_ < ranges_.size()) {
        const Range& r = ranges_[next_];
        if (RemoteFile* remote = r.file->remote()) {  // whole: the read-ahead cuts it into requests
            announce_remote(remote, r.offset + within_, r.length - within_);
            issued_ += r.length - within_;
            ++next_;
            within_ = 0;
            continue;
        }
        const uint64_t n = std::min(r.length - within_, target - issued_);
        announce(r.file->fd(), r.offset + within_, n);
        issued_ += n;
        within_ += n;
        if (within_ < r.length) break;  // the rest of this range next time
        ++next_;
        within_ = 0;
    }
    flush();
    flush_remote();
    if (stream_ && !ended_ && next_ == ranges_.size()) {
        RemoteFile::end_stream(stream_);
        ended_ = true;
    }
}

void Prefetcher::announce_remote(RemoteFile* file, uint64_t offset, uint64_t length) {
    if (file != batch_file_) flush_remote();
    batch_file_ = file;
    batch_.emplace_back(offset, length);
}

void Prefetcher::flush_remote() {
    if (batch_file_ && !batch_.empty()) batch_file_->announce(stream_, batch_);
    batch_file_ = nullptr;
    batch_.clear();
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
