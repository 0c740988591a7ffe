// eval's behaviour runs (--prompts): panels read, every prompt generated greedily by llama-server on the
// source and on each OUT, loops and natural ends counted (docs/eval.md, "Behaviour").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf_reap/eval.h"
#include "ops/eval/eval_internal.h"

namespace gguf_reap::eval_detail {

// A panel's limits: a file of at most 64 MiB, 1 to 100,000 prompts, each at most 16 KiB.
inline constexpr uint64_t kMaxPanelBytes = uint64_t{64} << 20;
inline constexpr size_t kMaxPanelPrompts = 100000;
inline constexpr size_t kMaxPromptBytes = 16384;
// --gen-tokens and --parallel.
inline constexpr uint64_t kMaxGenTokens = 32768;
inline constexpr uint64_t kMaxParallel = 256;
// What a chat template may add to a prompt, in bytes, when the slots' context is sized (--chat).
inline constexpr uint64_t kChatAllowance = 1024;

struct Panel {
    EvalPanelFacts facts;
    std::vector<std::string> prompts;
};

// The option checks (UsageError): names, duplicates, --gen-tokens, --parallel.
void check_behaviour_request(const EvalRequest& q);
// A panel file: one prompt per line (blank lines skipped; a trailing '\r' dropped), or, for a name
// ending in ".jsonl", one JSON object per non-blank line whose "prompt" is a string. InputError (file,
// byte offset, field) for a bad line, an empty panel, a prompt too long, a file too large.
Panel read_panel(const EvalPanel& p);

// llama-server, found like the other tools; UsageError when missing.
std::string find_llama_server(const EvalRequest& q);

// Runs every panel on the source and on each OUT (one llama-server per model, started and stopped here),
// appending to r.behaviour; each generation's JSONL line (with its newline) goes to `write_line`, in
// (model, panel, index) order, when it is set.
void run_behaviour(Ctx& c, const std::string& server, const EvalModel& src,
                   const std::vector<EvalModel>& outs, const std::vector<Panel>& panels, EvalResult& r,
                   const std::function<void(const std::string&)>& write_line);

}  // namespace gguf_reap::eval_detail
