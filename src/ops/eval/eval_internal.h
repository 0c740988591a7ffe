// The steps of ops::eval shared between its files (eval.cpp runs, eval_inputs.cpp checks, eval_tools.cpp
// finds llama.cpp's tools and counts the runs, eval_smoke.cpp the greedy smoke test). llama.cpp itself is
// services/llama_cpp's: its tools' command lines, their runs, their logs' limits.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf_reap/eval.h"
#include "model/model_identity.h"
#include "model/shard_set.h"
#include "services/llama_cpp/llama_runner.h"

namespace gguf_reap::eval_detail {

// llama-perplexity's -b for every run: its default, given explicitly so the commands say it.
inline constexpr uint64_t kBatch = 2048;

struct EvalModel {
    std::string path;  // as given
    ShardSet set;
    std::vector<std::string> shard_names;
    uint64_t bytes = 0;
    uint64_t expert_count = 0;
    uint64_t n_vocab = 0;
    std::string identity;  // source_identity(set): the sha256 of its shard headers
    EvalOutputFacts facts() const { return {path, shard_names, bytes, expert_count}; }
};

struct LlamaTools {
    std::string perplexity, tokenize;
    std::string completion;  // only with --smoke-prompt
};

// The smoke test's limits: a prompt is a line or a paragraph, the test a few dozen tokens.
inline constexpr uint64_t kMaxSmokePromptBytes = 4096;
inline constexpr uint64_t kMaxSmokeTokens = 1024;

struct Ctx {
    const EvalRequest& q;
    const Events& ev;
    LlamaTools tools;
    std::string cache_dir;
    llama_cpp::LlamaRunner runner;  // its log: cache_dir/run.log
    // The llama-perplexity runs (base runs not cached, then KLD runs), counted for the progress line
    // "run i/n, ETA M:SS: LABEL: chunk c/N" (begin_run).
    int64_t runs_total = 0, runs_done = 0;
    std::chrono::steady_clock::time_point runs_start{};
    std::string progress_prefix;
};

// Counts the next llama-perplexity run: sets c.progress_prefix to "run i/n: " and, after the first run,
// "run i/n, ETA M:SS: " (the mean time of the runs so far, times the runs left with this one).
void begin_run(Ctx& c);

// The checks before anything runs: option values, duplicate text names, -o not an input. UsageError.
void check_request(const EvalRequest& q);
// Where the request says llama.cpp's tools are.
llama_cpp::LlamaBin llama_bin(const EvalRequest& q);
// llama-perplexity and llama-tokenize (and llama-completion for a smoke test) from --llama-bin,
// $GGUF_REAP_LLAMA_BIN or $PATH; UsageError saying how to point at them when missing.
LlamaTools find_llama_tools(const EvalRequest& q);
// Runs a llama.cpp tool (the runner's run), showing "run i/n[, ETA]: LABEL: chunk c/total" on a terminal
// when `total` > 0, c counted by `count` over the log so far.
std::string run_counted(Ctx& c, const std::vector<std::string>& argv, const std::string& label, int64_t total,
                        int64_t (*count)(std::string_view));
// Opens a model; InputError when it is not one or has no vocabulary.
EvalModel open_eval_model(const std::string& path);
// InputError when `out` was not made from `src`: its provenance says another expert count, or its
// tensor list (names, types) or vocabulary disagrees.
void check_same_source(const EvalModel& src, const EvalModel& out);

// UsageError when `ref` is the source itself; InputError when it is not the same model as `src` at
// another quantisation: another architecture, vocabulary (tokenizer.ggml.tokens) or expert count.
void check_reference(const EvalModel& src, const EvalModel& ref);
// The ggml type of most of a model's tensor bytes ("Q8_0", "F16", …).
std::string main_type(const ShardSet& s);

// The exact size of a --kl-divergence-base file (tools/perplexity/perplexity.cpp): "_logits_", n_ctx,
// n_vocab, n_chunk, the chunks' tokens (int32), then per chunk (ctx − 1 − ctx/2) rows of
// nv = 2·⌈n_vocab/2⌉ + 4 uint16 values.
uint64_t base_file_bytes(uint64_t n_vocab, uint64_t ctx, uint64_t chunks);

// The smoke test (--smoke-prompt): the source's greedy tokens, then each OUT's against them.
EvalSmoke run_smoke(Ctx& c, const EvalModel& src, const std::vector<EvalModel>& outs);

// The plot beside -o FILE: FILE with its extension replaced by ".svg" (eval.json → eval.svg).
std::string svg_path_for(const std::string& json_out);

}  // namespace gguf_reap::eval_detail
