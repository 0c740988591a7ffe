// eval's use of llama.cpp's tools: which it needs, and its perplexity runs counted on the progress line
// (the tools and their runs are services/llama_cpp's).
#include <algorithm>

#include <fmt/format.h>

#include "io/progress.h"
#include "ops/eval/eval_internal.h"

namespace gguf_reap::eval_detail {

llama_cpp::LlamaBin llama_bin(const EvalRequest& q) {
    return {q.llama_bin, q.llama_bin_env, q.path_env};
}

LlamaTools find_llama_tools(const EvalRequest& q) {
    LlamaTools t;
    std::vector<std::pair<LlamaTool, std::string*>> wanted;
    if (!q.texts.empty())
        wanted = {{LlamaTool::perplexity, &t.perplexity}, {LlamaTool::tokenize, &t.tokenize}};
    if (!q.smoke_prompt.empty()) wanted.emplace_back(LlamaTool::completion, &t.completion);
    for (auto [tool, out] : wanted) *out = llama_cpp::find_llama_tool(tool, llama_bin(q));
    return t;
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

std::string run_counted(Ctx& c, const std::vector<std::string>& argv, const std::string& label, int64_t total,
                        int64_t (*count)(std::string_view)) {
    const llama_cpp::LlamaProgress progress{c.progress_prefix + label, total, count};
    return c.runner.run(argv, label, "", &progress);
}

}  // namespace gguf_reap::eval_detail
