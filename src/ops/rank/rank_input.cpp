// rank, step 2: read the inputs the plan names (rank_plan.h), each reader given its slice of the plan and
// returning what it read: the model (rank_model.h), then the imatrices (rank_imatrices.h) or the score
// files (score_file.h), then --from-plan's plan; the GGUF imatrices' counts are then checked against each
// other and the model (imatrix_sanity.h).
#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "gguf_reap/version.h"
#include "ops/rank/imatrix_sanity.h"
#include "ops/rank/rank_imatrices.h"
#include "ops/rank/rank_import.h"
#include "ops/rank/rank_model.h"
#include "ops/rank/rank_steps.h"
#include "ops/rank/score_file.h"
#include "services/budget_search.h"
#include "services/opened.h"

namespace gguf_reap {

RankInput read_rank_input(const RankSources& s) {
    RankInput in;
    // The model first: its MoE blocks and experts are what the imatrices or score files must hold.
    const RankModel model = s.model.empty() ? RankModel{} : read_rank_model(s.model, s.imatrices.has_value());
    if (model.set) {
        const MoeLayout& L = model.layout;
        in.expert_count = static_cast<int64_t>(L.expert_count);
        in.expert_used_count = L.expert_used_count;
        in.expert_group_count = L.expert_group_count;
        in.block_count = L.block_count;
        in.model_name = model.name;
        in.blocks = model.blocks;
        in.nextn_blocks = model.nextn_blocks;
        in.hash_entries = model.hash_entries;
        in.source = model.source;
    }
    if (s.scores) {
        ScoreRead r =
            read_score_files(*s.scores, model.set ? &model.blocks : nullptr, in.expert_count, s.hash);
        in.blocks = std::move(r.blocks);
        in.expert_count = r.expert_count;
        in.domains = std::move(r.domains);
        in.score_field = std::move(r.field);
        in.score_is_mean = r.is_mean;
        in.score_times_counts = r.times_counts;
    } else {
        ImatrixRead r = read_imatrices(*s.imatrices, model, s.hash, s.threads);
        in.blocks = std::move(r.blocks);
        in.expert_count = r.expert_count;
        in.expert_width = r.expert_width;
        in.domains = std::move(r.domains);
        in.plan_path = std::move(r.plan_path);
        in.plan_sha256 = std::move(r.plan_sha256);
        in.plan_k = r.plan_k;
        in.notes.insert(in.notes.end(), r.notes.begin(), r.notes.end());
    }
    if (!s.from_plan.empty())
        in.imported = import_plan(s.from_plan, s.hash, s.model, s.scores.has_value(), in);
    if (s.imatrices) in.sanity = imatrix_sanity_problems(in, s.imatrices->strict);
    // --fit: the model's headers once more, for the budget search. With --neuron-plan the model is
    // already the width-cut build (docs/rank.md, "Neuron plans"): its own sizes are those of the
    // width-cut build, so the plan is not applied again.
    if (s.budget_model) {
        auto opened = std::make_shared<Opened>();
        opened->budget.emplace(s.model, "", false, std::string(GGUF_REAP_TOOL));
        in.opened = std::move(opened);
    }
    return in;
}

}  // namespace gguf_reap
