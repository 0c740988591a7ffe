// rank --fit: the rules rank applies to K, as a KeepRules, and the budget's answer under them.
#include "ops/rank/rank_fit.h"

#include <algorithm>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "ops/rank/rank_domains.h"
#include "ops/rank/rank_steps.h"
#include "services/opened.h"

namespace gguf_reap {

namespace {

int64_t groups_of(const RankInput& in) {
    return in.expert_group_count > 1 ? static_cast<int64_t>(in.expert_group_count) : 1;
}

// mask[block][expert] (flattened, E per block) counted per block and contiguous group.
std::vector<std::vector<int64_t>> per_group(const std::vector<uint8_t>& mask, size_t blocks, int64_t E,
                                            int64_t G) {
    std::vector<std::vector<int64_t>> out(blocks, std::vector<int64_t>(static_cast<size_t>(G), 0));
    const int64_t size = E / G;
    for (size_t b = 0; b < blocks; ++b)
        for (int64_t e = 0; e < E; ++e)
            out[b][static_cast<size_t>(e / size)] +=
                mask[b * static_cast<size_t>(E) + static_cast<size_t>(e)];
    return out;
}

}  // namespace

void choose_fit_keep(const RankInput& in, RankDecision& r, const Budget& budget) {
    if (!in.opened || !in.opened->budget)
        throw RequestError({RankOptions::kFit, fmt::format(" {} needs ", budget.text), RankOptions::kModel});
    const BudgetModel& m = *in.opened->budget;
    KeepRules rules = model_keep_rules(m.layout());
    const int64_t E = r.expert_count, G = groups_of(in);
    const size_t B = r.blocks.size();
    // Protected experts are always kept: K is at least G × the most protected in one group.
    const auto prot = per_group(r.protect, B, E, G);
    for (size_t b = 0; b < B; ++b)
        for (size_t g = 0; g < prot[b].size(); ++g)
            if (G * prot[b][g] > rules.min_keep) {
                rules.min_keep = G * prot[b][g];
                rules.min_why = fmt::format(
                    "blk.{}{} has {} protected experts (super-experts or protected on request), which are "
                    "always kept",
                    r.blocks[b], G > 1 ? fmt::format(" group {}", g) : "", prot[b][g]);
            }
    apply_dead_rule(rules, r.blocks, per_group(r.dead, B, E, G));
    FitAnswer a = fit_budget(m, budget, rules);
    r.n_keep = a.at.k;
    r.rule = {RankRule::Kind::kFit, budget.text};
    r.fit = std::move(a);
}

// ops::dead_expert_counts (include/gguf_reap/rank.h): what estimate --imatrix bounds K with.
std::vector<std::vector<int64_t>> ops::dead_expert_counts(const std::vector<DomainSpec>& imatrices,
                                                          const std::string& model,
                                                          std::vector<int>& blocks) {
    RankOptions o;
    o.imatrices = imatrices;
    o.model = model;
    o.criterion = Criterion::kReapMean;  // readable from every imatrix format; only the counts are used
    o.hash_inputs = false;
    const RankInput in = read_rank_input(resolve_rank_sources(o));
    const int64_t E = in.expert_count, G = groups_of(in);
    std::vector<uint8_t> dead(in.blocks.size() * static_cast<size_t>(E), 0);
    for (size_t b = 0; b < in.blocks.size(); ++b)
        for (size_t e = 0; e < static_cast<size_t>(E); ++e)
            dead[b * static_cast<size_t>(E) + e] = dead_everywhere(in, b, e);
    blocks = in.blocks;
    return per_group(dead, in.blocks.size(), E, G);
}

}  // namespace gguf_reap
