// An output file written under a temporary name in its final directory, fsync'ed and renamed into
// place only by commit(). Destroyed without commit() (error, exception, interrupt), it removes the
// temporary, so no half-written file ever carries a final name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gguf_reap {

class OutputFile {
  public:
    // Creates "<dir>/.<name>.gguf-reap-tmp.<pid>.<n>" (exclusive). Throws IoError.
    explicit OutputFile(std::string final_path);
    // A resumable temporary (splice from a URL, docs/splice.md "Resume"): `temp_path` is opened as it
    // is, or created, and is left in place when the file is destroyed without commit(), for the next
    // run to continue. Throws IoError.
    OutputFile(std::string final_path, std::string temp_path);
    ~OutputFile();
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    int fd() const { return fd_; }
    const std::string& final_path() const { return final_path_; }
    const std::string& temp_path() const { return temp_path_; }

    // Writes all of [data, data+n) at `offset` (pwrite loop; EINTR retried, then interrupt checked).
    void write_at(uint64_t offset, const void* data, size_t n);
    // Sets the final size up front (ftruncate), so sparse gaps read as zero padding.
    void truncate(uint64_t size);
    // fsync, close, rename to the final name, fsync the directory. Throws IoError. With `durable`
    // false neither fsync is made: the file is still complete before its name appears (a crash of the
    // process never leaves a partial file), but a power loss soon after may lose data the kernel had
    // not yet written.
    void commit(bool durable = true);
    // Removes the temporary (idempotent; called by the destructor when not committed).
    void discard();

    // True when `name` looks like one of our temporaries (for cleaning up after a crash).
    static bool is_temp_name(const std::string& filename);

  private:
    std::string final_path_;
    std::string temp_path_;
    int fd_ = -1;
    bool committed_ = false;
    bool keep_ = false;  // a resumable temporary: never removed here
};

}  // namespace gguf_reap
