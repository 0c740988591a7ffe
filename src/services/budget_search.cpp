// budget: parse a budget, the legal K, and the binary search over them with splice's planner.
#include "services/budget_search.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gguf_reap/budget.h"
#include "gguf_reap/error.h"
#include "gguf_reap/splice.h"
#include "io/sha256.h"
#include "io/units.h"
#include "model/keep_count.h"
#include "model/tensor_table.h"
#include "services/model_figures.h"

namespace gguf_reap {

namespace {

constexpr const char* kBudgetForm = "size=SIZE, or memory=SIZE[,ctx=N][,overhead=SIZE][,tp=N]";

// "288GiB" → "288 GiB" (bytes, "227584B" or "0": "227,584 bytes").
std::string spaced(const std::string& amount) {
    size_t i = 0;
    while (i < amount.size() && ((amount[i] >= '0' && amount[i] <= '9') || amount[i] == '.')) ++i;
    const std::string unit = amount.substr(i);
    if (unit.empty() || unit == "B" || unit == "b") return with_commas(*parse_size(amount)) + " bytes";
    return amount.substr(0, i) + " " + unit;
}

std::string bytes_text(uint64_t v) {
    return fmt::format("{} ({} bytes)", human_bytes(v), with_commas(v));
}

// A keeplist that keeps experts 0..k-1 of every MoE block: the size of a splice depends on k only
// (every kept-expert array has k entries, every sha256 64 hex digits).
KeepList first_experts(const MoeLayout& layout, int64_t k) {
    KeepList kl;
    kl.n_keep = static_cast<uint64_t>(k);
    for (const MoeBlock& b : layout.blocks) {
        KeepBlock kb;
        kb.block = b.block;
        for (int64_t e = 0; e < static_cast<int64_t>(layout.expert_count); ++e)
            (e < k ? kb.keep : kb.prune).push_back(e);
        kl.blocks.push_back(std::move(kb));
    }
    return kl;
}

}  // namespace

Budget parse_budget(std::string_view text) {
    Budget b;
    b.text = std::string(text);
    const auto bad = [&](const std::string& why) {
        return RequestError({Budget::kFit, fmt::format(" '{}': {}", text, why)});
    };
    std::set<std::string> seen;
    size_t start = 0;
    bool first = true;
    while (true) {
        const size_t comma = text.find(',', start);
        const std::string item(
            text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        const size_t eq = item.find('=');
        if (eq == std::string::npos)
            throw bad(fmt::format("'{}' is not KEY=VALUE; write {}", item, kBudgetForm));
        const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        const bool head = key == "size" || key == "memory";
        if (first && !head) throw bad(fmt::format("unknown budget '{}'; write {}", key, kBudgetForm));
        if (!first && head)
            throw bad(fmt::format("give one budget, size= or memory=; write {}", kBudgetForm));
        if (!seen.insert(key).second) throw bad(fmt::format("'{}' is given twice", key));
        if (key == "size" || key == "memory" || key == "overhead") {
            const auto v = parse_size(value);
            if (!v) throw bad(fmt::format("'{}' {}", value, size_refusal(value)));
            if (key == "overhead") {
                b.overhead = *v;
            } else {
                if (*v == 0) throw bad("the budget must be more than 0 bytes");
                b.kind = key == "size" ? BudgetKind::kSize : BudgetKind::kMemory;
                b.bytes = *v;
                b.amount = value;
            }
        } else if (key == "ctx") {
            const auto v = parse_whole(value, uint64_t{1} << 40);
            if (!v)
                throw bad(
                    fmt::format("ctx '{}' is not a number of tokens (a whole number, e.g. 8192)", value));
            b.ctx = *v;
        } else if (key == "tp") {
            const auto v = parse_whole(value, 65536);
            if (!v || *v == 0)
                throw bad(fmt::format(
                    "tp '{}' is not a tensor-parallel degree (a whole number from 1 to 65536)", value));
            b.tp = *v;
        } else {
            throw bad(fmt::format("unknown key '{}'; write {}", key, kBudgetForm));
        }
        if (b.kind == BudgetKind::kSize && !first)
            throw bad(fmt::format("'{}' is for a memory budget; a size budget takes no options", key));
        first = false;
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return b;
}

std::string budget_words(const Budget& b) {
    if (b.kind == BudgetKind::kSize) return spaced(b.amount) + " on disk";
    std::string s = spaced(b.amount);
    if (b.tp > 1) s += fmt::format(" per GPU at tensor parallel {}", b.tp);
    if (b.ctx) s += fmt::format(" with {} tokens of context", with_commas(b.ctx));
    if (b.overhead) s += fmt::format(" and {} of overhead", human_bytes(b.overhead));
    return s;
}

std::optional<std::string> KeepRules::refusal(int64_t k) const {
    // The K rules (model/keep_count.h), as clauses; then what rank knows of this model's experts.
    if (const auto no = keep_count_refusal({expert_count, floor, groups, arch}, k)) {
        switch (no->breach) {
            case KeepCountBreach::kOutOfRange:
                return fmt::format("a block has {} experts (keep 1..{})", expert_count, expert_count);
            case KeepCountBreach::kBelowUsed:
                return fmt::format(
                    "fewer than expert_used_count = {}: llama.cpp routes every token to {} experts", floor,
                    floor);
            case KeepCountBreach::kNotGroupMultiple:
                return fmt::format(
                    "not a multiple of expert_group_count = {}: every group must keep the same number",
                    groups);
            case KeepCountBreach::kCountChange:
                return no->why;
        }
    }
    if (k < min_keep) return "fewer than the protected experts: " + min_why;
    if (max_keep > 0 && k > max_keep) return "more than the live experts: " + max_why;
    return std::nullopt;
}

std::vector<int64_t> KeepRules::legal() const {
    std::vector<int64_t> out;
    for (int64_t k = 1; k <= expert_count; ++k)
        if (!refusal(k)) out.push_back(k);
    return out;
}

KeepRules model_keep_rules(const MoeLayout& layout) {
    KeepRules r;
    r.expert_count = static_cast<int64_t>(layout.expert_count);
    r.floor = std::max<int64_t>(1, static_cast<int64_t>(layout.expert_used_count));
    r.groups = layout.expert_group_count > 1 ? static_cast<int64_t>(layout.expert_group_count) : 1;
    r.arch = layout.arch;
    return r;
}

void apply_dead_rule(KeepRules& rules, const std::vector<int>& blocks,
                     const std::vector<std::vector<int64_t>>& dead) {
    const int64_t G = rules.groups, group_size = rules.expert_count / G;
    for (size_t b = 0; b < dead.size() && b < blocks.size(); ++b)
        for (size_t g = 0; g < dead[b].size(); ++g) {
            if (dead[b][g] <= 0) continue;  // no bound: never "blk.0 has 0 dead experts"
            const int64_t k = G * (group_size - dead[b][g]);
            if (rules.max_keep == 0 || k < rules.max_keep) {
                rules.max_keep = k;
                rules.max_why = fmt::format("blk.{}{} has {} dead experts, which are always pruned",
                                            blocks[b], G > 1 ? fmt::format(" group {}", g) : "", dead[b][g]);
            }
        }
}

BudgetModel::BudgetModel(const std::string& model_path, const std::string& neuron_plan_path, bool drop_mtp,
                         std::string tool_version)
    : model_(ShardSet::open(model_path)), layout_(build_moe_layout(model_)), kv_(kv_cache_figures(model_)) {
    if (layout_.blocks.empty())
        throw RequestError(
            {Budget::kFit, fmt::format(": {} has no routed experts to prune (architecture '{}')", model_path,
                                       layout_.arch)});
    plan_ = load_after_plan(model_, layout_, neuron_plan_path, drop_mtp, std::move(tool_version));
}

ModelFigures BudgetModel::figures(int64_t k) const {
    return after_figures(model_, layout_, first_experts(layout_, k), sha256_hex("", 0), plan_);
}

BudgetPoint BudgetModel::point(const Budget& b, int64_t k) const {
    BudgetPoint p;
    p.k = k;
    p.figures = figures(k);
    p.row = fit_row(p.figures, kv_, b.tp, b.ctx, b.overhead);
    // A requantised width plan's size is known within a slack: budget its upper end.
    p.value = b.kind == BudgetKind::kSize ? p.figures.file_bytes + p.figures.file_bytes_slack : p.row.need();
    return p;
}

FitAnswer fit_budget(const BudgetModel& model, const Budget& budget, const KeepRules& rules) {
    const std::vector<int64_t> legal = rules.legal();
    if (legal.empty())
        throw RequestError(
            {Budget::kFit, fmt::format(" '{}': no K is legal: K must be at least {}{} and at most {}{}",
                                       budget.text, std::max(rules.min_keep, rules.floor),
                                       rules.min_why.empty() ? "" : " (" + rules.min_why + ")",
                                       rules.max_keep ? rules.max_keep : rules.expert_count,
                                       rules.max_why.empty() ? "" : " (" + rules.max_why + ")")});
    FitAnswer a;
    a.budget = budget;
    a.min_legal = legal.front();
    a.max_legal = legal.back();
    a.min_why = rules.min_why;
    a.max_why = rules.max_why;
    // The value grows with K: find the last legal K that fits.
    BudgetPoint lo = model.point(budget, legal.front());
    if (lo.value > budget.bytes) {
        const bool size = budget.kind == BudgetKind::kSize;
        throw RequestError(
            {Budget::kFit,
             fmt::format(" '{}': nothing fits: the smallest reachable is {}{} at K = {} (the fewest "
                         "experts kept that is legal)",
                         budget.text, bytes_text(lo.value), size ? " on disk" : " per device", lo.k)});
    }
    size_t good = 0, bad = legal.size();  // legal[good] fits; legal[bad] does not (or is past the end)
    while (bad - good > 1) {
        const size_t mid = good + (bad - good) / 2;
        BudgetPoint p = model.point(budget, legal[mid]);
        if (p.value <= budget.bytes) {
            good = mid;
            lo = std::move(p);
        } else {
            bad = mid;
        }
    }
    a.at = std::move(lo);
    if (a.at.k < rules.expert_count) {
        a.above = model.point(budget, a.at.k + 1);
        a.above_refusal = rules.refusal(a.at.k + 1);
    }
    return a;
}

Message fit_sentence(const FitAnswer& a) {
    const bool size = a.budget.kind == BudgetKind::kSize;
    const auto what = [&](const BudgetPoint& p) {
        if (size) return bytes_text(p.value) + " on disk";
        return fmt::format("{} per device (weights {} + KV cache {} + overhead {})", bytes_text(p.value),
                           human_bytes(p.row.weights), human_bytes(p.row.kv_cache),
                           human_bytes(p.row.overhead));
    };
    std::string s = fmt::format(" {}: K = {}, {}", a.budget.text, a.at.k, what(a.at));
    if (!a.above) {
        s += fmt::format("; all {} experts fit {}: nothing to prune", a.at.k, budget_words(a.budget));
    } else {
        s += fmt::format("; K + 1 = {} would be {}", a.above->k, what(*a.above));
        s += a.above_fits()
                 ? fmt::format(", within the budget, but is not legal: {}", a.above_refusal.value_or(""))
                 : fmt::format(", over the budget of {} bytes", with_commas(a.budget.bytes));
    }
    return {Budget::kFit, s};
}

std::string fit_receipt_line(const FitAnswer& a, const FieldSpelling& spell) {
    const bool size = a.budget.kind == BudgetKind::kSize;
    return fmt::format(
        "- Budget `{} {}`: K = {} is the most experts per block that fit {} ({} bytes){}. {} The legal K "
        "here are {}..{}{}.",
        spelled(Budget::kFit, spell), a.budget.text, a.at.k, budget_words(a.budget),
        with_commas(a.budget.bytes),
        a.above ? (a.above_fits() ? fmt::format(" and are legal (K + 1 = {} fits but is not legal: {})",
                                                a.above->k, a.above_refusal.value_or(""))
                                  : fmt::format(": K + 1 = {} would need {} bytes, {} too many", a.above->k,
                                                with_commas(a.above->value),
                                                with_commas(a.above->value - a.budget.bytes)))
                : fmt::format(" (all {} experts fit: nothing to prune)", a.at.k),
        size ? "The size is splice's own plan (headers, padding, the source's shard layout), as "
               "`splice " +
                   spelled(ops::SpliceRequest::kDryRun, spell) + "` computes it."
             : "The memory is `estimate`'s: weights per device + KV cache for the context + overhead.",
        a.min_legal, a.max_legal,
        a.max_why.empty() ? "" : fmt::format(" (at most {}: {})", a.max_legal, a.max_why));
}

nlohmann::ordered_json budget_json(const Budget& b) {
    nlohmann::ordered_json j = {{"text", b.text},
                                {"kind", b.kind == BudgetKind::kSize ? "size" : "memory"},
                                {"bytes", b.bytes},
                                {"words", budget_words(b)}};
    if (b.kind == BudgetKind::kMemory) {
        j["ctx"] = b.ctx;
        j["overhead"] = b.overhead;
        j["tp"] = b.tp;
    }
    return j;
}

nlohmann::ordered_json fit_json(const FitAnswer& a) {
    using nlohmann::ordered_json;
    const auto point = [&](const BudgetPoint& p) {
        ordered_json j = {{"k", p.k},
                          {"bytes", p.value},
                          {"human", human_bytes(p.value)},
                          {"fits", p.value <= a.budget.bytes},
                          {"file_bytes", p.figures.file_bytes},
                          {"file_bytes_exact", p.figures.file_bytes_exact}};
        if (a.budget.kind == BudgetKind::kMemory)
            j["memory"] = {
                {"weights", p.row.weights}, {"kv_cache", p.row.kv_cache}, {"overhead", p.row.overhead}};
        return j;
    };
    ordered_json j;
    j["budget"] = budget_json(a.budget);
    j["k"] = a.at.k;
    j["nothing_to_prune"] = !a.above;  // every expert fits: K is all of them
    j["at_k"] = point(a.at);
    if (a.above) {
        ordered_json up = point(*a.above);
        up["legal"] = !a.above_refusal.has_value();
        up["refusal"] = a.above_refusal ? ordered_json(*a.above_refusal) : ordered_json(nullptr);
        j["at_k_plus_1"] = up;
    } else {
        j["at_k_plus_1"] = nullptr;
    }
    j["legal_k"] = {{"min", a.min_legal}, {"max", a.max_legal}};
    return j;
}

std::vector<int64_t> sweep_counts(const KeepRules& rules, const std::vector<int64_t>& extra) {
    std::set<int64_t> ks;
    for (int64_t i = 1; i <= 16; ++i) {
        const int64_t k = (rules.expert_count * i + 8) / 16;
        if (!rules.refusal(k)) ks.insert(k);
    }
    for (int64_t k : extra)
        if (k >= 1 && k <= rules.expert_count) ks.insert(k);
    return {ks.begin(), ks.end()};
}

std::vector<SweepRow> sweep(const BudgetModel& model, const std::vector<int64_t>& ks,
                            const std::vector<uint64_t>& tp, uint64_t ctx, uint64_t overhead) {
    std::vector<SweepRow> rows;
    for (int64_t k : ks) {
        SweepRow r;
        r.k = k;
        r.figures = model.figures(k);
        for (uint64_t n : tp) r.per_gpu.push_back(fit_row(r.figures, model.kv(), n, ctx, overhead));
        rows.push_back(std::move(r));
    }
    return rows;
}

}  // namespace gguf_reap
