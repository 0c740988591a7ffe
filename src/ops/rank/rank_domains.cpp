// What each domain keeps (ops/rank_domains.h).
#include "ops/rank/rank_domains.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "io/parallel.h"
#include "ops/rank/criteria.h"
#include "ops/rank/max_min.h"

namespace gguf_reap {

namespace {

// Each domain's share of the criterion's mass per expert in block b: max(0, score) / Σ max(0, score),
// one row per domain that has mass there, and which domain each row is.
// `skip`: a domain left out.
std::pair<std::vector<std::vector<double>>, std::vector<size_t>> mass_shares(const RankInput& in,
                                                                             const RankDecision& r, size_t b,
                                                                             size_t skip = kNoDomain) {
    const size_t D = in.domains.size(), NE = static_cast<size_t>(r.expert_count);
    std::vector<std::vector<double>> share;
    std::vector<size_t> of;
    for (size_t d = 0; d < D; ++d) {
        if (d == skip || !in.domains[d].blocks[b].present) continue;
        double total = 0;
        for (size_t e = 0; e < NE; ++e) total += std::max(0.0, r.scores[r.idx(d, b, e)]);
        if (!(total > 0)) continue;
        std::vector<double> s(NE);
        for (size_t e = 0; e < NE; ++e) s[e] = std::max(0.0, r.scores[r.idx(d, b, e)]) / total;
        share.push_back(std::move(s));
        of.push_back(d);
    }
    return {std::move(share), std::move(of)};
}

}  // namespace

std::vector<uint8_t> max_min_block(const RankInput& in, const RankDecision& r, size_t b,
                                   const std::vector<uint8_t>& protect, const std::vector<uint8_t>& dead,
                                   std::vector<uint8_t> start, int64_t group_size, int64_t quota,
                                   size_t skip) {
    MaxMinBlock mb;
    mb.share = mass_shares(in, r, b, skip).first;
    if (mb.share.empty()) return start;  // no domain has mass here: the min-rank set stands
    mb.quota = quota;
    for (size_t e = 0; e < start.size(); ++e) mb.group.push_back(static_cast<int64_t>(e) / group_size);
    mb.protect = protect;
    mb.dead = dead;
    mb.start = std::move(start);
    return max_min_select(mb);
}

void choose_max_min(const RankInput& in, RankDecision& r, int64_t group_size, int64_t quota, int threads) {
    const size_t B = r.blocks.size(), NE = static_cast<size_t>(r.expert_count);
    const auto row = [&](const std::vector<uint8_t>& v, size_t b) {
        const auto at = v.begin() + static_cast<std::ptrdiff_t>(r.idx(b, 0));
        return std::vector<uint8_t>(at, at + static_cast<std::ptrdiff_t>(NE));
    };
    parallel_for(B, threads, [&](size_t b) {
        const std::vector<uint8_t> keep =
            max_min_block(in, r, b, row(r.protect, b), row(r.dead, b), row(r.keep, b), group_size, quota);
        std::copy(keep.begin(), keep.end(), r.keep.begin() + static_cast<std::ptrdiff_t>(r.idx(b, 0)));
    });
}

double median(std::vector<double> v) {
    if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
    const size_t n = v.size();
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(v.begin(), mid, v.end());
    if (n % 2) return *mid;
    return (*std::max_element(v.begin(), mid) + *mid) / 2;  // the two middle values of the sorted order
}

bool dead_everywhere(const RankInput& in, size_t b, size_t e, size_t skip) {
    bool any = false;
    for (size_t d = 0; d < in.domains.size(); ++d) {
        const BlockStats& s = in.domains[d].blocks[b];
        if (d == skip || !s.present) continue;
        if (!s.dead[e]) return false;
        any = true;
    }
    return any;
}

std::vector<SuperHit> super_expert_hits(const DomainData& dom, size_t b, double share_threshold,
                                        double channel_ratio_threshold) {
    std::vector<SuperHit> hits;
    const BlockStats& s = dom.blocks[b];
    if (dom.format == "json" || !s.present) return hits;
    // GGUF: total energy; legacy: only per-token means exist, so their shares are used.
    const std::vector<double>& en = dom.format == "gguf" ? (s.energy_full.empty() ? s.energy : s.energy_full)
                                                         : (s.mean_full.empty() ? s.mean : s.mean_full);
    const size_t NE = en.size();
    double total = 0;
    for (double x : en) total += x;
    std::vector<double> live_peaks;
    for (size_t e = 0; e < NE; ++e)
        if (!s.dead[e] && s.peak[e] > 0) live_peaks.push_back(s.peak[e]);
    const double med =
        live_peaks.size() >= 3 ? median(std::move(live_peaks)) : std::numeric_limits<double>::quiet_NaN();
    for (size_t e = 0; e < NE; ++e) {
        if (s.dead[e]) continue;
        SuperHit h;
        h.expert = e;
        h.share = total > 0 ? en[e] / total : 0;
        h.ratio = med > 0 ? s.peak[e] / med : 0;
        h.by_share = h.share >= share_threshold;
        h.by_channel = h.ratio >= channel_ratio_threshold;
        if (h.by_share || h.by_channel) hits.push_back(h);
    }
    return hits;
}

BlockConsensus::BlockConsensus(const RankInput& in, const RankDecision& r, Criterion criterion,
                               Consensus consensus, size_t b, size_t skip) {
    const size_t D = in.domains.size(), NE = static_cast<size_t>(r.expert_count);
    std::vector<size_t> present;
    for (size_t d = 0; d < D; ++d)
        if (d != skip && in.domains[d].blocks[b].present) present.push_back(d);
    P_ = present.size();
    // Each counted domain's ranks of the block's experts, as rank_experts computed them.
    for (size_t d : present) rows_.push_back(r.ranks.data() + r.idx(d, b, 0));
    key_.assign(NE, 0);
    switch (consensus) {
        case Consensus::kMinRank:
        case Consensus::kMaxMin:  // the order its search starts from (ops/max_min.h)
            for (size_t i = 0; i < P_; ++i)
                for (size_t e = 0; e < NE; ++e)
                    key_[e] = i == 0 ? rows_[0][e] : std::min<double>(key_[e], rows_[i][e]);
            break;
        case Consensus::kMeanRank:  // a sum of integers: exact in any order
            for (size_t i = 0; i < P_; ++i)
                for (size_t e = 0; e < NE; ++e) key_[e] += rows_[i][e];
            for (size_t e = 0; e < NE && P_ > 0; ++e) key_[e] /= static_cast<double>(P_);
            break;
        case Consensus::kSum:
            for (size_t d : present) {
                double total = 0;
                for (size_t e = 0; e < NE; ++e) total += std::max(0.0, r.scores[r.idx(d, b, e)]);
                if (total <= 0) continue;
                for (size_t e = 0; e < NE; ++e) key_[e] += std::max(0.0, r.scores[r.idx(d, b, e)]) / total;
            }
            break;
        case Consensus::kPooled: {
            std::vector<double> cnt(NE, 0), en(NE, 0), w(NE, 0);
            for (size_t d : present) {
                const BlockStats& s = in.domains[d].blocks[b];
                for (size_t e = 0; e < NE; ++e) {
                    cnt[e] += s.count[e];
                    en[e] += s.energy[e];
                    if (!s.weighted.empty()) w[e] += s.weighted[e];
                }
            }
            const PooledSums sums{cnt, en, w};
            const auto pooled = criterion_spec(criterion).pooled;  // check_criterion_inputs: not null
            for (size_t e = 0; e < NE; ++e) key_[e] = pooled(sums, e);
            break;
        }
    }
    lower_is_better_ = consensus == Consensus::kMinRank || consensus == Consensus::kMeanRank ||
                       consensus == Consensus::kMaxMin;
}

bool BlockConsensus::tie_before(size_t e, size_t f) const {
    // The two experts' rank vectors, sorted here: ties are few, so sorting every expert's would cost
    // more (it was most of the consensus time).
    thread_local std::vector<int32_t> a, c;
    a.resize(P_);
    c.resize(P_);
    for (size_t i = 0; i < P_; ++i) {
        a[i] = rows_[i][e];
        c[i] = rows_[i][f];
    }
    std::sort(a.begin(), a.end());
    std::sort(c.begin(), c.end());
    const auto [pa, pc] = std::mismatch(a.begin(), a.end(), c.begin());
    if (pa != a.end()) return *pa < *pc;
    return e < f;
}

void fill_retained_shares(const RankInput& in, RankDecision& r) {
    const size_t B = r.blocks.size(), D = in.domains.size(), NE = static_cast<size_t>(r.expert_count);
    r.retained_share.assign(D * B, std::nan(""));
    r.worst_share = std::nan("");
    for (size_t b = 0; b < B; ++b) {
        const auto [share, of] = mass_shares(in, r, b);
        std::vector<uint8_t> keep(NE);
        for (size_t e = 0; e < NE; ++e) keep[e] = r.keep[r.idx(b, e)];
        const std::vector<double> kept = retained_shares(share, keep);
        for (size_t i = 0; i < of.size(); ++i) {
            r.retained_share[of[i] * B + b] = kept[i];
            if (std::isnan(r.worst_share) || kept[i] < r.worst_share) {
                r.worst_share = kept[i];
                r.worst_domain = of[i];
                r.worst_block = b;
            }
        }
    }
}

namespace {

// The kinds of text the few-domains warning names, each with the domain names that stand for it.
struct TextKind {
    const char* kind;
    std::array<std::string_view, 3> names;
};
constexpr TextKind kTextKinds[] = {
    {"code", {"code", "coding", "programming"}},
    {"dialogue", {"dialogue", "chat", "conversation"}},
    {"reasoning", {"reasoning", "math", "thinking"}},
    {"other languages", {"multilingual", "languages", "translation"}},
};

// "code, dialogue, …": the kinds no domain of `in` is named for (case-insensitively).
std::string missing_text_kinds(const RankInput& in) {
    auto lower = [](std::string s) {
        for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    std::string out;
    for (const TextKind& k : kTextKinds) {
        const bool given = std::any_of(in.domains.begin(), in.domains.end(), [&](const auto& d) {
            const std::string n = lower(d.name);
            return std::find(k.names.begin(), k.names.end(), n) != k.names.end();
        });
        if (!given) out += (out.empty() ? "" : ", ") + std::string(k.kind);
    }
    return out;
}

}  // namespace

void add_input_warnings(const RankInput& in, RankDecision& r) {
    const size_t D = in.domains.size();
    const int64_t E = r.expert_count;
    if (D < 3) {
        std::string names;
        for (const auto& d : in.domains) names += (names.empty() ? "" : ", ") + d.name;
        r.warnings.push_back(
            fmt::format("only {} domain(s) ({}): experts that serve other kinds of text ({}) "
                        "may look unused; rank with imatrices from several kinds of text",
                        D, names, missing_text_kinds(in)));
    }
    for (size_t a = 0; a < D; ++a)
        for (size_t c = a + 1; c < D; ++c) {
            const auto& x = in.domains[a];
            const auto& y = in.domains[c];
            if (!x.sha256.empty() && x.sha256 == y.sha256)
                r.warnings.push_back(fmt::format("domains {} and {} are the same file (sha256 {})", x.name,
                                                 y.name, x.sha256.substr(0, 16)));
            else if (!x.datasets.empty() && x.datasets == y.datasets)
                r.warnings.push_back(
                    fmt::format("domains {} and {} were computed on the same dataset(s)", x.name, y.name));
        }
    // Per-token means at high ratios (docs/method.md, "Per-token means").
    const CriterionSpec& criterion = criterion_spec(r.criterion);
    const bool mean_type = criterion.per_token_mean ||
                           (criterion.needs.score_files && in.score_is_mean && !in.score_times_counts);
    if (mean_type && 4 * (E - r.n_keep) > E)
        r.warnings.push_back(fmt::format(
            "{} is a per-token mean and prunes {} of {} experts in every block ({:.0f} %): above 25 % a mean "
            "keeps rarely routed experts and drops busy ones (on the trained fixture, keeping 8 of 16: mean "
            "KLD 1.13–1.23 for reap-mean and 1.19 for the REAP paper's mean, 0.67–0.70 for energy, 0.58 "
            "for the REAP sum); rank by a sum: {}",
            criterion.per_token_mean ? fmt::format("criterion {}", criterion.name)
                                     : fmt::format("score field '{}'", in.score_field),
            E - r.n_keep, E, 100.0 * static_cast<double>(E - r.n_keep) / static_cast<double>(E),
            criterion.per_token_mean
                ? spelled(RankOptions::kCriterion, in.spell) + " energy"
                : spelled(RankOptions::kScoreAggregate, in.spell) + " sum (the default)"));
    for (const SanityProblem& p : in.sanity)
        r.warnings.push_back(p.file.empty() ? p.message : fmt::format("{}: {}", p.file, p.message));
    if (!in.source)
        r.warnings.push_back(
            "no " + spelled(RankOptions::kModel, in.spell) +
            ": expert_used_count and expert groups are unknown here, so N >= expert_used_count and equal "
            "counts per group were not checked (splice checks them)");
}

}  // namespace gguf_reap
