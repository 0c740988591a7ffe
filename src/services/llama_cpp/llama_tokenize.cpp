// llama-tokenize for a text's token count and ids (services/llama_cpp/llama_tokenize.h).
#include "services/llama_cpp/llama_tokenize.h"

#include <fmt/format.h>

#include "format/imatrix_log.h"
#include "format/perplexity_log.h"
#include "io/output_file.h"
#include "services/llama_cpp/llama_tools.h"

namespace gguf_reap::llama_cpp {

std::string_view as_file_reads(std::string_view text) {
    if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    return text;
}

Tokenized tokenize(const LlamaRunner& runner, const TokenizeJob& job, std::string_view text) {
    OutputFile in(job.stdin_path);
    in.write_at(0, text.data(), text.size());
    Tokenized t;
    // No --llama-args: counting needs the vocabulary alone (LlamaArgs::for_tool gives llama-tokenize none).
    t.command = tokenize_command(job.binary, job.model);
    const std::string out = runner.run(
        t.command, fmt::format("{} on {}", llama_tool_name(LlamaTool::tokenize), job.what), in.temp_path());
    const auto count = parse_token_count(out);
    if (!job.ids) {
        if (!count)
            throw IoError(job.binary, fmt::format("printed no \"Total number of tokens\" for {}; its last "
                                                  "lines:\n{}",
                                                  job.what, log_tail(out)));
        t.count = *count;
        return t;
    }
    auto ids = parse_token_ids(out);
    if (!ids || !count || static_cast<int64_t>(ids->size()) != *count)
        throw IoError(job.binary, fmt::format("printed no token ids and count for {}; its last lines:\n{}",
                                              job.what, log_tail(out)));
    t.count = *count;
    t.ids = std::move(*ids);
    return t;
}

}  // namespace gguf_reap::llama_cpp
