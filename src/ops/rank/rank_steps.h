// The steps of ops::rank (include/gguf_reap/rank.h), each a plain function: resolve the request into a
// plan (rank_plan.h), read the inputs it names, decide, write the three files; and the texts and JSON
// made from a decision.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "ops/rank/rank_plan.h"

namespace gguf_reap {

// Reads and checks every input the plan names (rank_input.cpp). Throws InputError (bad file),
// UsageError (inputs that do not fit together or options the inputs cannot satisfy), IoError.
RankInput read_rank_input(const RankSources& sources);

// Pure: everything after the inputs are read (rank_decide.cpp). Throws UsageError when the rules cannot
// be met.
RankDecision rank_experts(const RankInput& in, const RankMethod& method);

// The rule as a message: {RankOptions::kRatio, " 0.25"}; a fit adds the K it chose and the sizes at K and
// K + 1 (fit_sentence). The CLI reads "--ratio 0.25".
Message rule_message(const RankDecision& r);
// A request field as a keeplist names it: "--" and the field's name ("--ratio", "--protect").
std::string keeplist_field(RequestField f);
// The rule as a keeplist's "rule" and the report record it: "--ratio 0.25".
std::string rule_text(const RankDecision& r);

// The keeplist's "method" object: tool, criterion, consensus, rule, thresholds, domains (file, sha256,
// datasets, chunks, tokens), neuron plan, safety margin.
nlohmann::ordered_json rank_method_json(const RankInput& in, const RankDecision& r);
// The receipt's Markdown text (rank_receipt.cpp).
std::string render_receipt(const RankInput& in, const RankDecision& r);
// The tie rule in words: the receipt's "Ties" line and the keeplist's method.tie_break.
extern const char* const kTieRule;
// The lowest retained share of domain d's criterion mass over the blocks, and that block's index (NaN
// and 0 when the domain has mass in no block): the receipt's table and the --json document.
std::pair<double, size_t> worst_retained_share(const RankDecision& r, size_t d);
// The sentence the seed's model card states: "no pruned expert ranks better than R of N in any domain,
// in any layer (median layer: M); the closest to being kept is blk.B expert E, ranked R in DOMAIN".
std::string safety_margin_sentence(const RankDecision& r);
// A JSON summary (the --json document and the basis of the text summary).
nlohmann::ordered_json rank_summary_json(const RankInput& in, const RankDecision& r);

// Writes the three files into `dir` (created if missing), each atomically. Existing files are
// refused unless `force`. `threads` build them in parallel (0: one per core). Throws UsageError / IoError.
void write_rank_outputs(const RankInput& in, const RankDecision& r, const std::string& dir, bool force,
                        int threads = 0);

// Spearman rank correlation (average ranks for ties); NaN when either side is constant or n < 2.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace gguf_reap
