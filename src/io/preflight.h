// The preflight: what every command that writes files checks before its first byte. Is an output the
// same file as an input (device + inode, symlinks followed), does it exist already, is there room on
// its filesystem, and which temporaries left by a crashed run can go.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/paths.h"

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

// Bytes an unprivileged writer may still use in the filesystem holding `dir` (statvfs f_bavail), and
// that filesystem's device. Throws IoError.
struct FreeSpace {
    dev_t device = 0;
    uint64_t available = 0;
};
FreeSpace free_space(const std::string& dir);

// Checks a set of output files (path, exact size) against the inputs before anything is written:
// their directories exist, no output is an input or another output, an existing output is replaced
// only with `force` (never a directory), and every filesystem has room for what goes on it. Throws
// UsageError / IoError naming the file (a refusal names `force_field`, the caller's request field that
// allows a replacement); returns the outputs `force` will replace.
struct PlannedOutput {
    std::string path;
    uint64_t size = 0;
};
struct OutputCheck {
    std::vector<std::string> replaced;
    uint64_t bytes_needed = 0;
};
OutputCheck check_outputs(const std::vector<PlannedOutput>& outputs, const std::vector<std::string>& inputs,
                          bool force, RequestField force_field);
// The path of `inputs` that is the same file as `path`, or nullptr.
const std::string* same_file_as(const std::string& path, const std::vector<std::string>& inputs);

// Removes "<dir>/.<name>.gguf-reap-tmp.<pid>.<n>" temporaries of the output file `name` whose writing
// process no longer exists (a crash, a SIGKILL, a power cut). Temporaries of live processes are left
// alone. Returns the paths removed.
std::vector<std::string> remove_dead_temporaries(const std::string& dir, const std::string& name);
// The same for the temporaries of every output name in `dir` (calibrate's and eval's directories, whose
// temporaries are never resumed: a dead writer's is garbage whatever it was to become).
std::vector<std::string> remove_dead_temporaries(const std::string& dir);

// An output directory made for this run: `dir` and its missing parents are created (as rank and splice
// create theirs), and unless keep() is called, the destructor takes away again the ones it made, as long
// as they are empty. So a command refused after it made its output directory leaves no empty folder
// behind, and one that wrote something there keeps it. Throws IoError.
class MadeDirectory {
  public:
    explicit MadeDirectory(const std::string& dir);
    ~MadeDirectory();
    MadeDirectory(const MadeDirectory&) = delete;
    MadeDirectory& operator=(const MadeDirectory&) = delete;
    void keep() { kept_ = true; }

  private:
    std::vector<std::string> made_;  // outermost first
    bool kept_ = false;
};

}  // namespace gguf_reap
