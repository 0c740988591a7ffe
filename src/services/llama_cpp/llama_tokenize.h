// A text's tokens with a model's vocabulary, as llama.cpp counts them: llama-tokenize, fed the text on
// stdin. eval counts its texts this way, calibrate counts and cuts them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "services/llama_cpp/llama_runner.h"

namespace gguf_reap::llama_cpp {

// The bytes llama.cpp's -f reads from a file: common/arg.cpp drops one trailing newline.
std::string_view as_file_reads(std::string_view text);

struct Tokenized {
    int64_t count = 0;                 // "Total number of tokens" (BOS included when the model adds one)
    std::vector<int32_t> ids;          // with `ids` asked for; empty otherwise
    std::vector<std::string> command;  // the command, fed the text on stdin
};

struct TokenizeJob {
    std::string binary;      // llama-tokenize
    std::string model;       // any shard
    std::string stdin_path;  // a temporary the text is written to (its directory must exist)
    std::string what;        // names the text in the progress and errors: "llama-tokenize on WHAT"
    bool ids = false;        // the token ids too, not only their count
};

// `text` tokenized exactly as given (on stdin, so that llama.cpp keeps every byte: give it
// as_file_reads(file) for what -f reads). IoError when llama-tokenize fails or prints no count (or, with
// ids, no ids that many).
Tokenized tokenize(const LlamaRunner& runner, const TokenizeJob& job, std::string_view text);

}  // namespace gguf_reap::llama_cpp
