// rank --criterion external: per-expert score files (JSON), one per domain (docs/rank.md, "External
// scores"): {"blocks": {"BLOCK": {"FIELD": [one number per expert], ...}}} or {"BLOCK": [scores]}.
#pragma once

#include "gguf_reap/rank.h"

namespace gguf_reap {

// Reads every --scores file of `opts` into `in`'s domains: the chosen field (--score-field, else
// "reap" where present, else "score") and the routed-token counts ("activation_counts") where given.
// Without a model the blocks are those the files name. Throws InputError / UsageError / IoError.
void load_score_domains(const RankOptions& opts, RankInput& in, bool have_model);

}  // namespace gguf_reap
