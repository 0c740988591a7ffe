#include "format/byte_source.h"

#include <fcntl.h>

#include <algorithm>

namespace gguf_reap {

FileSource::FileSource(const InputFile& file) : ByteSource(file.path(), file.size()), file_(file) {
    if (file_.fd() >= 0) ::posix_fadvise(file_.fd(), 0, 0, POSIX_FADV_RANDOM);
}

FileSource::~FileSource() {
    if (file_.fd() >= 0) ::posix_fadvise(file_.fd(), 0, 0, POSIX_FADV_NORMAL);
}

void FileSource::read(uint64_t offset, void* dst, size_t n) {
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
        if (offset < buf_start_ || offset >= buf_start_ + buf_.size()) {
            buf_.resize(static_cast<size_t>(std::min<uint64_t>(kWindow, size() - offset)));
            file_.read(offset, buf_.data(), buf_.size());
            buf_start_ = offset;
        }
        const uint64_t off = offset - buf_start_;
        const size_t take = static_cast<size_t>(std::min<uint64_t>(n, buf_.size() - off));
        std::memcpy(out, buf_.data() + off, take);
        out += take;
        offset += take;
        n -= take;
    }
}

}  // namespace gguf_reap
