// rank's imatrix reader (the read step, rank_input.cpp, hands it its slice of the plan): every imatrix
// matched to the MoE blocks, checked against the others, the neuron plan and the model, then read in one
// pass per file (imatrix_scan.h), and what gguf-reap calibrate recorded of each. Only the ffn_down_exps
// entry of each MoE block is read: its in_sum2 rows hold each expert's intermediate-activation energy per
// channel, its counts the routed tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf_reap/rank.h"
#include "ops/rank/rank_model.h"
#include "ops/rank/rank_plan.h"

namespace gguf_reap {

// What the imatrices hold, per domain in the order given.
struct ImatrixRead {
    std::vector<int> blocks;  // the model's MoE blocks, or those the imatrices have entries for
    int64_t expert_count = 0;
    int64_t expert_width = 0;  // ffn_down_exps ne0 of the imatrices (the native width)
    std::vector<DomainData> domains;
    // --neuron-plan: the plan, its sha256 ("" when not hashed) and its k.
    std::string plan_path, plan_sha256;
    int64_t plan_k = 0;
    std::vector<std::string> notes;  // what was derived, what could not be, and from where
};

// `model`: the model read (RankModel::set empty without one). `hash`: the sha256 of every file, in the
// same pass where possible; `threads` (0: one per core). Throws InputError (a bad file), UsageError
// (files that do not fit together, with the model or with the criterion), IoError, Interrupted.
ImatrixRead read_imatrices(const ImatrixSources& src, const RankModel& model, bool hash, int threads);

}  // namespace gguf_reap
