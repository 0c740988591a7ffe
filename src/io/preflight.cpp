#include "io/preflight.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/output_file.h"
#include "io/units.h"

namespace gguf_reap {

namespace {

constexpr std::string_view kTempTag = ".gguf-reap-tmp.";

// The pid in ".<name>.gguf-reap-tmp.<pid>.<n>" (OutputFile's naming), or 0 when the name differs (any
// name when `name` is null).
pid_t temp_owner(std::string_view filename, const std::string* name) {
    if (!OutputFile::is_temp_name(std::string(filename))) return 0;
    const size_t tag = filename.rfind(kTempTag);
    if (tag == std::string_view::npos || tag < 2 || (name && filename.substr(1, tag - 1) != *name)) return 0;
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

FreeSpace free_space(const std::string& dir) {
    struct statvfs vfs {};
    if (::statvfs(dir.c_str(), &vfs) != 0) throw IoError(dir, "statvfs", errno);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) throw IoError(dir, "stat", errno);
    return {st.st_dev, static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize)};
}

const std::string* same_file_as(const std::string& path, const std::vector<std::string>& inputs) {
    const auto id = file_identity(path);
    if (!id) return nullptr;
    for (const std::string& in : inputs)
        if (file_identity(in) == id) return &in;
    return nullptr;
}

OutputCheck check_outputs(const std::vector<PlannedOutput>& outputs, const std::vector<std::string>& inputs,
                          bool force, RequestField force_field) {
    OutputCheck r;
    std::set<std::string> seen;
    std::map<dev_t, std::pair<std::string, uint64_t>> need;  // device → (a directory on it, bytes)
    for (size_t i = 0; i < outputs.size(); ++i) {
        const std::string& out = outputs[i].path;
        const std::string dir = parent_dir(out);
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0) throw IoError(dir, "output directory", errno);
        if (!S_ISDIR(st.st_mode)) throw IoError(dir, "output directory", ENOTDIR);
        const auto id = file_identity(out);
        std::error_code ec;
        const std::string canonical = std::filesystem::weakly_canonical(out, ec).string();
        if (!seen.insert(ec ? out : canonical).second)
            throw UsageError(fmt::format("{}: named twice as an output", out));
        for (size_t j = 0; j < i; ++j)
            if (id && file_identity(outputs[j].path) == id)
                throw UsageError(fmt::format("{}: is the same file as the output {}", out, outputs[j].path));
        if (const std::string* in = same_file_as(out, inputs))
            throw UsageError(fmt::format(
                "{}: is the same file as the input {} (an output never overwrites an input)", out, *in));
        if (path_exists(out)) {
            if (std::filesystem::is_directory(out, ec))
                throw UsageError(fmt::format("{}: is a directory; an output file cannot replace it", out));
            if (!force) throw RequestError({out + ": already exists (use ", force_field, " to replace it)"});
            r.replaced.push_back(out);
        }
        auto& [where, bytes] = need[st.st_dev];
        where = dir;
        bytes += outputs[i].size;
        r.bytes_needed += outputs[i].size;
    }
    for (const auto& [dev, what] : need) {
        const FreeSpace fs = free_space(what.first);
        if (fs.available < what.second)
            throw IoError(what.first,
                          fmt::format("not enough free space: the output needs {} ({} bytes), {} is "
                                      "available",
                                      human_bytes(what.second), what.second, human_bytes(fs.available)));
    }
    return r;
}

namespace {

std::vector<std::string> remove_dead(const std::string& dir, const std::string* name) {
    std::vector<std::string> removed;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const pid_t pid = temp_owner(entry.path().filename().string(), name);
        if (pid == 0 || pid == ::getpid() || process_alive(pid)) continue;
        if (::unlink(entry.path().c_str()) == 0) removed.push_back(entry.path().string());
    }
    return removed;
}

}  // namespace

std::vector<std::string> remove_dead_temporaries(const std::string& dir, const std::string& name) {
    return remove_dead(dir, &name);
}

std::vector<std::string> remove_dead_temporaries(const std::string& dir) {
    return remove_dead(dir, nullptr);
}

MadeDirectory::MadeDirectory(const std::string& dir) {
    // The missing ones, outermost first: "a/b/c" with only "a" there makes a/b, then a/b/c.
    std::filesystem::path top = std::filesystem::path(dir).lexically_normal();
    if (top.filename().empty()) top = top.parent_path();  // "out/": out
    std::vector<std::filesystem::path> missing;
    for (std::filesystem::path p = top; !p.empty() && p != p.root_path() && !path_exists(p.string());
         p = p.parent_path())
        missing.insert(missing.begin(), p);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw IoError(dir, "cannot create the output directory", ec.value());
    for (const auto& p : missing) made_.push_back(p.string());
}

MadeDirectory::~MadeDirectory() {
    if (kept_) return;
    for (auto it = made_.rbegin(); it != made_.rend(); ++it)
        if (::rmdir(it->c_str()) != 0) break;  // not empty: something worth keeping is in it
}

}  // namespace gguf_reap
