// What each domain keeps (ops/rank_domains.h).
#include "ops/rank_domains.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "io/parallel.h"
#include "ops/max_min.h"

namespace gguf_reap {

namespace {

// Each domain's share of the criterion's mass per expert in block b: max(0, score) / Σ max(0, score),
// one row per domain that has mass there, and which domain each row is.
std::pair<std::vector<std::vector<double>>, std::vector<size_t>> mass_shares(const RankInput& in,
                                                                             const RankResult& r, size_t b) {
    const size_t D = in.domains.size(), NE = static_cast<size_t>(r.expert_count);
    std::vector<std::vector<double>> share;
    std::vector<size_t> of;
    for (size_t d = 0; d < D; ++d) {
        if (!in.domains[d].blocks[b].present) continue;
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

void choose_max_min(const RankInput& in, RankResult& r, int64_t group_size, int64_t quota, int threads) {
    const size_t B = r.blocks.size(), NE = static_cast<size_t>(r.expert_count);
    parallel_for(B, threads, [&](size_t b) {
        MaxMinBlock mb;
        mb.share = mass_shares(in, r, b).first;
        mb.quota = quota;
        for (size_t e = 0; e < NE; ++e) {
            mb.group.push_back(static_cast<int64_t>(e) / group_size);
            mb.protect.push_back(r.protect[r.idx(b, e)]);
            mb.dead.push_back(r.dead[r.idx(b, e)]);
            mb.start.push_back(r.keep[r.idx(b, e)]);
        }
        if (mb.share.empty()) return;  // no domain has mass here: the min-rank set stands
        const std::vector<uint8_t> keep = max_min_select(mb);
        for (size_t e = 0; e < NE; ++e) r.keep[r.idx(b, e)] = keep[e];
    });
}

void fill_retained_shares(const RankInput& in, RankResult& r) {
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

void add_input_warnings(const RankInput& in, const RankOptions& opts, RankResult& r) {
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
    const bool mean_type =
        opts.criterion == Criterion::kReapMean ||
        (opts.criterion == Criterion::kExternal && in.score_is_mean && !in.score_times_counts);
    if (mean_type && 4 * (E - r.n_keep) > E)
        r.warnings.push_back(fmt::format(
            "{} is a per-token mean and prunes {} of {} experts in every block ({:.0f} %): above 25 % a mean "
            "keeps rarely routed experts and drops busy ones (on the trained fixture, keeping 8 of 16: mean "
            "KLD 1.13–1.23 for reap-mean and 1.19 for the REAP paper's mean, 0.67–0.70 for energy, 0.58 "
            "for the REAP sum); rank by a sum: {}",
            opts.criterion == Criterion::kReapMean ? std::string("criterion reap-mean")
                                                   : fmt::format("score field '{}'", in.score_field),
            E - r.n_keep, E, 100.0 * static_cast<double>(E - r.n_keep) / static_cast<double>(E),
            opts.criterion == Criterion::kReapMean ? "--criterion energy"
                                                   : "--score-aggregate sum (the default)"));
    for (const SanityProblem& p : in.sanity)
        r.warnings.push_back(p.file.empty() ? p.message : fmt::format("{}: {}", p.file, p.message));
    if (!in.source)
        r.warnings.emplace_back(
            "no --model: expert_used_count and expert groups are unknown here, so N >= "
            "expert_used_count and equal counts per group were not checked (splice checks them)");
}

}  // namespace gguf_reap
