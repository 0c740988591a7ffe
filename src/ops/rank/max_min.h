// The max-min consensus (docs/method.md, "max-min"): in every MoE block, the kept set that maximises
// the worst domain's retained share of the criterion's mass.
//
// share[d][e] is expert e's share of domain d's mass in the block (max(0, score) / Σ max(0, score);
// a domain without mass in the block is left out). For a kept set S, R_d(S) = Σ_{e∈S} share[d][e], and
// the objective is the vector of the R_d sorted ascending, compared lexicographically: first the worst
// domain's share, then the second worst, and so on.
//
// Exact maximisation is a max-min knapsack (NP-hard in general), so max_min_select searches:
//   1. backward elimination: from every expert that may be kept, repeatedly drop the one whose removal
//      leaves the best objective (ties: the one with the least summed share Σ_d share[d][e], then the
//      higher id), only from groups above their quota, until every group holds its quota;
//   2. from that set and from `start` (the min-rank set), best-improvement swaps: exchange a kept and a
//      pruned expert of the same group while the objective strictly improves (ties between swaps: the
//      lower pruned id, then the lower kept id; at most 4·E rounds);
//   3. the better of the two results (ties: the one from step 1).
// Protected experts are always kept and dead ones never. Since the search from `start` only improves,
// the worst domain's share is never below the min-rank set's. Everything is deterministic.
#pragma once

#include <cstdint>
#include <vector>

namespace gguf_reap {

struct MaxMinBlock {
    std::vector<std::vector<double>> share;  // [domain][expert], domains with mass only
    std::vector<int64_t> group;              // [expert]: its expert group (all 0 without groups)
    int64_t quota = 0;                       // experts kept per group
    std::vector<uint8_t> protect, dead;      // [expert]
    std::vector<uint8_t> start;              // [expert]: a valid kept set (the min-rank one)
};

// The kept set, [expert] 0/1.
std::vector<uint8_t> max_min_select(const MaxMinBlock& b);

// R_d(keep) for every domain of `share`.
std::vector<double> retained_shares(const std::vector<std::vector<double>>& share,
                                    const std::vector<uint8_t>& keep);

}  // namespace gguf_reap
