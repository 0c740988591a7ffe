// budget: the most experts that fit a size on disk or a memory budget (docs/rank.md and
// docs/estimate.md, "--fit"), and the table of sizes over K (`estimate --sweep`).
//
//   parse_budget("memory=288GiB,ctx=8192")   → Budget
//   BudgetModel(model, plan, ...)            the model's headers (and the width plan) read once
//   fit_budget(model, budget, rules)         → FitAnswer: the largest legal K that fits, and K + 1
//
// Every size is estimate's: the file size is splice's own plan (plan_splice, as `splice --dry-run`),
// the memory is estimate's arithmetic (weights per rank + KV cache + overhead). Both grow with K, so
// the answer is a binary search over the legal K, each step one plan of headers only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/budget.h"
#include "gguf_reap/estimate.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"

namespace gguf_reap {

KeepRules model_keep_rules(const MoeLayout& layout);
// The dead-expert rule from dead counts per MoE block (`blocks`: their ids) and contiguous group
// (dead[block][group]): K ≤ groups × min over (block, group) of the live experts.
void apply_dead_rule(KeepRules& rules, const std::vector<int>& blocks,
                     const std::vector<std::vector<int64_t>>& dead);

// The model's headers, its MoE layout, KV cache figures and the width plan (if any), read once.
class BudgetModel {
  public:
    BudgetModel(const std::string& model_path, const std::string& neuron_plan_path, bool drop_mtp,
                std::string tool_version);
    const ShardSet& model() const { return model_; }
    const MoeLayout& layout() const { return layout_; }
    const KvFigures& kv() const { return kv_; }
    const AfterPlan& plan() const { return plan_; }
    // The figures of the splice that keeps k experts per block (any k in 1..expert_count).
    ModelFigures figures(int64_t k) const;
    BudgetPoint point(const Budget& b, int64_t k) const;

  private:
    ShardSet model_;
    MoeLayout layout_;
    KvFigures kv_;
    AfterPlan plan_;
};

// The largest legal K whose value is at most the budget. Throws UsageError when no K is legal, or
// when none fits: "--fit 'size=1MB': nothing fits: the smallest reachable is ... at K = 4".
FitAnswer fit_budget(const BudgetModel& model, const Budget& budget, const KeepRules& rules);
// "fit size=277GB: K = 720: 276.9 GB (…) on disk; K + 1 = 721 would be …, over 277 GB": the receipt's and
// rank's rule.
Message fit_sentence(const FitAnswer& a);
nlohmann::ordered_json fit_json(const FitAnswer& a);
// The receipt's line: "- Budget: the most experts that fit 288 GiB with 8,192 tokens of context ...".
std::string fit_receipt_line(const FitAnswer& a, const FieldSpelling& spell = {});
nlohmann::ordered_json budget_json(const Budget& b);

// estimate --sweep: every 1/16 of E that is legal, plus `extra` (the dead-only count, --fit's K),
// ascending, without repeats.
std::vector<int64_t> sweep_counts(const KeepRules& rules, const std::vector<int64_t>& extra);
std::vector<SweepRow> sweep(const BudgetModel& model, const std::vector<int64_t>& ks,
                            const std::vector<uint64_t>& tp, uint64_t ctx, uint64_t overhead);

}  // namespace gguf_reap
