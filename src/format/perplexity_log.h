// What llama-perplexity prints, read back: the base run (--kl-divergence-base) and the KL-divergence
// run (--kl-divergence) of llama.cpp 34af94cd9 (tools/perplexity/perplexity.cpp). Pure text parsing;
// never prints. Pinned to that version's format, tested on logs recorded from its CPU build
// (tests/data/llama-perplexity/).
//
// The lines it reads (stdout and stderr of one run, in any interleaving):
//   1. "... kl_divergence: computing over N chunks, n_ctx=C, batch_size=B, n_seq=S"    (KLD run)
//      "... perplexity: calculating perplexity over N chunks, n_ctx=C, batch_size=B, n_seq=S" (base run)
//   2. a KLD run's per-chunk rows, after the header "chunk             PPL ...":
//        "%4d" then "    %9.4lf ± %9.4lf" (PPL(Q)), "    %10.5lf ± %10.5lf" (ln(PPL(Q)/PPL(base))),
//        "    %10.5lf ± %10.5lf" (KLD), "    %6.3lf ± %6.3lf %" (Δp RMS), "    %6.3lf ± %6.3lf %"
//        (same top p). Each row holds the running means over every chunk so far.
//   3. a KLD run's summary (only when it scored at least 100 tokens): "Mean PPL(Q) : v ± e",
//      "Mean PPL(base) : v ± e", "Mean ln(PPL(Q)/PPL(base)) : v ± e", "Mean    KLD: v ± e",
//      "Maximum KLD: v", "99.9%   KLD: v", "99.0%   KLD: v", "Median  KLD: v", "RMS Δp    : v ± e %",
//      "Same top p: v ± e %" (the last line of the run).
//   4. a base run's "Final estimate: PPL = v +/- e".
//   5. errors: "you need at least N tokens to evaluate perplexity with a context of C" then
//      "the data file you provided tokenizes to only M tokens"; llama.cpp prints them and still exits 0.
// llama.cpp's logger runs on its own thread and may lose its last lines when the process exits: a
// summary without its last line ("Same top p") is incomplete, and the final running values are then read
// from the last chunk row (KldFigures::from = "last chunk row").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf_reap/perplexity.h"

namespace gguf_reap {

// One per-chunk row of a KLD run: running values over chunks 1..chunk.
struct KldChunkRow {
    int64_t chunk = 0;
    ValueErr ppl;       // PPL(Q)
    ValueErr ln_ratio;  // ln(PPL(Q)/PPL(base))
    ValueErr kld;
    ValueErr rms_dp;    // percent
    ValueErr same_top;  // percent
};

// The run's header line "computing over N chunks, n_ctx=C, batch_size=B, n_seq=S".
struct PerplexityRunShape {
    int64_t chunks = 0;
    int64_t n_ctx = 0;
    int64_t batch = 0;
    int64_t n_seq = 0;
};

struct TooFewTokens {
    int64_t needed = 0;  // llama-perplexity's minimum: 2 × n_ctx
    int64_t have = 0;
};

struct KldLog {
    std::optional<PerplexityRunShape> shape;
    std::vector<KldChunkRow> rows;
    bool summary_complete = false;
    std::optional<KldFigures> figures;  // null when there is neither a summary nor a chunk row
    std::optional<TooFewTokens> too_few_tokens;
};

struct BaseLog {
    std::optional<PerplexityRunShape> shape;
    std::optional<ValueErr> ppl;  // "Final estimate: PPL = v +/- e"
    std::optional<TooFewTokens> too_few_tokens;
};

// Parses the text of one --kl-divergence run. Lines it does not know are ignored; a row that starts
// like a chunk row but does not hold its 11 numbers is ignored too (a line the logger cut).
KldLog parse_kld_log(std::string_view text);
// Parses the text of one --kl-divergence-base run.
BaseLog parse_base_log(std::string_view text);

// "Total number of tokens: N" from llama-tokenize --show-count; null when absent.
std::optional<int64_t> parse_token_count(std::string_view text);

// The last `n` non-empty lines of `text`, joined with "\n" (for error messages).
std::string last_lines(std::string_view text, size_t n);

}  // namespace gguf_reap
