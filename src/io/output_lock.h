// An exclusive lock on an output prefix, so that two gguf-reap processes writing the same prefix at
// once cannot mix their shards into one set: the second is refused at once with the first one's pid.
//
// The lock is flock(2) on "<dir>/.<name>.gguf-reap.lock" beside the outputs (<name> is the prefix's
// file name without ".gguf"). flock belongs to the open file, so the kernel drops it when its holder
// dies, even by SIGKILL: a stale lock file never blocks the next run. The holder unlinks the file before
// it lets go; a process that locked the old, unlinked file in that moment sees that the path no longer
// names what it locked and starts again on the new one.
#pragma once

#include <string>

namespace gguf_reap {

class OutputLock {
  public:
    // Takes the lock for `out_prefix` (as given to splice -o). Throws IoError when another process holds
    // it (naming the prefix and that process) or when the lock file cannot be created.
    explicit OutputLock(const std::string& out_prefix);
    ~OutputLock();
    OutputLock(const OutputLock&) = delete;
    OutputLock& operator=(const OutputLock&) = delete;

    const std::string& path() const { return path_; }

    // "<dir>/.<name>.gguf-reap.lock" for an output prefix.
    static std::string lock_path(const std::string& out_prefix);

  private:
    std::string path_;
    int fd_ = -1;
};

}  // namespace gguf_reap
