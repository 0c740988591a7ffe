// Shared by the libFuzzer targets: the parsers read files, not buffers, so each input is written to
// an anonymous in-memory file (memfd) and opened by its /proc/self/fd path like any other file.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace gguf_reap::fuzz {

class MemFile {
  public:
    MemFile(const uint8_t* data, size_t size) {
        fd_ = ::memfd_create("gguf-reap-fuzz", MFD_CLOEXEC);
        if (fd_ < 0) std::abort();  // the harness itself is broken, not the parser
        size_t done = 0;
        while (done < size) {
            const ssize_t n = ::write(fd_, data + done, size - done);
            if (n <= 0) std::abort();
            done += static_cast<size_t>(n);
        }
        path_ = "/proc/self/fd/" + std::to_string(fd_);
    }
    ~MemFile() { ::close(fd_); }
    MemFile(const MemFile&) = delete;
    MemFile& operator=(const MemFile&) = delete;

    const std::string& path() const { return path_; }

  private:
    int fd_ = -1;
    std::string path_;
};

}  // namespace gguf_reap::fuzz
