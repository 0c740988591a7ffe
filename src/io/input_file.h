// A read-only input file, read with pread. Never writes, never holds the file in memory: callers read
// ranges they have already bounds-checked against size(). It is never mapped: a mapped file that
// shrinks under the process (llama-imatrix rewrites its output every --output-frequency chunks; a
// download is replaced) kills it with SIGBUS, where a read returns an error that names the file.
//
// A path that is a URL (https://, http://, hf://) opens a RemoteFile (io/remote_file.h) instead: the
// same reads, over HTTP range requests, and no descriptor (fd() is -1, so there is nothing for the
// kernel to copy or read ahead; callers that would use it ask remote() first).
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gguf_reap {

// The one wording of a path that does not exist, in every command (exit 2): "PATH: does not exist".
inline constexpr const char* kMissingPathWords = "does not exist";

// What an input that cannot be opened (errno from open(2)) is: a path that does not exist or a directory
// is bad input (InputError, exit 2, "PATH: does not exist"); anything else is an I/O error (exit 3).
[[noreturn]] void throw_open_error(const std::string& path, int errno_value);

class RemoteFile;

// How a document gguf-reap writes (rank's keeplist and receipt, the card) names an input file it read
// (an imatrix, a calibrate.json, a plan): a local file by its base name, never by a path of this machine;
// a URL as given; an hf:// path at the commit pinned when it was read, hf://ORG/REPO/PATH@COMMIT (docs/
// remote.md, "Inputs at URLs"). A URL is opened (pinned) here if it was not yet: the same pin as the read.
std::string input_name(const std::string& path);

class InputFile {
  public:
    // Opens `path` read-only. Throws InputError when it does not exist or is not a regular file (exit
    // 2), IoError when it cannot be opened (exit 3). A URL is pinned (RemoteFile::open; Error exit 2 for
    // 404, 401, 403).
    static std::shared_ptr<InputFile> open(const std::string& path);

    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    const std::string& path() const { return path_; }
    uint64_t size() const { return size_; }
    int fd() const { return fd_; }
    // The remote file behind a URL, or null for a local file.
    RemoteFile* remote() const { return remote_.get(); }
    dev_t device() const { return dev_; }
    ino_t inode() const { return ino_; }

    // Copies [offset, offset + n) into dst. Precondition: the range lies inside size() (checked; a
    // violation throws IoError because it means the file changed under us). Short reads throw IoError.
    void read(uint64_t offset, void* dst, size_t n) const;

    // Advise the kernel about an upcoming sequential pass over [offset, offset+len) (no-op on failure).
    void advise_sequential(uint64_t offset, uint64_t len) const;

    // Throws IoError when the file is no longer what open() saw: another size, modification or change
    // time (fstat of the open descriptor), or the path now names another file. Bytes copied from a file
    // that changed while it was read may mix old and new contents, so nothing made from them may be
    // renamed into place (splice) or declared verified (audit).
    void check_unchanged() const;
    // check_unchanged of each; remote files are asked in parallel (each is a round trip). The first
    // failure in the given order is thrown.
    static void check_unchanged_all(const std::vector<const InputFile*>& files);

  private:
    InputFile() = default;
    std::string path_;
    std::shared_ptr<RemoteFile> remote_;
    int fd_ = -1;
    uint64_t size_ = 0;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
    struct timespec mtime_ {};
    struct timespec ctime_ {};
};

}  // namespace gguf_reap
