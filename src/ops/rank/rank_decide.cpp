// rank, step 3 (pure): scores → per-domain ranks → consensus → dead and super experts → keep decision
// (rank_keep.h) → what it costs each domain. docs/method.md states every formula and tie rule used here.
#include "gguf_reap/rank.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/parallel.h"
#include "ops/rank/criteria.h"
#include "ops/rank/rank_domains.h"
#include "ops/rank/rank_fit.h"
#include "ops/rank/rank_keep.h"
#include "ops/rank/rank_lodo.h"
#include "ops/rank/rank_steps.h"

namespace gguf_reap {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Ranks 1..E by score descending; equal scores rank the lower expert id better. NaN ranks last.
// A stable radix sort of the scores mapped to unsigned keys whose order is the scores' descending
// order: the same ranks as sorting (score, id) pairs, without a comparison per step (the pairs' sort
// was half of rank's decision time on 465 blocks × 896 experts).
std::vector<int32_t> rank_desc(const std::vector<double>& score) {
    const size_t n = score.size();
    std::vector<uint64_t> key(n), key2(n);
    std::vector<uint32_t> id(n), id2(n);
    for (size_t e = 0; e < n; ++e) {
        // NaN ranks as -inf; +0.0 makes -0.0 equal to 0.0, as the comparison of doubles has them.
        const double x = std::isnan(score[e]) ? -std::numeric_limits<double>::infinity() : score[e] + 0.0;
        const uint64_t bits = std::bit_cast<uint64_t>(x);
        const uint64_t ascending = (bits >> 63) ? ~bits : bits | (uint64_t{1} << 63);
        key[e] = ~ascending;
        id[e] = static_cast<uint32_t>(e);
    }
    for (int shift = 0; shift < 64; shift += 8) {
        size_t count[257] = {};
        for (size_t i = 0; i < n; ++i) ++count[((key[i] >> shift) & 0xFF) + 1];
        if (count[((key[0] >> shift) & 0xFF) + 1] == n) continue;  // one value in this byte: no change
        for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
        for (size_t i = 0; i < n; ++i) {
            const size_t at = count[(key[i] >> shift) & 0xFF]++;
            key2[at] = key[i];
            id2[at] = id[i];
        }
        key.swap(key2);
        id.swap(id2);
    }
    std::vector<int32_t> r(n);
    for (size_t i = 0; i < n; ++i) r[id[i]] = static_cast<int32_t>(i + 1);
    return r;
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
    const size_t n = a.size();
    if (n < 2 || b.size() != n) return kNaN;
    auto avg_ranks = [n](const std::vector<double>& v) {
        std::vector<size_t> o(n);
        std::iota(o.begin(), o.end(), 0);
        std::sort(o.begin(), o.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
        std::vector<double> r(n);
        for (size_t i = 0; i < n;) {
            size_t j = i;
            while (j + 1 < n && v[o[j + 1]] == v[o[i]]) ++j;
            for (size_t k = i; k <= j; ++k) r[o[k]] = (static_cast<double>(i + j) / 2) + 1;
            i = j + 1;
        }
        return r;
    };
    const auto ra = avg_ranks(a), rb = avg_ranks(b);
    const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / static_cast<double>(n);
    const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / static_cast<double>(n);
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; ++i) {
        sab += (ra[i] - ma) * (rb[i] - mb);
        saa += (ra[i] - ma) * (ra[i] - ma);
        sbb += (rb[i] - mb) * (rb[i] - mb);
    }
    if (saa == 0 || sbb == 0) return kNaN;
    return sab / std::sqrt(saa * sbb);
}

namespace {

// The decision's frame: what it is for (criterion, consensus, blocks, domains), how many it keeps, and
// the super-expert thresholds.
RankDecision start_decision(const RankInput& in, const RankMethod& m) {
    RankDecision r;
    r.criterion = m.criterion;
    r.consensus = m.consensus;
    r.expert_count = in.expert_count;
    r.blocks = in.blocks;
    for (const auto& d : in.domains) r.domain_names.push_back(d.name);
    r.n_keep = resolve_n_keep(in, m, r.rule);
    // Ten times an even share, but at least a quarter and at most half of the block: with hundreds of
    // experts, ordinary routing skew in one domain already gives single experts 10-40× an even share.
    r.super_share =
        m.super_share.value_or(std::clamp(10.0 / static_cast<double>(in.expert_count), 0.25, 0.5));
    r.super_channel_ratio = m.super_channel_ratio;
    return r;
}

// 1. Every domain's scores and ranks in every block (and, with a neuron plan, the Spearman of the
//    restricted scores against the full ones). Blocks and domains are independent from here to the
//    decision: each (domain, block) pair, and then each block, writes only its own slots, so they are
//    shared among the threads.
void score_and_rank(const RankInput& in, int threads, RankDecision& r) {
    const size_t B = in.blocks.size(), D = in.domains.size(), NE = static_cast<size_t>(in.expert_count);
    r.scores.assign(D * B * NE, kNaN);
    r.ranks.assign(D * B * NE, 0);
    r.counts.assign(D * B * NE, -1);
    r.spearman.assign(D * B, kNaN);
    const CriterionSpec& criterion = criterion_spec(r.criterion);
    parallel_for(D * B, threads, [&](size_t i) {
        const size_t d = i / B, b = i % B;
        const BlockStats& s = in.domains[d].blocks[b];
        if (!s.present) return;
        std::vector<double> sc(NE), full(NE);
        for (size_t e = 0; e < NE; ++e) {
            sc[e] = criterion.score(s, e, false);
            full[e] = criterion.score(s, e, true);
            r.scores[r.idx(d, b, e)] = sc[e];
            if (!std::isnan(s.count[e])) r.counts[r.idx(d, b, e)] = std::llround(s.count[e]);
        }
        const auto rk = rank_desc(sc);
        for (size_t e = 0; e < NE; ++e) r.ranks[r.idx(d, b, e)] = rk[e];
        if (!in.plan_path.empty()) r.spearman[d * B + b] = spearman(sc, full);
    });
}

// 2. Dead experts: dead in every domain that holds the block (and at least one domain can tell).
void find_dead_experts(const RankInput& in, RankDecision& r) {
    const size_t B = in.blocks.size(), D = in.domains.size(), NE = static_cast<size_t>(in.expert_count);
    r.dead.assign(B * NE, 0);
    for (size_t b = 0; b < B; ++b)
        for (size_t e = 0; e < NE; ++e) {
            if (!dead_everywhere(in, b, e)) continue;
            r.dead[r.idx(b, e)] = 1;
            std::set<std::string> evidence;
            for (size_t d = 0; d < D; ++d) {
                if (!in.domains[d].blocks[b].present) continue;
                const std::string& f = in.domains[d].format;
                evidence.insert(f == "gguf"  ? "count 0 and zero energy"
                                : f == "dat" ? "legacy .dat marks it never routed"
                                             : "activation count 0");
            }
            std::string ev;
            for (const auto& x : evidence) ev += (ev.empty() ? "" : "; ") + x;
            r.dead_experts.push_back({in.blocks[b], static_cast<int64_t>(e),
                                      fmt::format("never routed in any of the {} domain(s) ({})", D, ev)});
        }
}

using SuperExperts = std::map<std::pair<size_t, size_t>, SuperExpert>;  // (block index, expert) → why

// 3a. Super-experts: share of the block's energy, and the hottest channel against the block's median.
//     Blocks are independent: each is searched by one thread (domains in order), then the finds are
//     merged in block order.
SuperExperts find_super_experts(const RankInput& in, const RankDecision& r, int threads) {
    const size_t B = in.blocks.size(), D = in.domains.size();
    std::vector<std::map<size_t, SuperExpert>> found(B);
    parallel_for(B, threads, [&](size_t b) {
        for (size_t d = 0; d < D; ++d) {
            const DomainData& dom = in.domains[d];
            for (const SuperHit& h : super_expert_hits(dom, b, r.super_share, r.super_channel_ratio)) {
                SuperExpert& se = found[b][h.expert];
                se.block = in.blocks[b];
                se.expert = static_cast<int64_t>(h.expert);
                se.by_share |= h.by_share;
                se.by_channel |= h.by_channel;
                if (h.share > se.share) {
                    se.share = h.share;
                    se.share_domain = dom.name;
                    se.share_is_mean = dom.format != "gguf";
                }
                se.channel_ratio = std::max(se.channel_ratio, h.ratio);
            }
        }
    });
    SuperExperts supers;
    for (size_t b = 0; b < B; ++b)
        for (auto& [e, se] : found[b]) supers.emplace(std::pair{b, e}, std::move(se));
    return supers;
}

// 3b. The share and the reason of every super-expert, also one found by the channel test only: its
//     largest share of the block's (per-token mean) energy in any domain.
void explain_super_experts(const RankInput& in, const RankDecision& r, SuperExperts& supers) {
    for (auto& [key, se] : supers) {
        for (const DomainData& dom : in.domains) {
            const BlockStats& s = dom.blocks[key.first];
            if (dom.format == "json" || !s.present) continue;
            const std::vector<double>& en = dom.format == "gguf"
                                                ? (s.energy_full.empty() ? s.energy : s.energy_full)
                                                : (s.mean_full.empty() ? s.mean : s.mean_full);
            const double total = std::accumulate(en.begin(), en.end(), 0.0);
            if (total > 0 && en[key.second] / total > se.share) {
                se.share = en[key.second] / total;
                se.share_domain = dom.name;
                se.share_is_mean = dom.format != "gguf";
            }
        }
        std::vector<std::string> why;
        const char* what = se.share_is_mean ? "per-token mean energy" : "energy";
        if (se.by_share)
            why.push_back(fmt::format("carries {:.1f} % of the block's {} in {} (threshold {:.1f} %)",
                                      100 * se.share, what, se.share_domain, 100 * r.super_share));
        else
            why.push_back(fmt::format("carries {:.1f} % of the block's {} in {}", 100 * se.share, what,
                                      se.share_domain));
        if (se.by_channel)
            why.push_back(fmt::format("its hottest channel is {:.0f}× the block's median (threshold {:.0f}×)",
                                      se.channel_ratio, r.super_channel_ratio));
        se.reason = "super-expert: " + why[0] + (why.size() > 1 ? "; " + why[1] : "");
    }
}

// 3c. --protect: checked against the blocks and the dead experts, added to the super-experts.
void add_protected_option(const RankInput& in, const std::vector<ExpertRef>& protect, const RankDecision& r,
                          SuperExperts& supers) {
    const int64_t E = in.expert_count;
    for (const auto& p : protect) {
        auto it = std::lower_bound(in.blocks.begin(), in.blocks.end(), p.block);
        if (it == in.blocks.end() || *it != p.block)
            throw RequestError(
                {RankOptions::kProtect,
                 fmt::format(" {}:{}: block {} is not an MoE block (MoE blocks: {}..{})", p.block, p.expert,
                             p.block, in.blocks.front(), in.blocks.back())});
        if (p.expert >= E)
            throw RequestError(
                {RankOptions::kProtect, fmt::format(" {}:{}: expert {} is out of range (experts 0..{})",
                                                    p.block, p.expert, p.expert, E - 1)});
        const size_t b = static_cast<size_t>(it - in.blocks.begin());
        if (r.dead[r.idx(b, static_cast<size_t>(p.expert))])
            throw RequestError(
                {RankOptions::kProtect,
                 fmt::format(" {}:{}: this expert was never routed in any domain; dead experts are "
                             "always pruned (remove it from ",
                             p.block, p.expert),
                 RankOptions::kProtect, ", or add a domain in which it is routed)"});
        SuperExpert& se = supers[{b, static_cast<size_t>(p.expert)}];
        se.block = p.block;
        se.expert = p.expert;
        se.by_option = true;
        const std::string asked = keeplist_field(RankOptions::kProtect);
        se.reason = se.reason.empty() ? asked : se.reason + "; " + asked;
    }
}

// 3. The experts always kept: super-experts and --protect.
void find_protected_experts(const RankInput& in, const std::vector<ExpertRef>& protect, int threads,
                            RankDecision& r) {
    r.protect.assign(in.blocks.size() * static_cast<size_t>(in.expert_count), 0);
    SuperExperts supers = find_super_experts(in, r, threads);
    explain_super_experts(in, r, supers);
    add_protected_option(in, protect, r, supers);
    for (auto& [key, se] : supers) {
        r.protect[r.idx(key.first, key.second)] = 1;
        r.protected_experts.push_back(se);
    }
}

// 4. The consensus order of every block.
void order_by_consensus(const RankInput& in, int threads, RankDecision& r) {
    const size_t B = in.blocks.size(), NE = static_cast<size_t>(in.expert_count);
    r.consensus_rank.assign(B * NE, 0);
    r.consensus_score.assign(B * NE, kNaN);
    parallel_for(B, threads, [&](size_t b) {
        const BlockConsensus order_of(in, r, r.criterion, r.consensus, b);
        std::vector<size_t> order(NE);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](size_t a, size_t c) { return order_of.before(a, c); });
        for (size_t i = 0; i < NE; ++i) {
            r.consensus_rank[r.idx(b, order[i])] = static_cast<int32_t>(i + 1);
            r.consensus_score[r.idx(b, order[i])] = order_of.key(order[i]);
        }
    });
}

