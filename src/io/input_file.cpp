#include "io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/checked.h"
#include "io/paths.h"
#include "io/remote_file.h"
#include "io/remote_url.h"

namespace gguf_reap {

void throw_open_error(const std::string& path, int errno_value) {
    if (errno_value == ENOENT || errno_value == ENOTDIR)
        throw InputError(path, std::nullopt, "", kMissingPathWords);
    if (errno_value == EISDIR) throw InputError(path, std::nullopt, "", "is a directory, not a file");
    throw IoError(path, "open", errno_value);
}

std::string input_name(const std::string& path) {
    if (!is_remote_path(path)) return base_name(path);
    return RemoteFile::open(path)->pinned_path();
}

std::shared_ptr<InputFile> InputFile::open(const std::string& path) {
    std::shared_ptr<InputFile> f(new InputFile());
    f->path_ = path;
    if (is_remote_path(path)) {
        f->remote_ = RemoteFile::open(path);
        f->size_ = f->remote_->size();
        return f;
    }
    f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f->fd_ < 0) throw_open_error(path, errno);
    struct stat st {};
    if (::fstat(f->fd_, &st) != 0) throw IoError(path, "stat", errno);
    if (S_ISDIR(st.st_mode)) throw_open_error(path, EISDIR);
    if (!S_ISREG(st.st_mode)) throw InputError(path, std::nullopt, "", "not a regular file");
    f->size_ = static_cast<uint64_t>(st.st_size);
    f->dev_ = st.st_dev;
    f->ino_ = st.st_ino;
    f->mtime_ = st.st_mtim;
    f->ctime_ = st.st_ctim;
    return f;
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void InputFile::read(uint64_t offset, void* dst, size_t n) const {
    if (!range_inside(offset, n, size_))
        throw IoError(path_, "read past the end of the file (was it truncated?)");
    if (n == 0) return;  // dst may be the null data() of an empty vector
    if (remote_) return remote_->read(offset, dst, n);
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
        ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
        if (got < 0) {
            if (errno == EINTR) continue;
            throw IoError(path_, "read", errno);
        }
        if (got == 0) throw IoError(path_, "unexpected end of file (was it truncated?)");
        out += got;
        offset += static_cast<uint64_t>(got);
        n -= static_cast<size_t>(got);
    }
}

void InputFile::check_unchanged_all(const std::vector<const InputFile*>& files) {  // static
    std::vector<std::exception_ptr> errors(files.size());
    std::vector<std::thread> threads;
    try {
        for (size_t i = 0; i < files.size(); ++i)
            if (files[i]->remote_)
                threads.emplace_back([&files, &errors, i] {
                    try {
                        files[i]->check_unchanged();
                    } catch (...) {
                        errors[i] = std::current_exception();
                    }
                });
    } catch (...) {  // a thread that could not start: join those that did
        for (auto& t : threads) t.join();
        throw;
    }
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < files.size(); ++i) {
        if (errors[i]) std::rethrow_exception(errors[i]);
        if (!files[i]->remote_) files[i]->check_unchanged();
    }
}

void InputFile::check_unchanged() const {
    if (remote_) return remote_->check_unchanged();
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw IoError(path_, "stat", errno);
    auto same = [](const timespec& a, const timespec& b) {
        return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
    };
    struct stat named {};
    const bool replaced = ::stat(path_.c_str(), &named) != 0 || named.st_dev != dev_ || named.st_ino != ino_;
    std::string what;
    if (static_cast<uint64_t>(st.st_size) != size_)
        what = fmt::format("its size went from {} to {} bytes", size_, st.st_size);
    else if (replaced)  // before the times: unlinking the old file moved its ctime too
        what = "its name now points to another file";
    else if (!same(st.st_mtim, mtime_) || !same(st.st_ctim, ctime_))
        what = "it was modified";
    if (!what.empty())
        throw IoError(path_, fmt::format("changed while gguf-reap was reading it ({}); nothing made from it "
                                         "is kept: run again once the file is stable",
                                         what));
}

void InputFile::advise_sequential(uint64_t offset, uint64_t len) const {
    if (remote_) return;
    ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(len), POSIX_FADV_SEQUENTIAL);
}

}  // namespace gguf_reap
