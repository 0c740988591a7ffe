// The leave-one-domain-out estimate (ops/rank/rank_lodo.h).
#include "ops/rank/rank_lodo.h"
#include "ops/rank/rank_steps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "io/parallel.h"
#include "ops/rank/criteria.h"
#include "ops/rank/rank_domains.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Σ_b kept mass / Σ_b mass of domain d under `keep` ([block][expert]), the mass being d's routed energy
// (unrestricted by a neuron plan, as the receipt's "energy retained"), or with external scores
// max(0, score). NaN without mass, and for a legacy .dat (no energy totals).
double share_kept(const RankInput& in, const RankDecision& r, size_t d, const std::vector<uint8_t>& keep) {
    const DomainData& dom = in.domains[d];
    const bool external = dom.format == "json";
    if (!external && dom.format != "gguf") return kNaN;
    const size_t NE = static_cast<size_t>(r.expert_count);
    double kept = 0, total = 0;
    for (size_t b = 0; b < r.blocks.size(); ++b) {
        const BlockStats& s = dom.blocks[b];
        if (!s.present) continue;
        const std::vector<double>& en = s.energy_full.empty() ? s.energy : s.energy_full;
        for (size_t e = 0; e < NE; ++e) {
            const double m = external ? std::max(0.0, r.scores[r.idx(d, b, e)]) : en[e];
            total += m;
            if (keep[r.idx(b, e)]) kept += m;
        }
    }
    return total > 0 ? kept / total : kNaN;
}

// What one left-out run shares with the real one: the super-expert finds of every domain and the
// --protect experts, each [domain or 1][block][expert].
struct Shared {
    std::vector<uint8_t> hit;        // domain d's super-expert tests fire
    std::vector<uint8_t> by_option;  // --protect
    int64_t group_size = 0, quota = 0;
};

// Marks in keep the first `take` of `candidates` in the consensus order: the take-th best key found
// by a selection over the keys alone (a comparison of the full order per step was most of the cost),
// then the best of the experts whose key equals it, by the full order.
void keep_first(const BlockConsensus& order, const std::vector<size_t>& candidates, size_t take,
                uint8_t* keep) {
    if (take == 0) return;
    const double sign = order.lower_is_better() ? 1 : -1;  // smaller is better below
    std::vector<double> key(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) key[i] = sign * order.key(candidates[i]);
    const auto at = key.begin() + static_cast<std::ptrdiff_t>(take - 1);
    std::nth_element(key.begin(), at, key.end());
    const double threshold = *at;
    std::vector<size_t> tied;
    for (size_t i = 0; i < candidates.size(); ++i) {
        const double x = sign * order.key(candidates[i]);
        if (x < threshold) {
            keep[candidates[i]] = 1;
            --take;
        } else if (x == threshold) {
            tied.push_back(candidates[i]);
        }
    }
    std::sort(tied.begin(), tied.end(), [&](size_t x, size_t y) { return order.before(x, y); });
    for (size_t i = 0; i < take; ++i) keep[tied[i]] = 1;
}

// The decision of block b without domain `skip`, into keep[0..E): as rank_experts makes it for an
// input without that domain. Returns why rank would refuse it ("" when it would not).
std::string select_without(const RankInput& in, const RankDecision& r, const Shared& sh, size_t skip,
                           size_t b, uint8_t* keep) {
    const size_t D = in.domains.size(), B = r.blocks.size(), NE = static_cast<size_t>(r.expert_count);
    std::vector<uint8_t> dead(NE), prot(NE);
    for (size_t e = 0; e < NE; ++e) {
        dead[e] = dead_everywhere(in, b, e, skip);
        prot[e] = sh.by_option[r.idx(b, e)];
        if (prot[e] && dead[e])
            return fmt::format(
                "the protected expert {}:{} is never routed in the other domains, which rank refuses",
                r.blocks[b], e);
        for (size_t d = 0; d < D && !prot[e]; ++d) prot[e] = d != skip && sh.hit[(d * B + b) * NE + e];
    }
    const BlockConsensus order(in, r, r.criterion, r.consensus, b, skip);
    const auto G = static_cast<size_t>(sh.group_size);
    for (size_t g0 = 0; g0 < NE; g0 += G) {
        std::vector<size_t> candidates;
        int64_t n_dead = 0, n_prot = 0;
        for (size_t e = g0; e < g0 + G; ++e) {
            keep[e] = !dead[e] && prot[e];
            n_dead += dead[e];
            n_prot += keep[e];
            if (!dead[e] && !prot[e]) candidates.push_back(e);
        }
        if (n_prot > sh.quota)
            return fmt::format("blk.{} would have {} protected experts, more than {} keeps", r.blocks[b],
                               n_prot, rule_text(r));
        if (static_cast<int64_t>(G) - n_dead < sh.quota)
            return fmt::format("blk.{} would have {} dead experts, more than {} prunes", r.blocks[b], n_dead,
                               rule_text(r));
        keep_first(order, candidates, static_cast<size_t>(sh.quota - n_prot), keep);
    }
    if (r.consensus == Consensus::kMaxMin) {
        const std::vector<uint8_t> mm = max_min_block(
            in, r, b, prot, dead, std::vector<uint8_t>(keep, keep + NE), sh.group_size, sh.quota, skip);
        std::copy(mm.begin(), mm.end(), keep);
    }
    return "";
}

