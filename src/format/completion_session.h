// What `gguf-reap eval --smoke-prompt` reads back from llama-completion (llama.cpp 34af94cd9,
// tools/completion/completion.cpp): the token ids of its --prompt-cache file, and the prompt's length
// from its log. Pure parsing; never prints. Pinned to that version, tested on files recorded from its
// CPU build (tests/data/llama-perplexity/).
//
// The session file (src/llama-context.cpp, llama_context::state_save_file):
//   u32 magic 0x6767736e ("ggsn"), u32 version 9, u32 n_tokens, n_tokens × int32 token ids,
//   then the context's state (not read).
// With --prompt-cache-all, llama-completion saves it at exit holding the prompt's tokens followed by
// every token it generated (an end-of-generation token included, when it stopped at one).
// The log line, printed with --verbose-prompt: "... I llama_completion: number of tokens in prompt = P".
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "format/byte_source.h"

namespace gguf_reap {

inline constexpr uint32_t kSessionMagic = 0x6767736e;  // "ggsn", LLAMA_SESSION_MAGIC
inline constexpr uint32_t kSessionVersion = 9;         // LLAMA_SESSION_VERSION at 34af94cd9

// The token ids of a session file; InputError (file, offset, field) when it is not one, is of another
// version, or holds more than `max_tokens` ids (the context llama-completion was given).
std::vector<int32_t> parse_session_tokens(ByteSource& src, uint64_t max_tokens);

// P from "number of tokens in prompt = P"; null when the log has no such line.
std::optional<int64_t> parse_prompt_token_count(std::string_view log);

}  // namespace gguf_reap
