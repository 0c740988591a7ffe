// llama.cpp's tools found and run (services/llama_cpp/llama_runner.h).
#include "services/llama_cpp/llama_runner.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "format/perplexity_log.h"
#include "gguf_reap/eval.h"
#include "io/output_file.h"
#include "io/sequential_reader.h"
#include "services/llama_cpp/llama_tools.h"

namespace gguf_reap::llama_cpp {

std::string find_llama_tool(LlamaTool tool, const LlamaBin& where, const Message& why) {
    const std::string name = llama_tool_name(tool);
    if (auto p = find_executable(name, where.dir, where.env_dir, where.path_list)) return *p;
    const Message in = !where.dir.empty()       ? Message{"in ", EvalRequest::kLlamaBin, " " + where.dir}
                       : !where.env_dir.empty() ? Message{"in GGUF_REAP_LLAMA_BIN=" + where.env_dir}
                                                : Message{"on PATH"};
    throw RequestError(Message{name + " not found "} + in + Message{": "} +
                       (why.empty() ? Message{} : why + Message{"; "}) +
                       Message{"give ", EvalRequest::kLlamaBin,
                               " DIR (llama.cpp's build/bin) or set GGUF_REAP_LLAMA_BIN=DIR"});
}

std::string read_log(const std::string& path) {
    return read_small_file(path, kLogLimit, "llama.cpp log");
}

std::string log_tail(std::string_view log) {
    return last_lines(log, kErrorLines);
}

namespace {

// A run's progress on the progress line, counted over its log as it grows (run_child's tick).
class ProgressFeed {
  public:
    ProgressFeed(const Events& ev, const LlamaProgress* p, const std::string& log_path) {
        if (!p || p->total <= 0 || !ev.on_progress) return;
        scope_.emplace(ev, p->label, static_cast<uint64_t>(p->total));
        tick = [this, &ev, p, log_path] {
            const auto n = static_cast<uint64_t>(std::max<int64_t>(0, p->count(read_log(log_path))));
            if (n > shown_) ev.on_progress(n - shown_);
            shown_ = std::max(shown_, n);
        };
    }
    ProgressFeed(const ProgressFeed&) = delete;
    ProgressFeed& operator=(const ProgressFeed&) = delete;
    std::function<void()> tick;  // empty without progress

  private:
    std::optional<ProgressScope> scope_;
    uint64_t shown_ = 0;
};

}  // namespace

LlamaRun LlamaRunner::try_run(const std::vector<std::string>& argv, const std::string& log_path,
                              const LlamaProgress* progress, const std::string& cwd) const {
    ProgressFeed feed(ev_, progress, log_path);
    LlamaRun r;
    r.exit = run_child(argv, log_path, "", feed.tick, cwd);
    r.log = read_log(log_path);
    return r;
}

std::string LlamaRunner::run(const std::vector<std::string>& argv, const std::string& label,
                             const std::string& stdin_path, const LlamaProgress* progress) const {
    OutputFile log(log_path_);
    std::string text;
    ChildExit e;
    {
        ProgressFeed feed(ev_, progress, log.temp_path());
        e = run_child(argv, log.temp_path(), stdin_path, feed.tick);
        text = read_log(log.temp_path());
    }
    if (!e.ok())
        throw IoError(
            argv[0], fmt::format("{} failed ({}); its last lines:\n{}", label, e.describe(), log_tail(text)));
    return text;
}

std::string LlamaRunner::version(LlamaTool tool, const std::string& binary) const {
    return last_lines(run(version_command(tool, binary), version_words(tool)), 2);
}

}  // namespace gguf_reap::llama_cpp
