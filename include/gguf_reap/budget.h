// The budget `rank --fit` and `estimate --fit` answer (docs/rank.md and docs/estimate.md, "--fit"), the
// rules on K, the answer and the rows of `estimate --sweep`: the plain data of their requests and results.
// The search itself is src/services/budget_search.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf_reap/estimate.h"

namespace gguf_reap {

enum class BudgetKind { kSize, kMemory };

struct Budget {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kFit{"fit"};
    BudgetKind kind = BudgetKind::kSize;
    uint64_t bytes = 0;     // size on disk, or memory per device
    uint64_t ctx = 0;       // memory: tokens of KV cache
    uint64_t overhead = 0;  // memory: bytes besides weights and KV cache
    uint64_t tp = 1;        // memory: tensor-parallel degree (1: one machine's memory)
    std::string text;       // as given: "memory=288GiB,ctx=8192"
    std::string amount;     // the size as given: "288GiB"
};

// "size=SIZE" or "memory=SIZE[,ctx=N][,overhead=SIZE][,tp=N]". Throws RequestError, one line that
// starts with the fit field and the text ("fit 'TEXT': ", which the CLI reads "--fit 'TEXT': ").
Budget parse_budget(std::string_view text);
// For a sentence: "277 GB on disk", "288 GiB with 8,192 tokens of context".
std::string budget_words(const Budget& b);

// The counts of experts per block that may be kept: rank's rules, as far as each is known.
struct KeepRules {
    int64_t expert_count = 0;
    int64_t floor = 1;     // expert_used_count: llama.cpp routes every token to that many
    int64_t groups = 1;    // expert_group_count: K is a multiple of it
    std::string arch;      // expert_count_change_refusal (llama4)
    int64_t min_keep = 1;  // rank: the protected experts of the fullest group, times the groups
    std::string min_why;
    int64_t max_keep = 0;  // rank or --imatrix: dead experts are always pruned (0: expert_count)
    std::string max_why;
    // Why K is not a legal count (a clause: "fewer than expert_used_count = 16"), or nullopt.
    std::optional<std::string> refusal(int64_t k) const;
    std::vector<int64_t> legal() const;  // ascending
};

struct BudgetPoint {
    int64_t k = 0;
    ModelFigures figures;  // of the splice that keeps k experts per block
    FitRow row;            // memory at the budget's tp, ctx and overhead
    uint64_t value = 0;    // what the budget limits: file bytes (+ slack) or row.need()
};

struct FitAnswer {
    Budget budget;
    BudgetPoint at;                            // the K chosen
    std::optional<BudgetPoint> above;          // K + 1; none when K is every expert
    std::optional<std::string> above_refusal;  // why K + 1 is not legal, when it is not
    int64_t min_legal = 0, max_legal = 0;
    std::string min_why, max_why;  // the rules that bound the legal K (rank's or the dead experts)
    bool above_fits() const { return above && above->value <= budget.bytes; }
};

struct SweepRow {
    int64_t k = 0;
    ModelFigures figures;
    std::vector<FitRow> per_gpu;  // one per requested tp
};

}  // namespace gguf_reap
