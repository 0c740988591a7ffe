// The table of scoring criteria (criteria.h): one row per criterion, and each one's score.
#include "ops/rank/criteria.h"

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "services/llama_cpp/llama_tools.h"

namespace gguf_reap {

namespace {

// The scores (docs/method.md, "Criteria"). `full`: the unrestricted value when a neuron plan
// restricted the energies.
double frequency_score(const BlockStats& s, size_t e, bool) {
    return s.count[e];
}
double energy_score(const BlockStats& s, size_t e, bool full) {
    return full && !s.energy_full.empty() ? s.energy_full[e] : s.energy[e];
}
double reap_mean_score(const BlockStats& s, size_t e, bool full) {
    return full && !s.mean_full.empty() ? s.mean_full[e] : s.mean[e];
}
// A width-pruned model has no weights for the dropped channels: the unrestricted comparison is plain
// energy.
double weighted_energy_score(const BlockStats& s, size_t e, bool full) {
    return full && !s.energy_full.empty() ? s.energy_full[e] : s.weighted[e];
}
double external_score(const BlockStats& s, size_t e, bool) {
    return s.external[e];
}

double pooled_frequency(const PooledSums& p, size_t e) {
    return p.count[e];
}
double pooled_energy(const PooledSums& p, size_t e) {
    return p.energy[e];
}
double pooled_reap_mean(const PooledSums& p, size_t e) {
    return p.count[e] > 0 ? p.energy[e] / p.count[e] : 0;
}
double pooled_weighted_energy(const PooledSums& p, size_t e) {
    return p.weighted[e];
}

constexpr CriterionNeeds kImatrixCounts{.totals = true, .counts = true};
constexpr CriterionNeeds kImatrixTotals{.totals = true};
constexpr CriterionNeeds kImatrixMeans{};
constexpr CriterionNeeds kImatrixAndWeights{.totals = true, .down_weights = true};
constexpr CriterionNeeds kScoreFiles{.score_files = true};

constexpr CriterionSpec kCriteria[] = {
    {Criterion::kFrequency, "frequency", "routed-token count N_e (ffn_down_exps counts)", kImatrixCounts,
     nullptr, false, frequency_score, pooled_frequency},
    {Criterion::kEnergy, "energy",
     "Σ_c in_sum2[e][c] of ffn_down_exps: the expert's total intermediate-activation energy over the "
     "tokens routed to it (= N_e × mean energy)",
     kImatrixTotals, nullptr, false, energy_score, pooled_energy},
    {Criterion::kReapMean, "reap-mean",
     "Σ_c in_sum2[e][c] / N_e: mean energy per routed token (REAP's conditional mean without gate values; "
     "measured on the fixture models it did no better than random keeplists — see docs/method.md)",
     kImatrixMeans, nullptr, true, reap_mean_score, pooled_reap_mean},
    {Criterion::kWeightedEnergy, "weighted-energy",
     "Σ_c ||W_down[:,c]||² · in_sum2[e][c]: an estimate of the expert's total output energy",
     kImatrixAndWeights, "it weights each channel by the squared norm of the matching ffn_down_exps column",
     false, weighted_energy_score, pooled_weighted_energy},
    {Criterion::kExternal, "external", "per-expert scores measured elsewhere (a profiler run), as given",
     kScoreFiles, nullptr, false, external_score, nullptr},
};

}  // namespace

std::span<const CriterionSpec> criteria() {
    return kCriteria;
}

const CriterionSpec& criterion_spec(Criterion c) {
    for (const CriterionSpec& s : kCriteria)
        if (s.id == c) return s;
    throw std::logic_error(fmt::format("criterion {} has no row in kCriteria", static_cast<int>(c)));
}

const char* criterion_name(Criterion c) {
    return criterion_spec(c).name;
}

const char* criterion_formula(Criterion c) {
    return criterion_spec(c).formula;
}

std::optional<Criterion> parse_criterion(std::string_view s) {
    for (const CriterionSpec& c : kCriteria)
        if (s == c.name) return c.id;
    return std::nullopt;
}

void check_consensus_applies(Criterion criterion, Consensus consensus) {
    if (!criterion_spec(criterion).pooled && consensus == Consensus::kPooled)
        throw RequestError({RankOptions::kConsensus,
                            " pooled needs raw counts and sums; external scores are already per-block "
                            "results: use min-rank, mean-rank or sum"});
}

void check_criterion_inputs(const std::vector<DomainData>& domains, Criterion criterion,
                            Consensus consensus) {
    const CriterionSpec& c = criterion_spec(criterion);
    for (const auto& d : domains) {
        if (d.format != "dat") continue;
        if (c.needs.totals)
            throw RequestError(
                {fmt::format("{}: a legacy .dat imatrix holds only each expert's mean energy (scaled by one "
                             "ncall shared by all experts) and no per-expert routing counts, so ",
                             d.path),
                 RankOptions::kCriterion,
                 fmt::format(" {} cannot be computed from it; use the GGUF imatrix of the same run ({}) or ",
                             c.name, llama_cpp::imatrix_gguf_words()),
                 RankOptions::kCriterion, " reap-mean"});
        if (consensus == Consensus::kPooled)
            throw RequestError(
                {d.path + ": ", RankOptions::kConsensus,
                 fmt::format(" pooled adds raw counts and sums across domains ({}), which a legacy .dat "
                             "does not hold; use min-rank, mean-rank or sum",
                             llama_cpp::imatrix_merge_words())});
    }
    check_consensus_applies(criterion, consensus);
    if (c.needs.counts)
        for (const auto& d : domains)
            if (d.format == "json")
                throw RequestError(
                    {RankOptions::kCriterion, fmt::format(" {} reads imatrix counts; use ", c.name),
                     RankOptions::kCriterion, " external ", RankOptions::kScoreField, " activation_counts"});
}

std::string criterion_choices(std::string_view sep, std::string_view last_sep) {
    std::string s;
    for (size_t i = 0; i < std::size(kCriteria); ++i) {
        if (i > 0) s += i + 1 == std::size(kCriteria) ? last_sep : sep;
        s += kCriteria[i].name;
    }
    return s;
}

}  // namespace gguf_reap
