// eval's runner: llama.cpp's tools found and run, without a shell (gguf_reap/eval.h).
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "format/perplexity_log.h"
#include "gguf_reap/error.h"
#include "io/child_process.h"
#include "io/output_file.h"
#include "io/paths.h"
#include "io/progress.h"
#include "io/sequential_reader.h"
#include "ops/eval/eval_internal.h"

namespace gguf_reap::eval_detail {

LlamaTools find_llama_tools(const EvalRequest& q) {
    LlamaTools t;
    std::vector<std::pair<const char*, std::string*>> wanted;
    if (!q.texts.empty()) wanted = {{"llama-perplexity", &t.perplexity}, {"llama-tokenize", &t.tokenize}};
    if (!q.smoke_prompt.empty()) wanted.emplace_back("llama-completion", &t.completion);
    for (auto [name, out] : wanted) *out = find_llama_tool(name, q.llama_bin, q.llama_bin_env, q.path_env);
    return t;
}

std::string read_log(const std::string& path) {
    return read_small_file(path, kLogLimit, "llama.cpp log");
}

void begin_run(Ctx& c) {
    const auto now = std::chrono::steady_clock::now();
    if (c.runs_done == 0) c.runs_start = now;
    const int64_t i = ++c.runs_done;
    const int64_t n = std::max(c.runs_total, i);
    std::string eta;
    if (i > 1) {
        const double per_run = std::chrono::duration<double>(now - c.runs_start).count() / double(i - 1);
        eta = fmt::format(", ETA {}", format_eta(per_run * double(n - i + 1)));
    }
    c.progress_prefix = fmt::format("run {}/{}{}: ", i, n, eta);
}

std::string run_tool(Ctx& c, const std::vector<std::string>& argv, const std::string& stdin_path,
                     const std::string& label, int64_t progress_total, int64_t (*count)(std::string_view)) {
    OutputFile log(c.cache_dir + "/run.log");
    std::function<void()> tick;
    uint64_t shown = 0;
    std::optional<ProgressScope> scope;
    if (progress_total > 0 && c.ev.on_progress) {
        scope.emplace(c.ev, c.progress_prefix + label, static_cast<uint64_t>(progress_total));
        tick = [&] {
            const auto n = static_cast<uint64_t>(count(read_log(log.temp_path())));
            if (n > shown) c.ev.on_progress(n - shown);
            shown = std::max(shown, n);
        };
    }
    const ChildExit e = run_child(argv, log.temp_path(), stdin_path, tick);
    std::string text = read_log(log.temp_path());
    if (!e.ok())
        throw IoError(argv[0], fmt::format("{} failed ({}); its last lines:\n{}", label, e.describe(),
                                           last_lines(text, kErrorLines)));
    return text;
}

}  // namespace gguf_reap::eval_detail