std::string points(double fraction) {
    return fmt::format("{:.2f}", 100 * fraction);
}

std::string percent(double v) {
    return std::isfinite(v) ? fmt::format("{:.2f} %", 100 * v) : "–";
}

}  // namespace

void fill_blind_spot(const RankInput& in, int threads, RankDecision& r) {
    const size_t B = r.blocks.size(), D = in.domains.size(), NE = static_cast<size_t>(r.expert_count);
    r.blind_spot.assign(D, BlindSpot{});
    for (size_t d = 0; d < D; ++d) {
        r.blind_spot[d].seen = share_kept(in, r, d, r.keep);
        if (in.domains[d].format == "dat")
            r.blind_spot[d].unknown = "its legacy .dat imatrix holds no energy totals";
    }
    if (D < 2 || in.imported || B == 0) return;
    Shared sh;
    // Which domains' tests find each super-expert, only where rank found one (the tests of fewer
    // domains find a subset of what all of them find).
    std::vector<uint8_t> found(B, 0);
    for (const SuperExpert& se : r.protected_experts)
        if (se.by_share || se.by_channel)
            found[static_cast<size_t>(std::lower_bound(r.blocks.begin(), r.blocks.end(), se.block) -
                                      r.blocks.begin())] = 1;
    sh.hit.assign(D * B * NE, 0);
    for (size_t i = 0; i < D * B; ++i)
        if (found[i % B])
            for (const SuperHit& h :
                 super_expert_hits(in.domains[i / B], i % B, r.super_share, r.super_channel_ratio))
                sh.hit[i * NE + h.expert] = 1;
    sh.by_option.assign(B * NE, 0);
    for (const SuperExpert& se : r.protected_experts)  // protected on request, checked by rank_experts
        if (se.by_option)
            for (size_t b = 0; b < B; ++b)
                if (r.blocks[b] == se.block) sh.by_option[r.idx(b, static_cast<size_t>(se.expert))] = 1;
    const int64_t G = in.expert_group_count > 1 ? static_cast<int64_t>(in.expert_group_count) : 1;
    sh.group_size = r.expert_count / G;
    sh.quota = r.n_keep / G;

    std::vector<uint8_t> unseen(D * B * NE, 0);
    std::vector<std::string> why(D * B);
    parallel_for(D * B, threads,
                 [&](size_t i) { why[i] = select_without(in, r, sh, i / B, i % B, unseen.data() + i * NE); });
    for (size_t d = 0; d < D; ++d) {
        BlindSpot& bs = r.blind_spot[d];
        const auto first = why.begin() + static_cast<std::ptrdiff_t>(d * B);
        const auto refused = std::find_if(first, first + static_cast<std::ptrdiff_t>(B),
                                          [](const std::string& w) { return !w.empty(); });
        if (refused != first + static_cast<std::ptrdiff_t>(B)) {
            bs.unknown = fmt::format("rank without {} refuses: {}", in.domains[d].name, *refused);
            continue;
        }
        const std::vector<uint8_t> mask(unseen.begin() + static_cast<std::ptrdiff_t>(d * B * NE),
                                        unseen.begin() + static_cast<std::ptrdiff_t>((d + 1) * B * NE));
        if (bs.unknown.empty()) bs.unseen = share_kept(in, r, d, mask);
        for (size_t j = 0; j < B * NE; ++j) bs.disagree += mask[j] != r.keep[j];
    }
}

std::optional<size_t> worst_blind_spot(const RankDecision& r) {
    std::optional<size_t> w;
    for (size_t d = 0; d < r.blind_spot.size(); ++d) {
        const BlindSpot& x = r.blind_spot[d];
        if (std::isnan(x.seen) || std::isnan(x.unseen)) continue;
        if (!w || x.seen - x.unseen > r.blind_spot[*w].seen - r.blind_spot[*w].unseen) w = d;
    }
    return w;
}

std::string blind_spot_sentence(double drop, const std::string& domain, bool score_mass) {
    const char* what = score_mass ? "score mass" : "expert energy";
    if (!(drop > 0))  // every domain keeps as much (or more) when it is left out
        return fmt::format(
            "a kind of text the calibration did not cover loses none of its {} in this estimate: no "
            "calibration domain kept less when it was left out",
            what);
    return fmt::format(
        "a kind of text the calibration did not cover loses up to {:.1f} points of its {} "
        "(worst: {})",
        100 * drop, what, domain);
}

