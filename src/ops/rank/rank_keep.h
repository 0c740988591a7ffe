// rank, how many experts every block keeps and which: the rule for K resolved from the request (the
// resolve step's method, rank_plan.h), the count it gives under the K rules (model/keep_count.h) worded
// for that rule, and the keep mask (the decide step, rank_decide.cpp): protected experts first, dead
// experts never, then the best consensus ranks; or what an imported plan keeps (--from-plan), refused
// only where llama.cpp could not load it.
#pragma once

#include <cstdint>

#include "gguf_reap/rank.h"
#include "ops/rank/rank_plan.h"

namespace gguf_reap {

// Pure: the request's method (resolve_rank, rank_plan.h): the criterion, the consensus, the experts
// always kept, and the rule for K, exactly one of keep, prune, ratio (0 < R < 1) and fit, or none with
// --from-plan. Throws RequestError otherwise.
RankMethod resolve_rank_method(const RankOptions& opts);

// The number of experts kept per block, and the rule that chose it (`rule`). 0 for --fit, whose K is
// chosen once the dead and protected experts are known (rank_fit.h). Throws UsageError for a count the
// experts per block, expert_used_count, the groups or the architecture do not allow.
int64_t resolve_n_keep(const RankInput& in, const RankMethod& m, RankRule& rule);

// r.keep: per block (and per contiguous group), protected experts first, dead experts never, then the
// best consensus ranks until the group's quota (r.n_keep / groups) is full; with max-min, its search
// replaces the mask. Then what every domain retains (rank_domains.h). Throws UsageError when a group
// has more protected or fewer live experts than its quota, or an imported plan a short group.
void decide_keep(const RankInput& in, int threads, RankDecision& r);

}  // namespace gguf_reap
