// llama.cpp's tools as gguf-reap runs them: the one table that says, per tool, its binary, the arguments
// gguf-reap writes on its command lines, and the ones it refuses in --llama-args besides; and every
// command line gguf-reap runs, built from that table (llama_tools.cpp). What --llama-args may not say is
// derived from the same rows (refusal below), so a flag gguf-reap starts to write is refused in
// --llama-args by that one line, and a flag llama.cpp renames is one string.
//
//   kld_base_command(job, logits, args) ...   a command line: gguf-reap's arguments, then the user's
//                                             --llama-args that tool takes (LlamaArgs::for_tool)
//   refusal(tool, "-c")                       why --llama-args may not give that option, or null
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf_reap/error.h"
#include "gguf_reap/llama_args.h"

namespace gguf_reap::llama_cpp {

// llama-perplexity on one model and one text: `chunks` chunks of `ctx` tokens, batch `batch`.
struct PerplexityJob {
    std::string binary, model, text;
    uint64_t ctx = 0, batch = 0;
    int64_t chunks = 0;
    uint64_t threads = 0;  // 0 = llama.cpp's default
};
// The model's logits written to `logits` (--kl-divergence-base FILE).
std::vector<std::string> kld_base_command(const PerplexityJob& j, const std::string& logits,
                                          const LlamaArgs& extra);
// The model's KL divergence from the logits in `base` (--kl-divergence-base FILE --kl-divergence).
std::vector<std::string> kld_command(const PerplexityJob& j, const std::string& base, const LlamaArgs& extra);

// llama-imatrix on one text into `out` (GGUF), with -c and -b both `ctx`.
struct ImatrixJob {
    std::string binary, model, text;
    uint64_t ctx = 0;
    uint64_t threads = 0;
};
std::vector<std::string> imatrix_command(const ImatrixJob& j, const std::string& out, const LlamaArgs& extra);

// llama-tokenize's count and ids of the text on its stdin (it takes no --llama-args).
std::vector<std::string> tokenize_command(const std::string& binary, const std::string& model);

// llama-completion's greedy tokens after `prompt`, saved in the session file `session`.
struct GreedyJob {
    std::string binary, model, prompt;
    uint64_t tokens = 0, ctx = 0;
    uint64_t threads = 0;
};
std::vector<std::string> greedy_command(const GreedyJob& j, const std::string& session,
                                        const LlamaArgs& extra);

// llama-server on 127.0.0.1:`port` with `slots` slots sharing `ctx` tokens.
struct ServerJob {
    std::string binary, model;
    uint16_t port = 0;
    uint64_t slots = 0, ctx = 0;
    uint64_t threads = 0;
    bool jinja = false;  // --jinja, for the chat endpoint's templates (after --cors-origins)
};
std::vector<std::string> server_command(const ServerJob& j, const LlamaArgs& extra);

// `TOOL --version`.
std::vector<std::string> version_command(LlamaTool tool, const std::string& binary);

// How gguf-reap's documents and messages name what it runs: "llama-completion --temp 0" (the smoke test's
// decoding), "llama-perplexity --kl-divergence-base" (the source's logits), "--kl-divergence" (a build's
// run against them), "--prompt-cache" (where llama-completion saves its session), "llama-imatrix
// --version".
std::string greedy_words();
std::string kld_base_words();
std::string kld_words();
std::string session_option();
std::string version_words(LlamaTool tool);
// What rank says of llama-imatrix: how to make the GGUF imatrix a criterion needs ("llama-imatrix
// --output-format gguf, the default since 2025-07"), and what pooled consensus copies ("as
// llama-imatrix merges files").
std::string imatrix_gguf_words();
std::string imatrix_merge_words();

// Why --llama-args may not give `option` (its name, without "=VALUE") to a tool.
struct Refusal {
    Message instead;            // what to do instead
    bool own_sentence = false;  // `instead` is the whole reason ("ORIGIN OPTION: INSTEAD"), not the end of
                                // "collides with an argument gguf-reap sets for TOOL: INSTEAD"
};
// Null when `tool` may take it. A tool refuses every option of an argument it writes, every option of an
// argument any tool writes that means the same for all (the model, the text, the context, the output,
// ...), and the options of its own modes gguf-reap cannot follow (llama-perplexity's --hellaswag).
const Refusal* refusal(LlamaTool tool, std::string_view option);

}  // namespace gguf_reap::llama_cpp