// 6a. The safety margin: per block, the best rank any domain gives a pruned expert; its minimum and
//     median over the blocks.
void measure_safety_margin(const RankInput& in, RankDecision& r) {
    const size_t B = in.blocks.size(), D = in.domains.size(), NE = static_cast<size_t>(in.expert_count);
    r.best_pruned_rank.assign(B, 0);
    std::vector<double> per_block;
    for (size_t b = 0; b < B; ++b) {
        int32_t best = 0;
        for (size_t e = 0; e < NE; ++e) {
            if (r.keep[r.idx(b, e)]) continue;
            for (size_t d = 0; d < D; ++d) {
                const int32_t rk = r.ranks[r.idx(d, b, e)];
                if (rk > 0 && (best == 0 || rk < best)) best = rk;
            }
        }
        r.best_pruned_rank[b] = best;
        if (best > 0) per_block.push_back(best);
    }
    if (!per_block.empty()) {
        r.safety_rank = static_cast<int32_t>(*std::min_element(per_block.begin(), per_block.end()));
        r.safety_median = median(per_block);
        for (size_t b = 0; b < B && r.safety_block < 0; ++b)
            for (size_t e = 0; e < NE && r.safety_block < 0; ++e)
                for (size_t d = 0; d < D && !r.keep[r.idx(b, e)]; ++d)
                    if (r.ranks[r.idx(d, b, e)] == r.safety_rank) {
                        r.safety_block = r.blocks[b];
                        r.safety_expert = static_cast<int64_t>(e);
                        r.safety_domain = in.domains[d].name;
                        break;
                    }
    }
}

