#include "io/child_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/signals.h"

extern char** environ;

namespace gguf_reap {

namespace {

void sleep_ms(long ms) {
    timespec ts{ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);  // EINTR: a signal arrived; the caller polls the flag next
}

// Non-blocking: the child's status, or null while it runs.
std::optional<int> reap(pid_t pid) {
    int status = 0;
    for (;;) {
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r == 0) return std::nullopt;
        if (errno != EINTR) throw IoError("waitpid", "waitpid", errno);
    }
}

// SIGTERM, up to `grace_ms` to exit, then SIGKILL; always reaped. Returns its wait status.
int end_child(pid_t pid, long grace_ms = 5000) {
    kill(pid, SIGTERM);
    for (long waited = 0; waited < grace_ms; waited += 20) {
        if (const auto s = reap(pid)) return *s;
        sleep_ms(20);
    }
    kill(pid, SIGKILL);
    for (;;) {
        if (const auto s = reap(pid)) return *s;
        sleep_ms(20);
    }
}

ChildExit exit_of(int status) {
    ChildExit e;
    if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
    if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
    return e;
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path, const std::string& stdin_path,
            int log_flags, const std::string& cwd = "") {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // In another directory the program's own path must not be relative to ours.
    const std::string program = cwd.empty() ? argv[0] : std::filesystem::absolute(argv[0]).string();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string in = stdin_path.empty() ? "/dev/null" : stdin_path;
    posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | log_flags, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    // After the opens, so that `stdin_path` and `log_path` are ours, relative to our directory.
    if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, program.c_str(), &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw IoError(argv[0], "cannot start it", rc);
    return pid;
}

bool is_executable_file(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string ChildExit::describe() const {
    if (signal != 0) return fmt::format("killed by signal {}", signal);
    return fmt::format("exit code {}", code);
}

ChildExit run_child(const std::vector<std::string>& argv, const std::string& log_path,
                    const std::string& stdin_path, const std::function<void()>& tick,
                    const std::string& cwd) {
    check_interrupted();
    const pid_t pid = spawn(argv, log_path, stdin_path, O_TRUNC | O_APPEND, cwd);

    // Polled every 10 ms for its first second (llama-tokenize and --version end within it, and each 100 ms
    // poll would add 50 ms on average to them), every 100 ms after that.
    int polls = 0;
    for (;;) {
        std::optional<int> status;
        try {
            status = reap(pid);
        } catch (...) {
            end_child(pid);
            throw;
        }
        if (status) {
            const ChildExit e = exit_of(*status);
            check_interrupted();  // a Ctrl-C that also ended the child is still an interrupt
            return e;
        }
        if (interrupted()) {
            end_child(pid);
            throw Interrupted();
        }
        if (tick) {
            try {
                tick();
            } catch (...) {
                end_child(pid);
                throw;
            }
        }
        sleep_ms(++polls < 100 ? 10 : 100);
    }
}

BackgroundChild::BackgroundChild(const std::vector<std::string>& argv, const std::string& log_path)
    : pid_(spawn(argv, log_path, "", O_APPEND)) {}

BackgroundChild::~BackgroundChild() {
    try {
        stop();
    } catch (...) {  // waitpid failed: nothing more can be done about this pid
    }
}

std::optional<ChildExit> BackgroundChild::exited() {
    if (!exit_)
        if (const auto s = reap(pid_)) exit_ = exit_of(*s);
    return exit_;
}

ChildExit BackgroundChild::stop(long grace_ms) {
    if (!exited()) exit_ = exit_of(end_child(pid_, grace_ms));
    return *exit_;
}

std::optional<std::string> find_executable(const std::string& name, const std::string& dir,
                                           const std::string& env_dir, const std::string& path_list) {
    if (!dir.empty()) {
        const std::string p = dir + "/" + name;
        return is_executable_file(p) ? std::optional(p) : std::nullopt;
    }
    if (!env_dir.empty()) {
        const std::string p = env_dir + "/" + name;
        return is_executable_file(p) ? std::optional(p) : std::nullopt;
    }
    size_t at = 0;
    while (at <= path_list.size()) {
        size_t end = path_list.find(':', at);
        if (end == std::string::npos) end = path_list.size();
        const std::string d = end > at ? path_list.substr(at, end - at) : ".";
        const std::string p = d + "/" + name;
        if (!path_list.empty() && is_executable_file(p)) return p;
        at = end + 1;
    }
    return std::nullopt;
}

}  // namespace gguf_reap
