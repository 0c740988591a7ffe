// rank, step 1 (pure): the request resolved into a plan before any file is opened, as splice plans
// before it copies. resolve_rank says which files the read step opens and how each reader reads them
// (RankSources), how the decision is made (RankMethod), and refuses every request that no file's
// content could make right: the inputs the criterion reads, the domain names, exactly one rule for K,
// --fit and --export hipfire without --model. What needs the files (their formats, shapes, blocks and
// expert counts) is checked by the step that reads them.
//
// Each later step gets its part of the plan: read_rank_input (rank_steps.h) the sources, and each reader
// only its own slice of them (ImatrixSources, ScoreSources, the model's path); rank_experts the method.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf_reap/budget.h"
#include "gguf_reap/plan_interchange.h"
#include "gguf_reap/rank.h"

namespace gguf_reap {

// --imatrix: one domain per file, read by the imatrix reader (rank_imatrices.cpp).
struct ImatrixSources {
    std::vector<DomainSpec> files;
    std::string neuron_plan;  // --neuron-plan plan.npz; "" = none
    std::string calibration;  // --calibration; "" = the calibrate.json beside each imatrix
    // What the criterion and the consensus need of each file, refused once its format is known: a legacy
    // .dat holds no totals and no counts to pool (check_criterion_inputs).
    Criterion criterion = Criterion::kEnergy;
    Consensus consensus = Consensus::kMinRank;
    bool column_norms = false;  // weighted-energy: each channel weighted by the model's ffn_down_exps column
    bool strict = false;        // input sanity problems refuse (exit 2) instead of warning
};

// --scores (criterion external): one domain per JSON file (score_file.h).
struct ScoreSources {
    std::vector<DomainSpec> files;
    std::string field;      // "" = "reap" where present, else "score"
    bool sum_means = true;  // --score-aggregate sum: a per-token-mean field × activation_counts
};

// What the read step opens. Exactly one of `imatrices` and `scores`.
struct RankSources {
    std::string model;          // --model: any shard; "" = none
    bool budget_model = false;  // --fit: the model's headers, once more, for the budget search
    std::optional<ImatrixSources> imatrices;
    std::optional<ScoreSources> scores;
    std::string from_plan;  // --from-plan: another tool's plan; "" = none
    bool hash = true;       // sha256 of every input
    int threads = 0;        // 0 = one per core
};

// How the decision is made (rank_experts): the criterion, the consensus, the rule for K and the
// experts always kept.
struct RankMethod {
    Criterion criterion = Criterion::kEnergy;
    Consensus consensus = Consensus::kMinRank;
    // The rule for K: the request's keep, prune, ratio or fit (exactly one), or kPlan with --from-plan
    // (none of them). The counts that depend on the experts per block are checked by rank_experts.
    RankRule::Kind rule = RankRule::Kind::kKeep;
    int64_t count = 0;  // kKeep: kept per block; kPrune: pruned per block
    double ratio = 0;   // kRatio: the fraction pruned, 0 < R < 1
    std::optional<Budget> fit;
    std::vector<ExpertRef> protect;
    std::optional<double> super_share;  // default 10 / E clamped to [0.25, 0.5]
    double super_channel_ratio = 100.0;
    int threads = 0;
};

struct RankPlan {
    RankSources sources;
    RankMethod method;
    std::optional<PlanFormat> export_format;  // --export: also the keeplist in that tool's format
};

// Pure, both: RequestError (a UsageError) for a request that no input could satisfy. resolve_rank is
// resolve_rank_sources, then resolve_rank_method (rank_keep.h: the rule for K is resolved beside the
// decision that applies it), then the export's check.
RankSources resolve_rank_sources(const RankOptions& opts);
RankPlan resolve_rank(const RankOptions& opts);

}  // namespace gguf_reap