// 6b. Each domain's routed tokens and energy carried by the pruned experts (NaN where unknown).
void measure_pruned_shares(const RankInput& in, RankDecision& r) {
    const size_t B = in.blocks.size(), D = in.domains.size(), NE = static_cast<size_t>(in.expert_count);
    r.pruned_token_share.assign(D, kNaN);
    r.pruned_energy_share.assign(D, kNaN);
    for (size_t d = 0; d < D; ++d) {
        const DomainData& dom = in.domains[d];
        double ct = 0, cp = 0, et = 0, ep = 0;
        bool have_counts = true, have_energy = dom.format == "gguf";
        for (size_t b = 0; b < B; ++b) {
            const BlockStats& s = dom.blocks[b];
            if (!s.present) continue;
            for (size_t e = 0; e < NE; ++e) {
                const bool pruned = !r.keep[r.idx(b, e)];
                if (std::isnan(s.count[e]))
                    have_counts = false;
                else {
                    ct += s.count[e];
                    if (pruned) cp += s.count[e];
                }
                if (have_energy) {
                    const double x = s.energy_full.empty() ? s.energy[e] : s.energy_full[e];
                    et += x;
                    if (pruned) ep += x;
                }
            }
        }
        if (have_counts && ct > 0) r.pruned_token_share[d] = cp / ct;
        if (have_energy && et > 0) r.pruned_energy_share[d] = ep / et;
    }
}

