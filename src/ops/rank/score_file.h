// rank --criterion external: per-expert score files (JSON), one per domain (docs/rank.md, "External
// scores"): {"blocks": {"BLOCK": {"FIELD": [one number per expert], ...}}} or {"BLOCK": [scores]}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf_reap/rank.h"
#include "ops/rank/rank_plan.h"

namespace gguf_reap {

// What the score files hold, per domain in the order given.
struct ScoreRead {
    std::vector<int> blocks;  // the model's MoE blocks, or every block some file names
    int64_t expert_count = 0;
    std::string field;          // the field ranked by
    bool is_mean = false;       // it is a per-token mean (reap, ean_mean, avg_gate_weight) ...
    bool times_counts = false;  // ... multiplied by activation_counts (ScoreSources::sum_means)
    std::vector<DomainData> domains;
};

// Reads every score file of `src`: the chosen field (ScoreSources::field, else "reap" where present,
// else "score") and the routed-token counts ("activation_counts") where given, and each file's size and
// (with `hash`) sha256. `model_blocks` and `model_experts` are the model's (nullptr and 0 without one):
// without a model the blocks are those the files name. Throws InputError / UsageError / IoError.
ScoreRead read_score_files(const ScoreSources& src, const std::vector<int>* model_blocks,
                           int64_t model_experts, bool hash);

}  // namespace gguf_reap
