// Another program run to completion: started without a shell (posix_spawn with an argument vector, so a
// file name with spaces or "$(...)" in it is only a name), its stdout and stderr written together to a
// log file, its exit awaited by polling.
//
// Interrupts: the project's signal handler only sets a flag (io/signals.h); nothing resumes from a
// handler into C++ frames. The wait loop polls that flag every 10 ms for the first second, then every 100 ms;
// when it is set, the child is sent SIGTERM (SIGKILL after 5 s), reaped, and Interrupted is thrown, so the
// caller's temporaries are removed as the exception unwinds.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gguf_reap/error.h"

namespace gguf_reap {

struct ChildExit {
    int code = 0;    // exit status when it exited
    int signal = 0;  // the signal that ended it, 0 when it exited
    bool ok() const { return signal == 0 && code == 0; }
    std::string describe() const;  // "exit code 1", "killed by signal 9"
};

// Runs argv[0] (a path to an executable) with `argv`. Its stdin is `stdin_path` ("" = /dev/null), its
// stdout and stderr both go to `log_path` (created or truncated). `tick` (may be empty) is called on
// every poll (100 times a second at first, then 10). `cwd` (may be empty: ours) is the directory it runs
// in; `log_path` and `stdin_path` are opened before it goes there. Throws IoError when it cannot be
// started, Interrupted as above.
ChildExit run_child(const std::vector<std::string>& argv, const std::string& log_path,
                    const std::string& stdin_path, const std::function<void()>& tick,
                    const std::string& cwd = "");

// A program that runs beside us (a server): started without a shell like run_child, its stdout and
// stderr appended to `log_path`, its pid kept. stop() (and the destructor) sends SIGTERM, then SIGKILL
// after `grace_ms`, and reaps it, so no child outlives its owner however the owner's scope is left.
class BackgroundChild {
  public:
    // Throws IoError when it cannot be started.
    BackgroundChild(const std::vector<std::string>& argv, const std::string& log_path);
    ~BackgroundChild();
    BackgroundChild(const BackgroundChild&) = delete;
    BackgroundChild& operator=(const BackgroundChild&) = delete;

    int pid() const { return pid_; }
    // Non-blocking: how it ended, or null while it runs (once ended, the same answer every time).
    std::optional<ChildExit> exited();
    // Ends it (idempotent) and returns how it ended.
    ChildExit stop(long grace_ms = 5000);

  private:
    int pid_ = -1;
    std::optional<ChildExit> exit_;
};

// An executable named `name`: in `dir` when `dir` is not empty (nowhere else), else in `env_dir` when
// not empty, else in each directory of `path_list` (a $PATH value). Null when there is none.
std::optional<std::string> find_executable(const std::string& name, const std::string& dir,
                                           const std::string& env_dir, const std::string& path_list);

}  // namespace gguf_reap
