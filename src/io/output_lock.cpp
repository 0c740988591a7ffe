#include "io/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <filesystem>

#include <fmt/format.h>

#include "gguf_reap/error.h"

namespace gguf_reap {

namespace {

// The pid the holder wrote into the lock file, for the message; 0 when unreadable.
long holder_pid(int fd) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    long pid = 0;
    if (n > 0) std::from_chars(buf, buf + n, pid);
    return pid;
}

}  // namespace

std::string OutputLock::lock_path(const std::string& out_prefix) {
    std::string prefix = out_prefix;
    if (prefix.size() > 5 && prefix.compare(prefix.size() - 5, 5, ".gguf") == 0)
        prefix.resize(prefix.size() - 5);
    const std::filesystem::path p(prefix);
    const std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
    return fmt::format("{}/.{}.gguf-reap.lock", dir, p.filename().string());
}

OutputLock::OutputLock(const std::string& out_prefix) : path_(lock_path(out_prefix)) {
    // Three tries cover the holder unlinking the file between our open and our flock; losing more
    // races than that in a row means somebody else keeps taking the prefix.
    for (int attempt = 0; attempt < 3; ++attempt) {
        const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            const std::filesystem::path lock(path_);
            throw IoError(
                lock.parent_path().string(),
                fmt::format("output directory: cannot create the lock file {}", lock.filename().string()),
                errno);
        }
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int err = errno;
            const long pid = err == EWOULDBLOCK ? holder_pid(fd) : 0;
            ::close(fd);
            if (err != EWOULDBLOCK) throw IoError(path_, "lock", err);
            throw IoError(out_prefix,
                          fmt::format("another gguf-reap process{} is writing to this output prefix (lock "
                                      "{}); wait for it to finish or choose another prefix",
                                      pid > 0 ? fmt::format(" (pid {})", pid) : std::string(), path_));
        }
        // Locked; but if the holder unlinked the file just before, we hold a lock nobody else will see.
        struct stat locked {
        }, named{};
        if (::fstat(fd, &locked) == 0 && ::stat(path_.c_str(), &named) == 0 &&
            locked.st_dev == named.st_dev && locked.st_ino == named.st_ino) {
            const std::string pid = std::to_string(::getpid()) + "\n";
            if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
                // The pid is only for the message another process prints; the lock holds without it.
            }
            fd_ = fd;
            return;
        }
        ::close(fd);
    }
    throw IoError(out_prefix,
                  fmt::format("could not take the output lock {}: it keeps being replaced", path_));
}

OutputLock::~OutputLock() {
    if (fd_ < 0) return;
    // Unlink while still holding the lock, so a process that opens the path afterwards gets a new file.
    ::unlink(path_.c_str());
    ::close(fd_);
}

}  // namespace gguf_reap
