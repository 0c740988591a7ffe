// A fault-injection shim for tests, loaded with LD_PRELOAD into the real gguf-reap binary. It wraps the
// I/O calls splice, audit and rank make and, configured by environment variables, makes them fail, come up
// short, slow down, or changes the world at a chosen moment. The product has no test hooks: whatever the
// shim does, a real kernel or disk can do too.
//
//   FAULT_OP           which calls count: write (write, pwrite, pwritev, and copy_file_range by its
//                      destination), read (read, pread, preadv, preadv2, and copy_file_range by its source),
//                      fallocate, fsync (fsync, fdatasync), rename (by its new name)
//   FAULT_PATH         only calls on files whose path contains this string (default: any regular file)
//   FAULT_AFTER_BYTES  the trigger: the matching calls have moved this many bytes (the call that crosses
//                      it is cut short at exactly this many)...
//   FAULT_AFTER_CALLS  ...or this many matching calls have completed (default 0: the first call)
//   At the trigger, any of:
//   FAULT_ERRNO        this call and every later matching one fail with this errno (a name: ENOSPC, EIO)
//   FAULT_SIGNAL       the process sends itself this signal once (INT, TERM, KILL)
//   FAULT_TRUNCATE     "PATH:SIZE": truncate PATH to SIZE bytes once
//   FAULT_MODIFY       "PATH:OFFSET": invert the byte at OFFSET of PATH once (size unchanged)
//   FAULT_HOLD         a file name: the triggering call waits until that file exists, then goes on (a
//                      test holds the process at a known point: it waits for FAULT_LOG's line, does
//                      what it must while the process is held, then creates the file)
//   On every matching call, from the first:
//   FAULT_SHORT        move at most 1..N bytes per call (varying), never failing: the caller must loop
//   FAULT_DELAY_MS     sleep this long first
//   FAULT_LOG          append one line per trigger to this file (so a test can tell that it fired)
//   FAULT_NO_FALLOCATE every fallocate fails with EOPNOTSUPP, as on filesystems without it (any FAULT_OP)
//   FAULT_FREE_BYTES   statvfs of a path containing FAULT_PATH (any path when unset) says this many bytes
//                      are available to unprivileged users, as on a nearly full disk (no FAULT_OP needed)
//
// It is built without sanitizers and uses only the C library, so it can be preloaded into the ASan build
// too (with ASAN_OPTIONS=verify_asan_link_order=0).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace {

enum OpClass { kNone, kWrite, kRead, kFallocate, kFsync, kRename };

struct Config {
    OpClass op = kNone;
    char path[4096] = {};
    uint64_t after_bytes = 0;
    bool by_bytes = false;
    uint64_t after_calls = 0;
    int err = 0;
    int sig = 0;
    char truncate_path[4096] = {};
    long long truncate_size = -1;
    char modify_path[4096] = {};
    long long modify_offset = -1;
    char hold[4096] = {};
    uint64_t short_max = 0;
    long delay_ms = 0;
    char log[4096] = {};
    bool no_fallocate = false;
    long long free_bytes = -1;
};

Config g_cfg;
bool g_ready = false;
std::atomic<uint64_t> g_bytes{0};
std::atomic<uint64_t> g_calls{0};
std::atomic<bool> g_triggered{false};
std::atomic<uint64_t> g_short_seq{0};

int errno_by_name(const char* s) {
    static const struct {
        const char* name;
        int value;
    } names[] = {{"ENOSPC", ENOSPC}, {"EIO", EIO},       {"EDQUOT", EDQUOT}, {"EFBIG", EFBIG},
                 {"EINTR", EINTR},   {"EAGAIN", EAGAIN}, {"EROFS", EROFS},   {"EOPNOTSUPP", EOPNOTSUPP},
                 {"EXDEV", EXDEV},   {"EINVAL", EINVAL}, {"EBADF", EBADF},   {"ENOSYS", ENOSYS}};
    for (const auto& n : names)
        if (strcmp(s, n.name) == 0) return n.value;
    return atoi(s);
}

int signal_by_name(const char* s) {
    if (strcmp(s, "INT") == 0 || strcmp(s, "SIGINT") == 0) return SIGINT;
    if (strcmp(s, "TERM") == 0 || strcmp(s, "SIGTERM") == 0) return SIGTERM;
    if (strcmp(s, "KILL") == 0 || strcmp(s, "SIGKILL") == 0) return SIGKILL;
    return atoi(s);
}

void copy_env(char* dst, size_t cap, const char* name) {
    const char* v = getenv(name);
    if (v) snprintf(dst, cap, "%s", v);
}

