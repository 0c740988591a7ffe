// rank, the domains' side of the decision (ops/rank.h), and the warnings about the inputs: each domain's
// share of the criterion's mass per expert and block, the max-min search applied to the keep mask
// (ops/max_min.h), and the retained shares every consensus reports (RankResult::retained_share, worst_*).
#pragma once

#include <cstdint>

#include "ops/rank.h"

namespace gguf_reap {

// Replaces r.keep, block by block, with the max-min set, starting from the set already in r.keep (the
// min-rank decision). `group_size` experts per contiguous group, `quota` kept per group.
void choose_max_min(const RankInput& in, RankResult& r, int64_t group_size, int64_t quota, int threads);

// r.retained_share, r.worst_share, r.worst_domain, r.worst_block from r.keep and r.scores.
void fill_retained_shares(const RankInput& in, RankResult& r);

// The warnings about the inputs the receipt repeats: too few domains, domains from the same file or
// datasets, a per-token-mean criterion pruning more than 25 %, the input sanity problems, no --model.
void add_input_warnings(const RankInput& in, const RankOptions& opts, RankResult& r);

}  // namespace gguf_reap
