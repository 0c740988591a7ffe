// eval: what pruning cost, per kind of text, measured by the user's own llama.cpp (docs/eval.md).
//
//   ops::eval(request) → EvalResult     check the inputs → tokenize each text (llama-tokenize) →
//                                       per text, one base run on the source (llama-perplexity
//                                       --kl-divergence-base, cached) → per (OUT, text) one
//                                       --kl-divergence run → with --reference, the same
//                                       against the reference's logits, the source included
//                                       → with --smoke-prompt, greedy
//                                       tokens of the source and of each OUT (llama-completion) →
//                                       eval.json and eval.svg written (temporary → rename)
//
// Every figure is llama-perplexity's, read from its log (format/perplexity_log.h); none is computed
// here. The base logits are cached by the source's identity (the sha256 of its shard headers), the
// text's sha256, ctx and chunks, so a later eval of another ratio reuses them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/calibrate.h"
#include "gguf_reap/events.h"
#include "gguf_reap/llama_args.h"
#include "gguf_reap/perplexity.h"
#include "gguf_reap/text_input.h"

namespace gguf_reap {

// A panel of prompts for the behaviour runs (--prompts NAME=FILE).
struct EvalPanel {
    std::string name;  // [A-Za-z0-9_.-]+
    std::string path;
};

struct EvalRequest {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kSource{"source"}, kReference{"reference"}, kText{"text"},
        kLlamaBin{"llama_bin"}, kCtx{"ctx"}, kChunks{"chunks"}, kThreads{"threads"}, kCacheDir{"cache_dir"},
        kOut{"out"}, kSmokePrompt{"smoke_prompt"}, kSmokeTokens{"smoke_tokens"}, kPrompts{"prompts"},
        kTemp{"temp"}, kSamples{"samples"}, kSeed{"seed"}, kGenTokens{"gen_tokens"}, kParallel{"parallel"},
        kChat{"chat"}, kServerTimeout{"server_timeout"};
    std::string source;                // any shard of the source model
    std::vector<std::string> outputs;  // any shard of each pruned build, as given
    // Any shard of the unpruned model at another quantisation (BF16, F16), or "": the source and every OUT
    // are then also measured against its logits, which is what the whole build costs.
    std::string reference;
    std::vector<TextInput> texts;
    std::string llama_bin;      // --llama-bin DIR ("" = not given)
    std::string llama_bin_env;  // $GGUF_REAP_LLAMA_BIN
    std::string path_env;       // $PATH
    // --llama-args (default $GGUF_REAP_LLAMA_ARGS): after gguf-reap's own arguments on every run of
    // llama-perplexity and llama-completion (gguf_reap/llama_args.h), and part of the base-logits cache key.
    LlamaArgs llama_args;
    uint64_t ctx = 512;              // -c
    std::optional<uint64_t> chunks;  // --chunks; null = every chunk the text holds
    uint64_t threads = 0;            // -t; 0 = llama.cpp's default
    // Where base logits are kept; "" = .gguf-reap-cache in the working directory. The command gives
    // $XDG_CACHE_HOME/gguf-reap/kld, else ~/.cache/gguf-reap/kld (cli/environment.cpp).
    std::string cache_dir;
    std::string json_out;  // -o eval.json ("" = none); eval.svg is written beside it
    // --calibration: the calibrate.json of the build's calibration ("" = not given): each text is then
    // held out or not by its sha256 (gguf_reap/calibrate.h's text_origin); without it, not known.
    std::string calibration;
    // The smoke test: N greedy tokens from this prompt on the source and on each OUT; N given only with a
    // prompt, kDefaultSmokeTokens when not given.
    std::string smoke_prompt;
    std::optional<uint64_t> smoke_tokens;
    static constexpr uint64_t kDefaultSmokeTokens = 16;
    uint64_t smoke_token_count() const { return smoke_tokens.value_or(kDefaultSmokeTokens); }
    // The behaviour runs: every prompt of every panel generated greedily on the source and on each OUT
    // by llama-server (one per model), up to gen_tokens tokens, `parallel` requests at once.
    std::vector<EvalPanel> panels;
    // The temperatures each panel is generated at (--temp; none given = greedy only, {0}), in the order
    // run: ascending. At 0 a prompt gets one greedy generation; above 0, `samples` generations (null: 1),
    // each with a seed derived from `seed` (docs/eval.md, "Sampling"; llama_cpp::sample_seed).
    std::vector<double> temperatures;
    std::optional<uint64_t> samples;
    std::optional<uint64_t> seed;  // null: kDefaultSeed
    static constexpr uint64_t kDefaultSeed = 0;
    uint64_t seed_value() const { return seed.value_or(kDefaultSeed); }
    // The temperatures run, ascending: {0} when none is given.
    std::vector<double> temperature_list() const;
    uint64_t gen_tokens = 256;
    uint64_t parallel = 4;
    bool chat = false;                // the model's chat template, applied by the server
    uint64_t server_timeout_s = 600;  // a server not healthy, or a request not answered, after this long
    std::string tool_version;
};

// One model's logits on one text (llama-perplexity --kl-divergence-base): a cache entry.
struct EvalBase {
    std::string file;  // the cache entry
    uint64_t bytes = 0;
    bool cached = false;          // true: an earlier eval computed it
    std::optional<ValueErr> ppl;  // the base run's "Final estimate"
    std::vector<std::string> command;
    bool operator==(const EvalBase&) const = default;
};

// A text (its tokens counted with the source's vocabulary) and its base runs.
struct EvalTextFacts : TextFacts {
    int64_t chunks = 0;                      // chunks scored: min(--chunks, tokens / ctx)
    int64_t scored_tokens = 0;               // chunks × (ctx − 1 − ctx/2)
    EvalBase base;                           // the source's logits
    std::optional<EvalBase> reference_base;  // the reference's, with --reference
    // Against --calibration: false when it is one of the calibration texts (or a cut of one), of the
    // domain `calibration_domain`; null when not known (no --calibration).
    std::optional<bool> held_out;
    std::string calibration_domain;
    bool operator==(const EvalTextFacts&) const = default;
};

struct EvalOutputFacts {
    std::string path;                 // as given
    std::vector<std::string> shards;  // file names
    uint64_t bytes = 0;
    uint64_t expert_count = 0;
    bool operator==(const EvalOutputFacts&) const = default;
};

// The --reference model.
struct EvalReferenceFacts {
    EvalOutputFacts model;
    std::string identity;   // sha256 over its shard headers
    std::string main_type;  // the type of most of its tensor bytes (ggml's name: "F16", "BF16", …)
    bool operator==(const EvalReferenceFacts&) const = default;
};

struct EvalRun {
    std::string output;  // as given
    std::string text;    // the name
    int64_t tokens = 0;  // scored tokens (chunks × per chunk)
    KldFigures figures;
    std::vector<std::string> command;
    bool operator==(const EvalRun&) const = default;
};

// One token of a greedy generation: its id and its text (the vocabulary's piece, decoded:
// model/vocab_text.h).
struct SmokeToken {
    int32_t id = 0;
    std::string text;
    bool operator==(const SmokeToken&) const = default;
};

// A greedy generation by llama-completion: the tokens after the prompt, as its --prompt-cache file
// records them.
struct SmokeGeneration {
    std::vector<SmokeToken> tokens;
    std::vector<std::string> command;  // the session file's temporary name replaced by SESSION
    bool operator==(const SmokeGeneration&) const = default;
};

struct EvalSmokeOutput {
    std::string output;  // as given
    SmokeGeneration generation;
    int64_t identical = 0;              // leading tokens equal to the source's
    std::optional<int64_t> first_diff;  // index of the first token that differs; null when all agree
    bool operator==(const EvalSmokeOutput&) const = default;
};

struct EvalSmoke {
    std::string prompt;
    uint64_t tokens_requested = 0;
    int64_t prompt_tokens = 0;  // as llama-completion counted them (BOS included when it adds one)
    std::string completion_path;
    SmokeGeneration source;
    std::vector<EvalSmokeOutput> outputs;  // in OUT order
    bool operator==(const EvalSmoke&) const = default;
};

struct EvalPanelFacts {
    std::string name, path, sha256;
    uint64_t bytes = 0;
    int64_t prompts = 0;
    uint64_t max_prompt_bytes = 0;  // of a chat line: its messages and tools as JSON text
    std::string format;             // "lines" or "jsonl"
    // Of a .jsonl panel: the lines holding "messages" (sent to the chat endpoint), and those of them that
    // offer "tools" (docs/eval.md, "Chat and tools").
    int64_t chat_lines = 0, tool_lines = 0;
    bool operator==(const EvalPanelFacts&) const = default;
};

// A rate k/n with its Wilson score interval at 95 %.
struct EvalRate {
    int64_t k = 0, n = 0;
    double rate = 0, lo = 0, hi = 0;
    bool operator==(const EvalRate&) const = default;
};

// What one prompt's generation came to, exactly one of these (docs/eval.md, "Behaviour"): it ended
// naturally, it loops, it reached the token limit without looping, or the server gave no generation (an
// HTTP 5xx, no reply within --server-timeout, an empty answer).
enum class EvalOutcome { limit, loop, natural_end, error };

// A prompt the server gave no generation for: its 0-based index in the panel (and the sample's, above
// temperature 0) and what happened.
struct EvalPromptError {
    int64_t index = 0;
    int64_t sample = 0;
    std::string error;
    bool operator==(const EvalPromptError&) const = default;
};

// What a chat line's reply was (docs/eval.md, "Chat and tools"): no chat line (a plain prompt), a reply
// without a tool call, with tool calls that are all valid, with one that is not, a template error (HTTP
// 4xx or 5xx, or a reply that is not a chat completion), or another error (no reply in time, an empty
// answer).
enum class EvalChatOutcome { plain, text, tool_call, bad_tool_call, template_error, error };
// As eval.json and the generations file name them: null (plain), "text", "tool_call", "bad_tool_call",
// "template_error", "error".
const char* chat_outcome_name(EvalChatOutcome o);

// A generation whose outcome differs between a build and the source on one measure ("loops",
// "natural_ends", "errors", "template_errors", "tool_calls"): which, whether the build had it (the source
// then had not), and the start of its prompt (the last user message of a chat line), at most 60
// characters on one line.
struct EvalChange {
    std::string measure;
    int64_t index = 0;
    int64_t sample = 0;
    bool build = false;
    std::string excerpt;
    bool operator==(const EvalChange&) const = default;
};

// How one model generated on one panel at one temperature (docs/eval.md, "Behaviour").
struct EvalBehaviour {
    std::string model;  // "source" or the OUT as given
    std::string panel;
    int64_t prompts = 0;
    uint64_t gen_tokens = 0;
    double temperature = 0;
    int64_t samples = 1;           // generations per prompt (1 at temperature 0)
    std::optional<uint64_t> seed;  // --seed, above temperature 0
    int64_t generations() const { return prompts * samples; }
    EvalRate loops, natural_ends, errors;  // each of n = generations()
    // Per generation: prompt-major, then sample (panel order; one per prompt at temperature 0).
    std::vector<EvalOutcome> outcomes;
    std::string tokens_sha256;  // over every generation's token ids, in outcomes' order (docs/eval.md)
    std::vector<EvalPromptError> prompt_errors;
    // With chat lines (else empty and zero): per generation, in outcomes' order, what the chat reply was;
    // the template-error rate of n = the chat lines' generations, the tool-call rate of n = those of the
    // lines offering tools; why each invalid tool call was invalid.
    std::vector<EvalChatOutcome> chat_outcomes;
    std::vector<bool> tools_offered;  // per generation, with chat lines: its line offered tools
    EvalRate template_errors, tool_calls;
    std::vector<EvalPromptError> bad_tool_calls;
    // Of a build: the generations whose outcome differs from the source's, measure by measure.
    std::vector<EvalChange> changes;
    double mean_tokens = 0;
    std::optional<double> distinct_4;  // null when no generation has 4 tokens
    uint64_t four_grams = 0, distinct_four_grams = 0;
    int64_t tokens = 0;  // generated, in all (a chat reply's: its usage.completion_tokens)
    double seconds = 0;  // wall time of the panel's requests
    std::vector<std::string> server_command;
    bool operator==(const EvalBehaviour&) const = default;
};

struct EvalResult {
    std::string tool;
    std::string llama_build;  // llama-perplexity --version, as printed
    std::string perplexity_path;
    std::vector<std::string> llama_args;  // --llama-args, as split (each command holds those its tool takes)
    std::string source;
    std::vector<std::string> source_shards;
    uint64_t source_bytes = 0;
    uint64_t source_expert_count = 0;
    std::string source_identity;   // sha256 over the shard headers
    std::string source_main_type;  // the type of most of its tensor bytes ("Q8_0", …)
    EvalOutputFacts source_facts() const {
        return {source, source_shards, source_bytes, source_expert_count};
    }
    uint64_t ctx = 0, batch = 0;
    std::optional<uint64_t> chunks_requested;
    std::vector<EvalTextFacts> texts;
    // --calibration: the calibrate.json (its path as given, its sha256) and its texts; null without.
    struct Calibration {
        std::string path, sha256;
        std::vector<CalibrationText> texts;
        bool operator==(const Calibration&) const = default;
    };
    std::optional<Calibration> calibration;
    std::vector<EvalOutputFacts> outputs;
    std::vector<EvalRun> runs;                    // output-major, then text in --text order
    std::optional<EvalReferenceFacts> reference;  // with --reference
    // Against the reference's logits: the source first (output = the source as given), then each OUT,
    // each on every text in --text order.
    std::vector<EvalRun> reference_runs;
    std::optional<EvalSmoke> smoke;      // with --smoke-prompt
    std::vector<EvalPanelFacts> panels;  // with --prompts
    uint64_t gen_tokens = 0, parallel = 0;
    std::vector<double> temperatures{0};  // as run (ascending); {0} for a greedy-only eval
    int64_t samples = 1;                  // per prompt above temperature 0
    uint64_t seed = 0;
    bool chat = false;
    std::string server_path;  // llama-server, with --prompts
    // Model-major (source first), then panel in --prompts order, then temperature (ascending).
    std::vector<EvalBehaviour> behaviour;
    std::string generations_written;        // "" when not written
    std::string json_written, svg_written;  // "" when not written
    std::string svg_sha256;                 // of the plot written beside the JSON (files.svg_sha256)
    // The work was done but its files could not be written (the disk filled, the directory went away):
    // the reason. The results are still returned, for the caller to show.
    std::string write_error;
    bool operator==(const EvalResult&) const = default;
};

namespace ops {
// One `gguf-reap eval`. Throws UsageError (options, a missing llama-perplexity, a duplicate text name,
// a text too short, an output path that is an input, a reference that is the source), InputError (a
// model; an OUT of another source; a reference of another architecture, vocabulary or expert count),
// IoError (a failed llama.cpp run: its last lines), Interrupted.
EvalResult eval(const EvalRequest& request, const Events& events = {});
}  // namespace ops

}  // namespace gguf_reap