// "PATH:NUMBER" → path and number (the number after the last colon).
void path_and_number(const char* env, char* path, size_t cap, long long* number) {
    const char* v = getenv(env);
    if (!v) return;
    const char* colon = strrchr(v, ':');
    if (!colon) return;
    snprintf(path, cap, "%.*s", static_cast<int>(colon - v), v);
    *number = atoll(colon + 1);
}

__attribute__((constructor)) void load_config() {
    Config& c = g_cfg;
    if (const char* op = getenv("FAULT_OP")) {
        if (strcmp(op, "write") == 0) c.op = kWrite;
        if (strcmp(op, "read") == 0) c.op = kRead;
        if (strcmp(op, "fallocate") == 0) c.op = kFallocate;
        if (strcmp(op, "fsync") == 0) c.op = kFsync;
        if (strcmp(op, "rename") == 0) c.op = kRename;
    }
    copy_env(c.path, sizeof c.path, "FAULT_PATH");
    if (const char* v = getenv("FAULT_AFTER_BYTES")) {
        c.after_bytes = strtoull(v, nullptr, 10);
        c.by_bytes = true;
    }
    if (const char* v = getenv("FAULT_AFTER_CALLS")) c.after_calls = strtoull(v, nullptr, 10);
    if (const char* v = getenv("FAULT_ERRNO")) c.err = errno_by_name(v);
    if (const char* v = getenv("FAULT_SIGNAL")) c.sig = signal_by_name(v);
    path_and_number("FAULT_TRUNCATE", c.truncate_path, sizeof c.truncate_path, &c.truncate_size);
    path_and_number("FAULT_MODIFY", c.modify_path, sizeof c.modify_path, &c.modify_offset);
    copy_env(c.hold, sizeof c.hold, "FAULT_HOLD");
    if (const char* v = getenv("FAULT_SHORT")) c.short_max = strtoull(v, nullptr, 10);
    if (const char* v = getenv("FAULT_DELAY_MS")) c.delay_ms = atol(v);
    copy_env(c.log, sizeof c.log, "FAULT_LOG");
    c.no_fallocate = getenv("FAULT_NO_FALLOCATE") != nullptr;
    if (const char* v = getenv("FAULT_FREE_BYTES")) c.free_bytes = atoll(v);
    g_ready = c.op != kNone;
}

template <typename F>
F real(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

bool path_matches(const char* p) {
    if (g_cfg.path[0]) return strstr(p, g_cfg.path) != nullptr;
    return p[0] == '/';
}

bool fd_matches(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return false;
    target[n] = '\0';
    return path_matches(target);
}

void log_line(const char* what) {
    if (!g_cfg.log[0]) return;
    const int fd = open(g_cfg.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    char line[256];
    const int n = snprintf(line, sizeof line, "%s after %llu bytes, %llu calls\n", what,
                           static_cast<unsigned long long>(g_bytes.load()),
                           static_cast<unsigned long long>(g_calls.load()));
    const ssize_t written =
        real<ssize_t (*)(int, const void*, size_t)>("write")(fd, line, static_cast<size_t>(n));
    (void)written;  // a lost log line changes nothing the test asserts on
    close(fd);
}

// The one-time effects of the trigger.
void fire() {
    if (g_triggered.exchange(true)) return;
    log_line("fault");
    if (g_cfg.truncate_path[0] && g_cfg.truncate_size >= 0)
        truncate(g_cfg.truncate_path, g_cfg.truncate_size);
    if (g_cfg.modify_path[0] && g_cfg.modify_offset >= 0) {
        const int fd = open(g_cfg.modify_path, O_RDWR | O_CLOEXEC);
        unsigned char b = 0;
        auto rd = real<ssize_t (*)(int, void*, size_t, off_t)>("pread");
        auto wr = real<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
        if (fd >= 0 && rd(fd, &b, 1, g_cfg.modify_offset) == 1) {
            b = static_cast<unsigned char>(~b);
            if (wr(fd, &b, 1, g_cfg.modify_offset) != 1) log_line("modify failed");
        }
        if (fd >= 0) close(fd);
    }
    if (g_cfg.sig) kill(getpid(), g_cfg.sig);
    if (g_cfg.hold[0]) {  // the test's "go on": the file appears (a signal meanwhile cuts a sleep short)
        struct stat st;
        while (stat(g_cfg.hold, &st) != 0) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, nullptr);
        }
        log_line("released");
    }
}

