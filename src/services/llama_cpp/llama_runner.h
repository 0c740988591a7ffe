// llama.cpp's tools found and run: the one runner eval and calibrate share. A run is io/child_process's
// run_child (no shell; an interrupt ends the child and throws Interrupted) with its output in a log file;
// a failed run is an IoError quoting the log's last lines; a run that counts something (chunks) shows it
// on the progress line as the log grows.
//
//   find_llama_tool(tool, where)      the binary, from --llama-bin, $GGUF_REAP_LLAMA_BIN or $PATH
//   LlamaRunner(log, events).run(..)  a run whose log is thrown away; try_run keeps it for the caller
//   runner.version(tool, binary)      `TOOL --version`'s last two lines
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf_reap/error.h"
#include "gguf_reap/events.h"
#include "gguf_reap/llama_args.h"
#include "io/child_process.h"

namespace gguf_reap::llama_cpp {

// Where llama.cpp's tools are looked for: `dir` (--llama-bin) when given, nowhere else; else `env_dir`
// ($GGUF_REAP_LLAMA_BIN) when set; else each directory of `path_list` ($PATH).
struct LlamaBin {
    std::string dir, env_dir, path_list;
};

// The tool's binary. Missing: UsageError "NAME not found WHERE: [WHY; ]give --llama-bin DIR (llama.cpp's
// build/bin) or set GGUF_REAP_LLAMA_BIN=DIR", WHERE naming the place looked in.
std::string find_llama_tool(LlamaTool tool, const LlamaBin& where, const Message& why = {});

// A log of llama.cpp's is a few hundred bytes per chunk: read whole, at most this much.
inline constexpr uint64_t kLogLimit = uint64_t{256} << 20;
// Lines of a failed run's log quoted in its error.
inline constexpr size_t kErrorLines = 12;

// A log, read whole (at most kLogLimit bytes).
std::string read_log(const std::string& path);
// The last kErrorLines lines of a log, for an error message.
std::string log_tail(std::string_view log);

// Progress of a run on the progress line: "LABEL" with `count(log so far)` of `total`.
struct LlamaProgress {
    std::string label;
    int64_t total = 0;
    std::function<int64_t(std::string_view)> count;
};

struct LlamaRun {
    std::string log;
    ChildExit exit;
};

class LlamaRunner {
  public:
    // Runs log to a temporary beside `log_path` (never renamed: gone after each run).
    LlamaRunner(std::string log_path, const Events& events) : log_path_(std::move(log_path)), ev_(events) {}

    // Runs `argv` (argv[0] the binary) with `stdin_path` on its stdin ("" = /dev/null); returns its log.
    // IoError "LABEL failed (EXIT); its last lines: ..." when it does not exit 0; Interrupted.
    std::string run(const std::vector<std::string>& argv, const std::string& label,
                    const std::string& stdin_path = "", const LlamaProgress* progress = nullptr) const;
    // The same with its output in `log_path` (the caller's, kept), its exit returned whatever it was; run
    // in the directory `cwd` when one is given (paths in `argv` are then relative to it).
    LlamaRun try_run(const std::vector<std::string>& argv, const std::string& log_path,
                     const LlamaProgress* progress = nullptr, const std::string& cwd = "") const;
    // `binary --version`: its last two lines ("version: ...", "built with ...").
    std::string version(LlamaTool tool, const std::string& binary) const;

    const Events& events() const { return ev_; }

  private:
    std::string log_path_;
    const Events& ev_;
};

}  // namespace gguf_reap::llama_cpp
