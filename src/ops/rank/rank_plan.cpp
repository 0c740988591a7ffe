// rank, step 1: the request resolved into a plan (rank_plan.h). Nothing here opens a file.
#include "ops/rank/rank_plan.h"

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "ops/rank/criteria.h"
#include "ops/rank/rank_keep.h"
#include "services/imatrix_domains.h"

namespace gguf_reap {

RankSources resolve_rank_sources(const RankOptions& opts) {
    // Which inputs the criterion reads, and that they are given (and nothing it does not read).
    const CriterionSpec& criterion = criterion_spec(opts.criterion);
    const bool external = criterion.needs.score_files;
    if (external && opts.score_files.empty())
        throw RequestError({RankOptions::kCriterion, " external needs score files: ", RankOptions::kScores,
                            " NAME=FILE (JSON, see docs/rank.md)"});
    if (external && !opts.imatrices.empty())
        throw RequestError({RankOptions::kCriterion, " external ranks by ", RankOptions::kScores, " files; ",
                            RankOptions::kImatrix, " cannot be combined with it"});
    if (!external && !opts.score_files.empty())
        throw RequestError(
            {RankOptions::kScores, " files are only read with ", RankOptions::kCriterion, " external"});
    if (!external && opts.imatrices.empty())
        throw RequestError({"give at least one ", RankOptions::kImatrix, " NAME=FILE"});
    if (criterion.needs.down_weights && opts.model.empty())
        throw RequestError({RankOptions::kCriterion, fmt::format(" {} needs ", criterion.name),
                            RankOptions::kModel, std::string(": ") + criterion.model_why});
    if (external && !opts.neuron_plan.empty())
        throw RequestError({RankOptions::kNeuronPlan, " restricts imatrix energies; it does not apply to ",
                            RankOptions::kCriterion, " external"});
    check_consensus_applies(opts.criterion, opts.consensus);  // external scores cannot be pooled
    check_domain_names(external ? opts.score_files : opts.imatrices);

    RankSources s;
    s.model = opts.model;
    if (external) {
        if (opts.score_aggregate != "sum" && opts.score_aggregate != "mean")
            throw RequestError({RankOptions::kScoreAggregate,
                                fmt::format(" is 'sum' or 'mean', not '{}'", opts.score_aggregate)});
        s.scores = ScoreSources{opts.score_files, opts.score_field, opts.score_aggregate == "sum"};
    } else {
        s.imatrices = ImatrixSources{opts.imatrices, opts.neuron_plan, opts.calibration,
                                     opts.criterion, opts.consensus,   criterion.needs.down_weights,
                                     opts.strict};
    }
    // --fit sizes the output from the model's tensors.
    if (opts.fit && opts.model.empty())
        throw RequestError({RankOptions::kFit, fmt::format(" {} needs ", opts.fit->text), RankOptions::kModel,
                            ": the sizes come from the model's tensors"});
    s.budget_model = opts.fit.has_value();
    s.from_plan = opts.from_plan;
    s.hash = opts.hash_inputs;
    s.threads = opts.threads;
    return s;
}

RankPlan resolve_rank(const RankOptions& opts) {
    RankPlan plan{resolve_rank_sources(opts), resolve_rank_method(opts), opts.export_format};
    if (plan.export_format == PlanFormat::kHipfire && opts.model.empty())
        throw RequestError({RankOptions::kExport, " hipfire needs ", RankOptions::kModel,
                            ": hipfire's plan has a row for every layer of it"});
    return plan;
}

}  // namespace gguf_reap
