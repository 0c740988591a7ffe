// rank --fit (docs/rank.md): K is chosen from a budget once the dead and protected experts are known,
// so that it obeys every rule rank has.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gguf_reap/rank.h"
#include "services/budget_search.h"

namespace gguf_reap {

// The model's headers (and --neuron-plan) for opts.fit. Throws UsageError without --model.
std::shared_ptr<const BudgetModel> open_rank_budget_model(const RankOptions& opts);

// Sets r.n_keep, r.rule and r.fit: the largest K that fits `budget` and keeps every protected
// expert (r.protect) and no dead one (r.dead). Throws UsageError when no legal K fits.
void choose_fit_keep(const RankInput& in, RankDecision& r, const Budget& budget);

}  // namespace gguf_reap