// Decides what a matching call may do. Returns the most bytes it may move (≤ want), or -1 with errno
// set when it must fail.
long long admit(uint64_t want) {
    if (g_cfg.delay_ms > 0) {
        struct timespec ts = {g_cfg.delay_ms / 1000, (g_cfg.delay_ms % 1000) * 1000000L};
        nanosleep(&ts, nullptr);
    }
    bool at_trigger = g_triggered.load();
    uint64_t allow = want;
    if (!at_trigger) {
        if (g_cfg.by_bytes) {
            const uint64_t done = g_bytes.load();
            if (done + want > g_cfg.after_bytes || (want == 0 && done >= g_cfg.after_bytes)) {
                allow = g_cfg.after_bytes > done ? g_cfg.after_bytes - done : 0;
                if (allow == 0)
                    at_trigger = true;  // nothing may move before the fault
                else if (!g_cfg.err)
                    at_trigger = true;
            }
        } else if (g_calls.load() >= g_cfg.after_calls) {
            at_trigger = true;
        }
        if (at_trigger) fire();
    }
    if (at_trigger && g_cfg.err && allow == want) {
        errno = g_cfg.err;
        return -1;
    }
    if (g_cfg.short_max > 0 && allow > 1) {
        const uint64_t cap = 1 + (g_short_seq.fetch_add(1) * 7919) % g_cfg.short_max;
        if (allow > cap) allow = cap;
    }
    return static_cast<long long>(allow);
}

// After a matching call: count what it did; a call that reached the byte trigger fires it now.
void account(long long done) {
    g_calls.fetch_add(1);
    if (done > 0) g_bytes.fetch_add(static_cast<uint64_t>(done));
    if (g_cfg.by_bytes && !g_triggered.load() && g_bytes.load() >= g_cfg.after_bytes && g_cfg.after_bytes > 0)
        fire();
}

bool active(OpClass op, int fd) {
    return g_ready && g_cfg.op == op && fd_matches(fd);
}

// The first iovecs of `iov` holding at most `limit` bytes, the last one cut; returns their count.
int clip_iov(const struct iovec* iov, int cnt, uint64_t limit, struct iovec* out) {
    int k = 0;
    for (int i = 0; i < cnt && limit > 0 && k < 1024; ++i) {
        out[k] = iov[i];
        if (out[k].iov_len > limit) out[k].iov_len = limit;
        limit -= out[k].iov_len;
        ++k;
    }
    return k;
}

uint64_t iov_total(const struct iovec* iov, int cnt) {
    uint64_t n = 0;
    for (int i = 0; i < cnt; ++i) n += iov[i].iov_len;
    return n;
}

}  // namespace

