#include "io/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/signals.h"

namespace gguf_reap {

namespace {
std::atomic<unsigned> g_counter{0};
constexpr const char* kTempTag = ".gguf-reap-tmp.";
}  // namespace

OutputFile::OutputFile(std::string final_path) : final_path_(std::move(final_path)) {
    const std::filesystem::path p(final_path_);
    const std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
    temp_path_ = fmt::format("{}/.{}{}{}.{}", dir, p.filename().string(), kTempTag, ::getpid(), g_counter++);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    // Named by the path the user gave: the temporary name means nothing to them ("out/m.json: create:
    // Not a directory" when out is a file).
    if (fd_ < 0) throw IoError(final_path_, "create", errno);
}

OutputFile::OutputFile(std::string final_path, std::string temp_path)
    : final_path_(std::move(final_path)), temp_path_(std::move(temp_path)), keep_(true) {
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw IoError(final_path_, "create", errno);
}

OutputFile::~OutputFile() {
    discard();
}

void OutputFile::write_at(uint64_t offset, const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
        ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
        if (w < 0) {
            if (errno == EINTR) {
                check_interrupted();
                continue;
            }
            throw IoError(final_path_, "write", errno);
        }
        p += w;
        offset += static_cast<uint64_t>(w);
        n -= static_cast<size_t>(w);
    }
}

void OutputFile::truncate(uint64_t size) {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) throw IoError(final_path_, "truncate", errno);
}

void OutputFile::commit(bool durable) {
    if (durable && ::fsync(fd_) != 0) throw IoError(final_path_, "fsync", errno);
    if (::close(fd_) != 0) {
        fd_ = -1;
        throw IoError(final_path_, "close", errno);
    }
    fd_ = -1;
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) throw IoError(final_path_, "rename", errno);
    committed_ = true;
    if (!durable) return;
    const std::filesystem::path p(final_path_);
    const std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

void OutputFile::discard() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    if (!committed_ && !keep_ && !temp_path_.empty()) {
        ::unlink(temp_path_.c_str());
        temp_path_.clear();
    }
}

bool OutputFile::is_temp_name(const std::string& filename) {
    return !filename.empty() && filename[0] == '.' && filename.find(kTempTag) != std::string::npos;
}

}  // namespace gguf_reap
