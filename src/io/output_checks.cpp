#include "io/output_checks.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <filesystem>

#include "io/error.h"
#include "io/output_file.h"

namespace gguf_reap {

namespace {

constexpr std::string_view kTempTag = ".gguf-reap-tmp.";

// The pid in ".<name>.gguf-reap-tmp.<pid>.<n>" (OutputFile's naming), or 0 when the name differs.
pid_t temp_owner(std::string_view filename, std::string_view name) {
    if (!OutputFile::is_temp_name(std::string(filename))) return 0;
    const size_t tag = filename.rfind(kTempTag);
    if (tag == std::string_view::npos || filename.substr(1, tag - 1) != name) return 0;
    std::string_view rest = filename.substr(tag + kTempTag.size());
    const size_t dot = rest.find('.');
    if (dot == std::string_view::npos) return 0;
    pid_t pid = 0;
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + dot, pid);
    if (ec != std::errc() || p != rest.data() + dot || pid <= 0) return 0;
    return pid;
}

bool process_alive(pid_t pid) {
    return ::kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace

std::optional<FileIdentity> file_identity(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
        throw IoError(path, "stat", errno);
    }
    return FileIdentity{st.st_dev, st.st_ino};
}

bool path_exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

std::string parent_dir(const std::string& path) {
    const std::filesystem::path p(path);
    return p.parent_path().empty() ? std::string(".") : p.parent_path().string();
}

std::string base_name(const std::string& path) {
    return std::filesystem::path(path).filename().string();
}

FreeSpace free_space(const std::string& dir) {
    struct statvfs vfs {};
    if (::statvfs(dir.c_str(), &vfs) != 0) throw IoError(dir, "statvfs", errno);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) throw IoError(dir, "stat", errno);
    return {st.st_dev, static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize)};
}

std::vector<std::string> remove_dead_temporaries(const std::string& dir, const std::string& name) {
    std::vector<std::string> removed;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const pid_t pid = temp_owner(entry.path().filename().string(), name);
        if (pid == 0 || pid == ::getpid() || process_alive(pid)) continue;
        if (::unlink(entry.path().c_str()) == 0) removed.push_back(entry.path().string());
    }
    return removed;
}

}  // namespace gguf_reap