extern "C" {

#define WRAP_RW(name, ret, OP, params, args, count, call_args) \
    ret name params {                                          \
        static auto fn = real<ret(*) params>(#name);           \
        if (!active(OP, fd)) return fn args;                   \
        const long long allow = admit(count);                  \
        if (allow < 0) return -1;                              \
        const ret r = fn call_args;                            \
        account(r);                                            \
        return r;                                              \
    }

WRAP_RW(write, ssize_t, kWrite, (int fd, const void* buf, size_t n), (fd, buf, n), n,
        (fd, buf, static_cast<size_t>(allow)))
WRAP_RW(pwrite, ssize_t, kWrite, (int fd, const void* buf, size_t n, off_t off), (fd, buf, n, off), n,
        (fd, buf, static_cast<size_t>(allow), off))
WRAP_RW(pwrite64, ssize_t, kWrite, (int fd, const void* buf, size_t n, off64_t off), (fd, buf, n, off), n,
        (fd, buf, static_cast<size_t>(allow), off))
WRAP_RW(read, ssize_t, kRead, (int fd, void* buf, size_t n), (fd, buf, n), n,
        (fd, buf, static_cast<size_t>(allow)))
WRAP_RW(pread, ssize_t, kRead, (int fd, void* buf, size_t n, off_t off), (fd, buf, n, off), n,
        (fd, buf, static_cast<size_t>(allow), off))
WRAP_RW(pread64, ssize_t, kRead, (int fd, void* buf, size_t n, off64_t off), (fd, buf, n, off), n,
        (fd, buf, static_cast<size_t>(allow), off))

}  // extern "C"

namespace {

// The vector calls' common part: `call(iov, cnt)` makes the real call on (a clipped copy of) the list.
template <typename Call>
ssize_t wrapped_iov(OpClass op, int fd, const struct iovec* iov, int cnt, Call call) {
    if (!active(op, fd)) return call(iov, cnt);
    const long long allow = admit(iov_total(iov, cnt));
    if (allow < 0) return -1;
    struct iovec cut[1024];
    const int k = clip_iov(iov, cnt, static_cast<uint64_t>(allow), cut);
    const ssize_t r = k > 0 ? call(cut, k) : 0;
    account(r);
    return r;
}

}  // namespace

extern "C" {

#define WRAP_IOV(name, OP, offtype)                                                          \
    ssize_t name(int fd, const struct iovec* iov, int cnt, offtype off) {                    \
        static auto fn = real<ssize_t (*)(int, const struct iovec*, int, offtype)>(#name);   \
        return wrapped_iov(OP, fd, iov, cnt,                                                 \
                           [&](const struct iovec* v, int c) { return fn(fd, v, c, off); }); \
    }

WRAP_IOV(pwritev, kWrite, off_t)
WRAP_IOV(pwritev64, kWrite, off64_t)
WRAP_IOV(preadv, kRead, off_t)
WRAP_IOV(preadv64, kRead, off64_t)

// preadv2 also takes flags.
#define WRAP_IOV2(name, OP, offtype)                                                                \
    ssize_t name(int fd, const struct iovec* iov, int cnt, offtype off, int flags) {                \
        static auto fn = real<ssize_t (*)(int, const struct iovec*, int, offtype, int)>(#name);     \
        return wrapped_iov(OP, fd, iov, cnt,                                                        \
                           [&](const struct iovec* v, int c) { return fn(fd, v, c, off, flags); }); \
    }

WRAP_IOV2(preadv2, kRead, off_t)
WRAP_IOV2(preadv64v2, kRead, off64_t)

ssize_t copy_file_range(int in, loff_t* in_off, int out, loff_t* out_off, size_t n, unsigned flags) {
    static auto fn = real<ssize_t (*)(int, loff_t*, int, loff_t*, size_t, unsigned)>("copy_file_range");
    if (!active(kWrite, out) && !active(kRead, in)) return fn(in, in_off, out, out_off, n, flags);
    const long long allow = admit(n);
    if (allow < 0) return -1;
    const ssize_t r = allow > 0 ? fn(in, in_off, out, out_off, static_cast<size_t>(allow), flags) : 0;
    account(r);
    return r;
}

}  // extern "C"

namespace {

// The calls that move no bytes (fallocate, fsync, rename) once they are the faulted operation: fail or
// signal as FAULT_AFTER_CALLS says, else make the real call `call()`.
template <typename Call>
int counted_call(Call call) {
    if (admit(0) < 0) return -1;
    const int r = call();
    account(0);
    return r;
}

}  // namespace

extern "C" {

#define WRAP_FALLOCATE(name, offtype)                                      \
    int name(int fd, int mode, offtype off, offtype len) {                 \
        static auto fn = real<int (*)(int, int, offtype, offtype)>(#name); \
        if (g_cfg.no_fallocate) {                                          \
            errno = EOPNOTSUPP;                                            \
            return -1;                                                     \
        }                                                                  \
        if (!active(kFallocate, fd)) return fn(fd, mode, off, len);        \
        return counted_call([&] { return fn(fd, mode, off, len); });       \
    }

WRAP_FALLOCATE(fallocate, off_t)
WRAP_FALLOCATE(fallocate64, off64_t)

#define WRAP_SYNC(name)                              \
    int name(int fd) {                               \
        static auto fn = real<int (*)(int)>(#name);  \
        if (!active(kFsync, fd)) return fn(fd);      \
        return counted_call([&] { return fn(fd); }); \
    }

WRAP_SYNC(fsync)
WRAP_SYNC(fdatasync)

// The filesystem as it is, but with FAULT_FREE_BYTES available (in whole fragments, as the kernel
// reports them).
#define WRAP_STATVFS(name, type)                                                                      \
    int name(const char* path, struct type* buf) {                                                    \
        static auto fn = real<int (*)(const char*, struct type*)>(#name);                             \
        const int r = fn(path, buf);                                                                  \
        if (r != 0 || g_cfg.free_bytes < 0 || (g_cfg.path[0] && !strstr(path, g_cfg.path))) return r; \
        const unsigned long long frag = buf->f_frsize ? buf->f_frsize : 4096;                         \
        buf->f_bavail = static_cast<unsigned long long>(g_cfg.free_bytes) / frag;                     \
        if (buf->f_bfree < buf->f_bavail) buf->f_bfree = buf->f_bavail;                               \
        log_line("statvfs");                                                                          \
        return r;                                                                                     \
    }

WRAP_STATVFS(statvfs, statvfs)
WRAP_STATVFS(statvfs64, statvfs64)

int rename(const char* from, const char* to) {
    static auto fn = real<int (*)(const char*, const char*)>("rename");
    char abs[8192];
    if (to[0] != '/') {
        char cwd[4096];
        snprintf(abs, sizeof abs, "%s/%s", getcwd(cwd, sizeof cwd) ? cwd : ".", to);
    } else {
        snprintf(abs, sizeof abs, "%s", to);
    }
    if (!g_ready || g_cfg.op != kRename || !path_matches(abs)) return fn(from, to);
    return counted_call([&] { return fn(from, to); });
}

}  // extern "C"