// 8. The keeplist: the model (or the imatrix's expert count), and per block kept, pruned, dead and
//    protected experts with their reasons.
void build_keeplist(const RankInput& in, RankDecision& r) {
    KeepList& kl = r.keeplist;
    if (in.source) {
        kl.source = *in.source;
    } else {
        KeepListSource src;
        src.expert_count = static_cast<uint64_t>(in.expert_count);
        src.from_imatrix_only = true;
        kl.source = src;
    }
    kl.n_keep = static_cast<uint64_t>(r.n_keep);
    for (size_t b = 0; b < in.blocks.size(); ++b) {
        KeepBlock kb;
        kb.block = in.blocks[b];
        for (size_t e = 0; e < static_cast<size_t>(in.expert_count); ++e)
            (r.keep[r.idx(b, e)] ? kb.keep : kb.prune).push_back(static_cast<int64_t>(e));
        for (const auto& de : r.dead_experts)
            if (de.block == kb.block) {
                kb.dead.push_back(de.expert);
                kb.dead_reasons.push_back({de.expert, de.reason});
            }
        for (const auto& se : r.protected_experts)
            if (se.block == kb.block) kb.protected_experts.push_back({se.expert, se.reason});
        kl.blocks.push_back(std::move(kb));
    }
    kl.method = rank_method_json(in, r);
}

}  // namespace

RankDecision rank_experts(const RankInput& in, const RankMethod& m) {
    check_criterion_inputs(in.domains, m.criterion, m.consensus);
    RankDecision r = start_decision(in, m);
    const int threads = resolve_threads(m.threads);
    score_and_rank(in, threads, r);                     // 1. scores and per-domain ranks
    find_dead_experts(in, r);                           // 2. dead experts
    find_protected_experts(in, m.protect, threads, r);  // 3. super-experts and --protect
    order_by_consensus(in, threads, r);                 // 4. consensus order
    if (m.fit) choose_fit_keep(in, r, *m.fit);          //    --fit: the largest K (rank_fit.h)
    decide_keep(in, threads, r);                        // 5. the keep mask, retained shares
    measure_safety_margin(in, r);                       // 6. safety margin
    measure_pruned_shares(in, r);                       //    what the pruned experts carried
    add_input_warnings(in, r);                          // 7. warnings (rank_domains.h)
    fill_blind_spot(in, threads, r);                    //    what a left-out domain loses (rank_lodo.h)
    build_keeplist(in, r);                              // 8. the keeplist
    return r;
}

}  // namespace gguf_reap
