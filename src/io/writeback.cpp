#include "io/writeback.h"

#include <fcntl.h>

namespace gguf_reap {

void WritebackQueue::push(int fd, uint64_t offset, uint64_t length) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ranges_.push_back({fd, offset, length});
    }
    ready_.notify_one();
}

void WritebackQueue::close() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        closed_ = true;
    }
    ready_.notify_one();
}

void WritebackQueue::run() {
    for (;;) {
        Range r{};
        {
            std::unique_lock<std::mutex> lock(mutex_);
            ready_.wait(lock, [&] { return closed_ || !ranges_.empty(); });
            if (ranges_.empty()) return;
            r = ranges_.front();
            ranges_.pop_front();
        }
        ::sync_file_range(r.fd, static_cast<off64_t>(r.offset), static_cast<off64_t>(r.length),
                          SYNC_FILE_RANGE_WRITE);
        ++started_ranges_;
        started_bytes_ += r.length;
    }
}

}  // namespace gguf_reap