json blind_spot_json(const RankInput& in, const RankDecision& r) {
    json j;
    const bool external = criterion_spec(r.criterion).needs.score_files;
    j["measure"] = external ? "score mass" : "routed energy";
    json doms = json::array();
    for (size_t d = 0; d < r.blind_spot.size(); ++d) {
        const BlindSpot& x = r.blind_spot[d];
        const auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
        json o{{"name", in.domains[d].name},
               {"kept_seen", num(x.seen)},
               {"kept_unseen", num(x.unseen)},
               {"drop", num(x.seen - x.unseen)}};
        o["disagree"] = std::isnan(x.unseen) && x.disagree == 0 ? json(nullptr) : json(x.disagree);
        if (!x.unknown.empty()) o["unknown"] = x.unknown;
        doms.push_back(o);
    }
    j["domains"] = doms;
    const auto w = worst_blind_spot(r);
    if (w) {
        const double drop = r.blind_spot[*w].seen - r.blind_spot[*w].unseen;
        j["worst"] = {{"domain", in.domains[*w].name}, {"drop", drop}};
        j["estimate"] = blind_spot_sentence(drop, in.domains[*w].name, external);
    } else {
        j["worst"] = nullptr;
        j["estimate"] = nullptr;
        j["why"] = in.domains.size() < 2 ? "one calibration domain: there is nothing to leave out"
                   : in.imported         ? "the kept experts come from another tool's plan (imported)"
                                         : "no domain's share could be computed without it";
    }
    return j;
}

std::string blind_spot_receipt(const RankInput& in, const RankDecision& r) {
    std::string s = "## What a kind of text the calibration did not cover would lose (an estimate)\n\n";
    const bool external = criterion_spec(r.criterion).needs.score_files;
    if (in.domains.size() < 2) {
        s += fmt::format(
            "One calibration domain ({}): there is nothing to leave out, so this is not estimated. Rank "
            "with imatrices from several kinds of text to see how much a kind the calibration misses would "
            "lose.\n\n",
            in.domains.empty() ? "" : in.domains[0].name);
        return s;
    }
    if (in.imported) {
        s += "Not estimated: the kept experts come from another tool's plan, which cannot be made again "
             "without a domain.\n\n";
        return s;
    }
    s += fmt::format(
        "Each domain's share of its own {} kept (Σ over the MoE blocks of the kept experts' {} ÷ its total, "
        "from its own {}): by this selection (seen), and by the same selection, with the same criterion, "
        "consensus, rule, dead and super-expert rules and protections, made without that domain (unseen). "
        "The disagreement counts the experts kept by one of the two selections and pruned by the other.\n\n",
        external ? "score mass" : "routed energy", external ? "max(0, score)" : "energy",
        external ? "score file" : "imatrix");
    s += "| domain | kept, seen | kept, unseen | drop, points | experts the selections disagree on |\n";
    s += "| --- | ---: | ---: | ---: | ---: |\n";
    for (size_t d = 0; d < r.blind_spot.size(); ++d) {
        const BlindSpot& x = r.blind_spot[d];
        const bool known = !std::isnan(x.seen) && !std::isnan(x.unseen);
        s += fmt::format("| {} | {} | {} | {} | {} |\n", in.domains[d].name, percent(x.seen),
                         x.unknown.empty() ? percent(x.unseen) : "unknown: " + x.unknown,
                         known ? points(x.seen - x.unseen) : "–",
                         x.unknown.empty() || known ? std::to_string(x.disagree) : "–");
    }
    s += "\n";
    if (const auto w = worst_blind_spot(r))
        s += fmt::format(
            "**Estimate:** {}. This is a proxy from routed energy, not a measurement of quality (not a "
            "KLD), and a kind of text unlike every calibration domain may lose more; `gguf-reap eval` "
            "measures such text on the pruned model (docs/method.md).\n\n",
            blind_spot_sentence(r.blind_spot[*w].seen - r.blind_spot[*w].unseen, in.domains[*w].name,
                                external));
    else
        s += "No domain's share could be computed without it: not estimated.\n\n";
    return s;
}

std::string blind_spot_summary(const RankInput& in, const RankDecision& r) {
    if (in.domains.size() < 2) return "blind spot: one domain, nothing to leave out (not estimated)";
    if (in.imported) return "blind spot: not estimated (the kept experts come from another tool's plan)";
    const auto w = worst_blind_spot(r);
    if (!w) return "blind spot: not estimated (no domain's share could be computed without it)";
    return "blind spot (estimate, leaving each domain out): " +
           blind_spot_sentence(r.blind_spot[*w].seen - r.blind_spot[*w].unseen, in.domains[*w].name,
                               criterion_spec(r.criterion).needs.score_files);
}

}  // namespace gguf_reap
