// The max-min consensus search (ops/max_min.h).
#include "ops/rank/max_min.h"

#include <algorithm>
#include <map>

namespace gguf_reap {

namespace {

using Objective = std::vector<double>;  // R_d sorted ascending

Objective objective(const std::vector<double>& r) {
    Objective o = r;
    std::sort(o.begin(), o.end());
    return o;
}

// Best-improvement swaps within groups, from `keep` (modified in place).
void improve(const MaxMinBlock& b, std::vector<uint8_t>& keep) {
    const size_t E = keep.size(), D = b.share.size();
    std::vector<double> r = retained_shares(b.share, keep);
    Objective best = objective(r);
    std::vector<double> t(D);
    for (size_t round = 0; round < 4 * E; ++round) {
        Objective found = best;
        size_t best_in = E, best_out = E;
        for (size_t out = 0; out < E; ++out) {  // pruned, to be kept
            if (keep[out] || b.dead[out]) continue;
            for (size_t in = 0; in < E; ++in) {  // kept, to be pruned
                if (!keep[in] || b.protect[in] || b.group[in] != b.group[out]) continue;
                double low = 1e300;
                for (size_t d = 0; d < D; ++d) {
                    t[d] = r[d] - b.share[d][in] + b.share[d][out];
                    low = std::min(low, t[d]);
                }
                if (low < found[0]) continue;  // worse at once: skip the sort
                Objective o = objective(t);
                if (o > found) {
                    found = std::move(o);
                    best_in = in;
                    best_out = out;
                }
            }
        }
        if (best_in == E) return;
        keep[best_in] = 0;
        keep[best_out] = 1;
        for (size_t d = 0; d < D; ++d) r[d] += b.share[d][best_out] - b.share[d][best_in];
        best = std::move(found);
    }
}

}  // namespace

std::vector<double> retained_shares(const std::vector<std::vector<double>>& share,
                                    const std::vector<uint8_t>& keep) {
    std::vector<double> r(share.size(), 0.0);
    for (size_t d = 0; d < share.size(); ++d)
        for (size_t e = 0; e < keep.size(); ++e)
            if (keep[e]) r[d] += share[d][e];
    return r;
}

std::vector<uint8_t> max_min_select(const MaxMinBlock& b) {
    const size_t E = b.start.size(), D = b.share.size();
    // 1. Backward elimination.
    std::vector<uint8_t> keep(E, 0);
    std::map<int64_t, int64_t> held;  // group → experts in the set
    for (size_t e = 0; e < E; ++e)
        if (!b.dead[e]) {
            keep[e] = 1;
            ++held[b.group[e]];
        }
    std::vector<double> r = retained_shares(b.share, keep), t(D);
    for (;;) {
        size_t pick = E;
        Objective best;
        double pick_total = 0;
        for (size_t e = 0; e < E; ++e) {
            if (!keep[e] || b.protect[e] || held[b.group[e]] <= b.quota) continue;
            double total = 0, low = 1e300;
            for (size_t d = 0; d < D; ++d) {
                t[d] = r[d] - b.share[d][e];
                total += b.share[d][e];
                low = std::min(low, t[d]);
            }
            if (pick != E && low < best[0]) continue;  // worse at once: skip the sort
            Objective o = objective(t);
            // Later ids win ties of objective and total (>=): the higher id is dropped.
            if (pick == E || o > best || (o == best && total <= pick_total)) {
                pick = e;
                best = std::move(o);
                pick_total = total;
            }
        }
        if (pick == E) break;
        keep[pick] = 0;
        --held[b.group[pick]];
        for (size_t d = 0; d < D; ++d) r[d] -= b.share[d][pick];
    }
    // 2. Swaps from both starts; 3. the better.
    improve(b, keep);
    std::vector<uint8_t> other = b.start;
    improve(b, other);
    return objective(retained_shares(b.share, other)) > objective(retained_shares(b.share, keep)) ? other
                                                                                                  : keep;
}

}  // namespace gguf_reap
