// Greedy tokens from llama-completion: the prompt, then N tokens at temperature 0, read back as token ids
// from its --prompt-cache session file (format/completion_session.h). eval's smoke test runs it on the
// source and on each build.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf_reap/llama_args.h"
#include "services/llama_cpp/llama_runner.h"

namespace gguf_reap::llama_cpp {

struct GreedyRun {
    std::string binary;  // llama-completion
    std::string model;   // any shard
    std::string prompt;
    uint64_t tokens = 0;       // -n
    uint64_t threads = 0;      // 0 = llama.cpp's default
    std::string session_path;  // the session file's place (a temporary beside it is used, then removed)
};

struct Greedy {
    int64_t prompt_tokens = 0;         // as llama-completion counted the prompt (BOS included)
    std::vector<int32_t> ids;          // the generated tokens, after the prompt's
    std::vector<std::string> command;  // the session file's temporary name replaced by SESSION
};

// Runs it; IoError when it fails, prints no prompt length, or saves no session of at least the prompt.
Greedy generate_greedy(const LlamaRunner& runner, const GreedyRun& job, const LlamaArgs& extra,
                       const std::string& label);

}  // namespace gguf_reap::llama_cpp
