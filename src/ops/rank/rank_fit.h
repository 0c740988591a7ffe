// rank --fit (docs/rank.md): K is chosen from a budget once the dead and protected experts are known,
// so that it obeys every rule rank has.
#pragma once

#include <cstddef>
#include <vector>

#include "gguf_reap/rank.h"
#include "services/budget_search.h"

namespace gguf_reap {

// Sets r.n_keep, r.rule and r.fit: the largest K that fits `budget` and keeps every protected
// expert (r.protect) and no dead one (r.dead), sized by in.opened->budget (the read step opens it). Throws
// UsageError when no legal K fits.
void choose_fit_keep(const RankInput& in, RankDecision& r, const Budget& budget);

}  // namespace gguf_reap
