// llama-completion's greedy tokens (services/llama_cpp/llama_completion.h).
#include "services/llama_cpp/llama_completion.h"

#include <algorithm>

#include <fmt/format.h>

#include "format/completion_session.h"
#include "io/input_file.h"
#include "io/output_file.h"
#include "services/llama_cpp/llama_tools.h"

namespace gguf_reap::llama_cpp {

namespace {

// The context llama-completion is given: room for the prompt (at most one token per byte, plus BOS)
// and the generated tokens, so that no real model allocates its full context (llama.cpp pads it to a
// multiple of 256 anyway).
uint64_t greedy_ctx(const GreedyRun& j) {
    const uint64_t need = j.prompt.size() + j.tokens + 8;
    return (need + 255) / 256 * 256;
}

}  // namespace

Greedy generate_greedy(const LlamaRunner& runner, const GreedyRun& job, const LlamaArgs& extra,
                       const std::string& label) {
    const uint64_t ctx = greedy_ctx(job);
    // An empty file is what llama-completion starts a new session in; it saves the session there at exit.
    OutputFile session(job.session_path);
    const GreedyJob args{job.binary, job.model, job.prompt, job.tokens, ctx, job.threads};
    const std::vector<std::string> argv = greedy_command(args, session.temp_path(), extra);
    const std::string log = runner.run(argv, label);
    const auto prompt = parse_prompt_token_count(log);
    if (!prompt)
        throw IoError(job.binary,
                      fmt::format("{}: printed no \"number of tokens in prompt\"; its last lines:\n{}", label,
                                  log_tail(log)));
    const auto file = InputFile::open(session.temp_path());
    if (file->size() == 0)
        throw IoError(job.binary, fmt::format("{}: saved no session ({}); its last lines:\n{}", label,
                                              session_option(), log_tail(log)));
    std::vector<int32_t> ids;
    try {
        FileSource src(*file);
        ids = parse_session_tokens(src, ctx);
    } catch (const InputError& e) {  // the tool's own output, not the user's input
        throw IoError(job.binary, fmt::format("{}: its session file is not one this gguf-reap reads: {}",
                                              label, e.what()));
    }
    if (ids.size() < static_cast<size_t>(*prompt))
        throw IoError(job.binary, fmt::format("{}: its session file holds {} tokens, fewer than the prompt's "
                                              "{}; its last lines:\n{}",
                                              label, ids.size(), *prompt, log_tail(log)));
    Greedy g;
    g.prompt_tokens = *prompt;
    g.ids.assign(ids.begin() + *prompt, ids.end());
    g.command = argv;
    std::replace(g.command.begin(), g.command.end(), session.temp_path(), std::string("SESSION"));
    return g;
}

}  // namespace gguf_reap::llama_cpp
