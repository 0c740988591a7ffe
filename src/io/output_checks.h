// Questions asked about output paths before the first byte is written: is this the same file as an
// input (device + inode, symlinks followed), how much space is free there, and which temporaries left
// by a crashed run can go.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gguf_reap {

struct FileIdentity {
    dev_t device = 0;
    ino_t inode = 0;
    bool operator==(const FileIdentity&) const = default;
};

// Identity of the file `path` names, following symlinks; nullopt when it does not exist (a dangling
// symlink counts as not existing). Throws IoError for other stat failures.
std::optional<FileIdentity> file_identity(const std::string& path);

// True when `path` exists as a directory entry (lstat: a dangling symlink exists).
bool path_exists(const std::string& path);

// The directory a file will be written into ("." for a bare name).
std::string parent_dir(const std::string& path);
// The file name without its directory ("model-00001-of-00002.gguf").
std::string base_name(const std::string& path);

// Bytes an unprivileged writer may still use in the filesystem holding `dir` (statvfs f_bavail), and
// that filesystem's device. Throws IoError.
struct FreeSpace {
    dev_t device = 0;
    uint64_t available = 0;
};
FreeSpace free_space(const std::string& dir);

// Removes "<dir>/.<name>.gguf-reap-tmp.<pid>.<n>" temporaries of the output file `name` whose writing
// process no longer exists (a crash, a SIGKILL, a power cut). Temporaries of live processes are left
// alone. Returns the paths removed.
std::vector<std::string> remove_dead_temporaries(const std::string& dir, const std::string& name);

}  // namespace gguf_reap
