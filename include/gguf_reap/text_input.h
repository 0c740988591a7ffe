// A kind of text given by name, as eval (held-out texts) and calibrate (calibration texts) take them
// (--text NAME=FILE), and what both record of each: the file hashed, and its tokens with the model's
// vocabulary as llama.cpp counts them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gguf_reap {

struct TextInput {
    std::string name;  // [A-Za-z0-9_.-]+
    std::string path;
    bool operator==(const TextInput&) const = default;
};

struct TextFacts {
    std::string name, path;
    std::string sha256;  // of the file as given
    uint64_t bytes = 0;
    int64_t tokens = 0;  // llama-tokenize's count (BOS included when the model adds one)
    std::vector<std::string> tokenize_command;  // fed the text on stdin
    bool operator==(const TextFacts&) const = default;
};

}  // namespace gguf_reap
