// The scoring criteria of rank, one row each (criteria.cpp). Every place that depends on the criterion
// reads its row: the --criterion names and help, the input checks (rank_plan.cpp and
// check_criterion_inputs), the per-domain score and the pooled consensus (rank_decide.cpp,
// rank_domains.cpp), the receipt and the model card's formula, the per-token-mean warning.
// Adding a criterion is a value of Criterion (gguf_reap/rank.h), one row of kCriteria and its score
// function (docs/method.md, "Adding a criterion").
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "gguf_reap/rank.h"

namespace gguf_reap {

// What a criterion reads from the inputs.
struct CriterionNeeds {
    bool score_files = false;   // --scores files instead of imatrices (external)
    bool totals = false;        // counts or total energies, which a legacy .dat does not store
    bool counts = false;        // imatrix routing counts, which score files do not hold as such
    bool down_weights = false;  // --model's ffn_down_exps weights, dequantised row by row
};

// The counts and energies of one block added over the domains (--consensus pooled).
struct PooledSums {
    const std::vector<double>& count;
    const std::vector<double>& energy;
    const std::vector<double>& weighted;
};

struct CriterionSpec {
    Criterion id;
    const char* name;  // --criterion NAME; the keeplist's method.criterion
    // The formula in words: the receipt's "Criterion" line and the model card.
    const char* formula;
    CriterionNeeds needs;
    // Why --model is needed (needs.down_weights): the refusal without it says so.
    const char* model_why;
    // A mean per routed token: warned about when it prunes more than 25 % (docs/method.md).
    bool per_token_mean;
    // The expert's score in one domain's block; `full`: as if there were no --neuron-plan.
    double (*score)(const BlockStats& s, size_t e, bool full);
    // --consensus pooled: the score from counts and sums added over the domains; nullptr: scores
    // that cannot be pooled (already per-block results).
    double (*pooled)(const PooledSums& p, size_t e);
};

// Every criterion, in the order the help lists them.
std::span<const CriterionSpec> criteria();
const CriterionSpec& criterion_spec(Criterion c);

// Refuses a consensus the criterion's scores cannot be combined by (pooled with external scores, which
// are already per-block results). Pure: resolve_rank checks it before any file is read.
void check_consensus_applies(Criterion criterion, Consensus consensus);

// Refuses criterion/consensus choices the inputs cannot support (legacy .dat with a criterion that needs
// totals, or with pooled; score files with pooled, or with a criterion that needs imatrix counts). Uses
// only each domain's path and format, so the imatrix reader calls it before reading any values, and
// rank_experts again on inputs built by hand.
void check_criterion_inputs(const std::vector<DomainData>& domains, Criterion criterion, Consensus consensus);

}  // namespace gguf_reap
