// What llama-perplexity measured, as the eval and calibrate results hold it: a value with its error, and
// the figures of one --kl-divergence run (read from its log by src/format/perplexity_log.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gguf_reap {

struct ValueErr {
    double value = 0;
    double err = 0;
    bool operator==(const ValueErr&) const = default;
};

// The figures of a KLD run, from its summary or its last chunk row.
struct KldFigures {
    std::string from;  // "summary" or "last chunk row"
    int64_t chunks = 0;
    ValueErr ppl_output;
    std::optional<ValueErr> ppl_source;  // summary only ("Mean PPL(base)")
    ValueErr ln_ppl_ratio;
    ValueErr kld;
    // Summary only: null when the run printed no such line.
    std::optional<double> kld_median, kld_p99, kld_p999, kld_max;
    ValueErr rms_dp;    // percent
    ValueErr same_top;  // percent
    bool operator==(const KldFigures&) const = default;
};

}  // namespace gguf_reap
