// rank, how many experts every block keeps and which (rank_keep.h).
#include "ops/rank/rank_keep.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/paths.h"
#include "model/keep_count.h"
#include "ops/rank/rank_domains.h"
#include "ops/rank/rank_fit.h"
#include "ops/rank/rank_steps.h"

namespace gguf_reap {

namespace {

std::string join_ids(const std::vector<int64_t>& ids) {
    std::string s;
    for (int64_t i : ids) s += (s.empty() ? "" : ", ") + std::to_string(i);
    return s;
}

Message rule_words(const RankRule& u) {
    switch (u.kind) {
        case RankRule::Kind::kKeep:
            return {RankOptions::kKeep, " " + u.value};
        case RankRule::Kind::kPrune:
            return {RankOptions::kPrune, " " + u.value};
        case RankRule::Kind::kRatio:
            return {RankOptions::kRatio, " " + u.value};
        case RankRule::Kind::kFit:
            return {RankOptions::kFit, " " + u.value};
        case RankRule::Kind::kPlan:
            break;
    }
    return {u.value};
}

}  // namespace

RankMethod resolve_rank_method(const RankOptions& opts) {
    RankMethod m;
    m.criterion = opts.criterion;
    m.consensus = opts.consensus;
    // The rule for K: exactly one of keep, prune, ratio and fit, or none with --from-plan.
    const int given =
        opts.keep.has_value() + opts.prune.has_value() + opts.ratio.has_value() + opts.fit.has_value();
    if (!opts.from_plan.empty() && given != 0)
        throw RequestError({RankOptions::kFromPlan, " decides which experts are kept: give no ",
                            RankOptions::kKeep, ", ", RankOptions::kPrune, ", ", RankOptions::kRatio, " or ",
                            RankOptions::kFit});
    if (opts.from_plan.empty() && given != 1)
        throw RequestError({"give exactly one of ", RankOptions::kKeep, " N, ", RankOptions::kPrune, " N, ",
                            RankOptions::kRatio, " R or ", RankOptions::kFit, " BUDGET"});
    if (!opts.from_plan.empty()) {
        m.rule = RankRule::Kind::kPlan;
    } else if (opts.keep) {
        m.rule = RankRule::Kind::kKeep;
        m.count = *opts.keep;
    } else if (opts.prune) {
        m.rule = RankRule::Kind::kPrune;
        m.count = *opts.prune;
    } else if (opts.ratio) {
        if (!(*opts.ratio > 0 && *opts.ratio < 1))
            throw RequestError({RankOptions::kRatio, fmt::format(" {} must be a fraction of experts to "
                                                                 "prune, 0 < R < 1",
                                                                 *opts.ratio)});
        m.rule = RankRule::Kind::kRatio;
        m.ratio = *opts.ratio;
    } else {
        m.rule = RankRule::Kind::kFit;
        m.fit = opts.fit;
    }
    m.protect = opts.protect;
    m.super_share = opts.super_share;
    m.super_channel_ratio = opts.super_channel_ratio;
    m.threads = opts.threads;
    return m;
}

int64_t resolve_n_keep(const RankInput& in, const RankMethod& m, RankRule& rule) {
    const int64_t E = in.expert_count;
    // resolve_rank_method refused a request with --from-plan and a rule, or with neither; the read step
    // imports the plan exactly when the method names it.
    if (in.imported.has_value() != (m.rule == RankRule::Kind::kPlan))
        throw std::logic_error("rank_experts: the input and the method come from different plans");
    if (m.rule == RankRule::Kind::kFit) return 0;
    const int64_t G = in.expert_group_count > 1 ? static_cast<int64_t>(in.expert_group_count) : 1;
    const KeepCountLimits limits{E, static_cast<int64_t>(in.expert_used_count), G,
                                 in.source ? in.source->architecture : std::string()};
    int64_t n = 0;
    if (in.imported) {
        n = static_cast<int64_t>(in.imported->plan.n_keep);
        rule = {RankRule::Kind::kPlan,
                fmt::format("the {} plan {}", plan_format_name(in.imported->plan.format),
                            base_name(in.imported->path))};
    } else if (m.rule == RankRule::Kind::kKeep) {
        n = m.count;
        rule = {RankRule::Kind::kKeep, std::to_string(n)};
    } else if (m.rule == RankRule::Kind::kPrune) {
        if (m.count < 0 || m.count >= E)
            throw RequestError(
                {RankOptions::kPrune,
                 fmt::format(" {}: a block has {} experts; prune between 0 and {}", m.count, E, E - 1)});
        n = E - m.count;
        rule = {RankRule::Kind::kPrune, std::to_string(m.count)};
    } else {
        n = keep_count_for_ratio(limits, m.ratio);  // 0 < ratio < 1 (resolve_rank_method)
        rule = {RankRule::Kind::kRatio, fmt::format("{}", m.ratio)};
    }
    // The K rules (model/keep_count.h), worded for the rule that chose n.
    const auto no = keep_count_refusal(limits, n);
    if (!no) return n;
    const Message said = rule_words(rule);
    switch (no->breach) {
        case KeepCountBreach::kOutOfRange:
            throw RequestError(
                said +
                Message{fmt::format(" keeps {} experts per block; a block has {} (keep 1..{})", n, E, E)});
        case KeepCountBreach::kBelowUsed:
            throw RequestError(
                said +
                Message{fmt::format(
                    " keeps {} experts per block, fewer than expert_used_count = {}: llama.cpp routes "
                    "every token to {} experts and requires expert_used_count <= expert_count; keep at "
                    "least {}",
                    n, in.expert_used_count, in.expert_used_count, in.expert_used_count)});
        case KeepCountBreach::kCountChange:
            throw RequestError(said +
                               Message{fmt::format(" keeps {} of {} experts per block: {}", n, E, no->why)});
        case KeepCountBreach::kNotGroupMultiple:
            throw RequestError(
                said + Message{fmt::format(
                           " keeps {} experts per block, not a multiple of expert_group_count = {}: routing "
                           "picks experts group by group, so every group must keep the same number",
                           n, G)});
    }
    return n;
}

Message rule_message(const RankDecision& r) {
    if (r.rule.kind == RankRule::Kind::kFit && r.fit) return fit_sentence(*r.fit);
    return rule_words(r.rule);
}

namespace {

// One contiguous group of experts of one block (the whole block without expert groups), split into
// dead, protected and the candidates for the rest of its quota.
struct ExpertGroup {
    size_t b = 0;       // block index
    std::string where;  // "block 3", "block 3 group 1 (experts 8..15)"
    int64_t first = 0;  // experts [first, end)
    int64_t end = 0;
    std::vector<int64_t> dead, prot, candidates;
};

ExpertGroup expert_group(const RankInput& in, const RankDecision& r, size_t b, int64_t g, int64_t G,
                         int64_t group_size) {
    ExpertGroup x;
    x.b = b;
    x.first = g * group_size;
    x.end = (g + 1) * group_size;
    for (int64_t e = x.first; e < x.end; ++e) {
        if (r.dead[r.idx(b, static_cast<size_t>(e))])
            x.dead.push_back(e);
        else if (r.protect[r.idx(b, static_cast<size_t>(e))])
            x.prot.push_back(e);
        else
            x.candidates.push_back(e);
    }
    x.where = G > 1 ? fmt::format("block {} group {} (experts {}..{})", in.blocks[b], g, x.first, x.end - 1)
                    : fmt::format("block {}", in.blocks[b]);
    return x;
}

// --from-plan: the plan decides; what rank would have refused is a warning, and only a plan that
// llama.cpp could not load (a group short of its quota) is refused.
void keep_as_planned(const RankInput& in, const ExpertGroup& x, int64_t quota, RankDecision& r) {
    const int blk = in.blocks[x.b];
    const std::vector<int64_t>& row = in.imported->plan.keep.at(blk);
    int64_t held = 0;
    for (int64_t e : row)
        if (e >= x.first && e < x.end) {
            ++held;
            r.keep[r.idx(x.b, static_cast<size_t>(e))] = 1;
        }
    if (held != quota)
        throw UsageError(
            fmt::format("{}: the plan keeps {} experts in {}, but routing picks "
                        "experts group by group, so every group must keep {}",
                        in.imported->path, held, x.where, quota));
    for (int64_t e : x.dead)
        if (r.keep[r.idx(x.b, static_cast<size_t>(e))])
            r.warnings.push_back(fmt::format("the plan keeps blk.{} expert {}, which is dead here", blk, e));
    for (int64_t e : x.prot)
        if (!r.keep[r.idx(x.b, static_cast<size_t>(e))])
            r.warnings.push_back(fmt::format(
                "the plan prunes blk.{} expert {}, which is protected here (a super-expert or protected on "
                "request)",
                blk, e));
}

// The protected experts, then the best consensus ranks until the quota is full; dead ones never.
void keep_best(const ExpertGroup& x, int64_t quota, bool groups, RankDecision& r) {
    const size_t members = static_cast<size_t>(x.end - x.first);
    if (static_cast<int64_t>(x.prot.size()) > quota)
        throw RequestError(Message{fmt::format("{} has {} protected experts ({}) but ", x.where,
                                               x.prot.size(), join_ids(x.prot))} +
                           rule_message(r) +
                           Message{fmt::format(" keeps only {}{}: keep more, or protect fewer (", quota,
                                               groups ? " per group" : ""),
                                   RankOptions::kSuperShare, ", ", RankOptions::kSuperChannelRatio, ", ",
                                   RankOptions::kProtect, ")"});
    if (static_cast<int64_t>(members - x.dead.size()) < quota)
        throw RequestError(
            Message{fmt::format("{} has {} dead experts ({}), which are always pruned, but ", x.where,
                                x.dead.size(), join_ids(x.dead))} +
            rule_message(r) +
            Message{fmt::format(" keeps {}{}: keep at most {}{}", quota, groups ? " per group" : " per block",
                                members - x.dead.size(),
                                groups ? " per group" : " per block (prune at least the dead ones)")});
    std::vector<int64_t> candidates = x.candidates;
    std::sort(candidates.begin(), candidates.end(), [&](int64_t a, int64_t c) {
        return r.consensus_rank[r.idx(x.b, static_cast<size_t>(a))] <
               r.consensus_rank[r.idx(x.b, static_cast<size_t>(c))];
    });
    for (int64_t e : x.prot) r.keep[r.idx(x.b, static_cast<size_t>(e))] = 1;
    for (int64_t i = 0; i < quota - static_cast<int64_t>(x.prot.size()); ++i)
        r.keep[r.idx(x.b, static_cast<size_t>(candidates[static_cast<size_t>(i)]))] = 1;
}

}  // namespace

void decide_keep(const RankInput& in, int threads, RankDecision& r) {
    const int64_t E = in.expert_count;
    const int64_t G = in.expert_group_count > 1 ? static_cast<int64_t>(in.expert_group_count) : 1;
    if (E % G)
        throw UsageError(fmt::format("expert_count {} is not a multiple of expert_group_count {}", E, G));
    const int64_t group_size = E / G, quota = r.n_keep / G;
    r.keep.assign(in.blocks.size() * static_cast<size_t>(E), 0);
    for (size_t b = 0; b < in.blocks.size(); ++b)
        for (int64_t g = 0; g < G; ++g) {
            const ExpertGroup x = expert_group(in, r, b, g, G, group_size);
            if (in.imported)
                keep_as_planned(in, x, quota, r);
            else
                keep_best(x, quota, G > 1, r);
        }
    if (r.consensus == Consensus::kMaxMin && !in.imported) choose_max_min(in, r, group_size, quota, threads);
    fill_retained_shares(in, r);
}

}  // namespace gguf_reap
