// rank, step 3: what the decision is written as — the keeplist's provenance, ranking.npz, the
// receipt, and the JSON summary. No decision is made here.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <system_error>

#include <fmt/format.h>

#include "format/npz.h"
#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "gguf_reap/version.h"
#include "io/output_file.h"
#include "io/parallel.h"
#include "io/paths.h"
#include "io/units.h"
#include "ops/rank/criteria.h"
#include "ops/rank/rank_lodo.h"
#include "ops/rank/rank_steps.h"
#include "services/budget_search.h"

namespace gguf_reap {

// A keeplist names a request field as "--" and the field's name: the rule "--ratio 0.25", the reason
// "--protect" (docs/keeplist.md). It is the file's spelling, whoever calls rank.
std::string keeplist_field(RequestField f) {
    return "--" + std::string(field_name(f));
}

std::string rule_text(const RankDecision& r) {
    return render(rule_message(r), keeplist_field);
}

namespace {

using json = nlohmann::ordered_json;

json opt_json(const std::optional<uint64_t>& v) {
    return v ? json(*v) : json(nullptr);
}
json num_or_null(double v) {
    return std::isfinite(v) ? json(v) : json(nullptr);
}

std::string fmt_rank(double v) {
    return v == std::floor(v) ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v);
}

std::string pct(double v) {
    return std::isfinite(v) ? fmt::format("{:.2f} %", 100 * v) : "n/a";
}

std::string ids(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t i : v) s += (s.empty() ? "" : ", ") + std::to_string(i);
    return s.empty() ? "–" : s;
}

// The lowest retained share of domain d's criterion mass over the blocks, and that block's index
// (NaN, 0 when the domain has mass in no block).
std::pair<double, size_t> worst_of(const RankDecision& r, size_t d) {
    const size_t B = r.blocks.size();
    std::pair<double, size_t> w{std::numeric_limits<double>::quiet_NaN(), 0};
    for (size_t b = 0; b < B; ++b) {
        const double x = r.retained_share[d * B + b];
        if (!std::isnan(x) && (std::isnan(w.first) || x < w.first)) w = {x, b};
    }
    return w;
}

json worst_json(const RankInput& in, const RankDecision& r) {
    if (std::isnan(r.worst_share)) return nullptr;
    return {{"domain", in.domains[r.worst_domain].name},
            {"block", r.blocks[r.worst_block]},
            {"retained_share", r.worst_share}};
}

constexpr const char* kTieRule =
    "per domain, equal scores rank the lower expert id better; in the consensus, ties are broken by the "
    "sorted "
    "vector of per-domain ranks compared lexicographically, then by the lower expert id";

}  // namespace

const char* consensus_text(Consensus c) {
    switch (c) {
        case Consensus::kMinRank:
            return "each expert is scored by its rank in its single most favourable domain; the experts "
                   "pruned are "
                   "those that no domain ranks well";
        case Consensus::kMeanRank:
            return "mean of the expert's ranks over the domains";
        case Consensus::kSum:
            return "per-domain scores normalised to shares of the block, summed";
        case Consensus::kPooled:
            return "raw counts and sums added across domains (as llama-imatrix merges files), then scored";
        case Consensus::kMaxMin:
            return "per block, the kept set that maximises the worst domain's retained share of the "
                   "criterion's mass (then the second worst, ...), found by backward elimination and "
                   "swaps, never below the min-rank set (docs/method.md)";
    }
    return "";
}

std::string safety_margin_sentence(int64_t best_pruned_rank, int64_t expert_count, double median_layer,
                                   int block, int64_t expert, const std::string& domain) {
    if (best_pruned_rank == 0) return "no expert is pruned";
    std::string s = fmt::format(
        "no pruned expert ranks better than {} of {} in any domain, in any layer (median layer: {})",
        best_pruned_rank, expert_count, fmt_rank(median_layer));
    if (block >= 0 && expert >= 0 && !domain.empty())
        s += fmt::format("; the closest to being kept is blk.{} expert {}, ranked {} in {}", block, expert,
                         best_pruned_rank, domain);
    return s;
}

std::string safety_margin_sentence(const RankDecision& r) {
    return safety_margin_sentence(r.safety_rank, r.expert_count, r.safety_median, r.safety_block,
                                  r.safety_expert, r.safety_domain);
}

json rank_method_json(const RankInput& in, const RankDecision& r) {
    json m;
    m["tool"] = "gguf-reap rank";
    m["tool_version"] = GGUF_REAP_VERSION_STRING;
    m["criterion"] = criterion_name(r.criterion);
    if (in.imported)
        m["from_plan"] = {
            {"path", base_name(in.imported->path)},
            {"format", plan_format_name(in.imported->plan.format)},
            {"sha256", in.imported->sha256.empty() ? json(nullptr) : json(in.imported->sha256)}};
    if (criterion_spec(r.criterion).needs.score_files) {
        m["score_field"] = in.score_field;
        if (in.score_is_mean) m["score_aggregate"] = in.score_times_counts ? "sum" : "mean";
    }
    m["consensus"] = consensus_name(r.consensus);
    m["rule"] = rule_text(r);
    if (r.fit) m["fit"] = fit_json(*r.fit);
    m["tie_break"] = kTieRule;
    m["super_expert"] = {{"share_threshold", r.super_share},
                         {"channel_ratio_threshold", r.super_channel_ratio}};
    json doms = json::array();
    for (const auto& d : in.domains) {
        json o;
        o["name"] = d.name;
        o["file"] = base_name(d.path);  // files meant for upload name no local directory
        o["format"] = d.format;
        o["size"] = d.file_size;
        o["sha256"] = d.sha256.empty() ? json(nullptr) : json(d.sha256);
        o["datasets"] = d.datasets;
        o["chunks"] = opt_json(d.chunks);
        o["chunk_size"] = opt_json(d.chunk_size);
        o["tokens"] = opt_json(d.tokens);
        if (d.calibration) {
            const CalibrationRecord& c = *d.calibration;
            o["calibration"] = {{"calibrate_json", c.json_path},
                                {"text", c.text_path},
                                {"text_sha256", c.text_sha256},
                                {"text_tokens", c.tokens},
                                {"used_sha256", c.used_sha256},
                                {"used_tokens", c.used_tokens},
                                {"chunks", c.chunks},
                                {"ctx", c.ctx},
                                {"command", c.command},
                                {"llama_args", c.llama_args},
                                {"llama_build", c.llama_build}};
        }
        doms.push_back(o);
    }
    m["domains"] = doms;
    if (!in.plan_path.empty())
        m["neuron_plan"] = {{"file", base_name(in.plan_path)},
                            {"sha256", in.plan_sha256.empty() ? json(nullptr) : json(in.plan_sha256)},
                            {"k", in.plan_k}};
    m["safety_margin"] = {{"best_pruned_rank", r.safety_rank},
                          {"of", r.expert_count},
                          {"median_layer", r.safety_median},
                          {"block", r.safety_block >= 0 ? json(r.safety_block) : json(nullptr)},
                          {"expert", r.safety_expert >= 0 ? json(r.safety_expert) : json(nullptr)},
                          {"domain", r.safety_domain.empty() ? json(nullptr) : json(r.safety_domain)}};
    m["blind_spot"] = blind_spot_json(in, r);
    return m;
}

json rank_summary_json(const RankInput& in, const RankDecision& r) {
    json j;
    j["expert_count"] = r.expert_count;
    j["n_keep"] = r.n_keep;
    j["rule"] = rule_text(r);
    if (r.fit) j["fit"] = fit_json(*r.fit);
    j["criterion"] = criterion_name(r.criterion);
    j["consensus"] = consensus_name(r.consensus);
    j["blocks"] = r.blocks;
    json doms = json::array();
    for (size_t d = 0; d < in.domains.size(); ++d) {
        const auto& dom = in.domains[d];
        doms.push_back({{"name", dom.name},
                        {"file", dom.path},
                        {"format", dom.format},
                        {"sha256", dom.sha256.empty() ? json(nullptr) : json(dom.sha256)},
                        {"pruned_token_share", num_or_null(r.pruned_token_share[d])},
                        {"pruned_energy_share", num_or_null(r.pruned_energy_share[d])},
                        {"worst_retained_share", num_or_null(worst_of(r, d).first)}});
    }
    j["domains"] = doms;
    j["worst_domain"] = worst_json(in, r);
    json per = json::array();
    for (size_t b = 0; b < r.blocks.size(); ++b) {
        const KeepBlock& kb = r.keeplist.blocks[b];
        json o{{"block", kb.block},
               {"keep", kb.keep},
               {"prune", kb.prune},
               {"dead", kb.dead},
               {"best_pruned_rank", r.best_pruned_rank[b]}};
        if (!in.plan_path.empty()) {
            json sp = json::array();
            for (size_t d = 0; d < in.domains.size(); ++d)
                sp.push_back(num_or_null(r.spearman[d * r.blocks.size() + b]));
            o["spearman_restricted_vs_full"] = sp;
        }
        per.push_back(o);
    }
    j["per_block"] = per;
    json dead = json::array();
    for (const auto& d : r.dead_experts)
        dead.push_back({{"block", d.block}, {"expert", d.expert}, {"reason", d.reason}});
    j["dead"] = dead;
    json prot = json::array();
    for (const auto& p : r.protected_experts)
        prot.push_back({{"block", p.block},
                        {"expert", p.expert},
                        {"share", p.share},
                        {"share_domain", p.share_domain},
                        {"channel_ratio", p.channel_ratio},
                        {"by_share", p.by_share},
                        {"by_channel", p.by_channel},
                        {"by_option", p.by_option},
                        {"reason", p.reason}});
    j["protected"] = prot;
    j["safety_margin"] = {{"best_pruned_rank", r.safety_rank},
                          {"of", r.expert_count},
                          {"median_layer", r.safety_median},
                          {"block", r.safety_block >= 0 ? json(r.safety_block) : json(nullptr)},
                          {"expert", r.safety_expert >= 0 ? json(r.safety_expert) : json(nullptr)},
                          {"domain", r.safety_domain.empty() ? json(nullptr) : json(r.safety_domain)},
                          {"sentence", safety_margin_sentence(r)}};
    j["blind_spot"] = blind_spot_json(in, r);
    j["warnings"] = r.warnings;
    j["notes"] = in.notes;
    return j;
}

namespace {

// The receipt's text, line by line.
struct Markdown {
    std::string text;
    void line(const std::string& x) { text += x + "\n"; }
};

// How many were kept, by which rule and criterion, the consensus, ties and the safety margin.
void receipt_decision(const RankInput& in, const RankDecision& r, Markdown& md) {
    const size_t B = r.blocks.size();
    md.line("## Decision");
    md.line("");
    md.line(fmt::format(
        "- Keep **{} of {}** routed experts in each of the {} MoE blocks (blk.{}–blk.{}), rule `{}`: {} "
        "experts pruned in all.",
        r.n_keep, r.expert_count, B, r.blocks.front(), r.blocks.back(), rule_text(r),
        static_cast<int64_t>(B) * (r.expert_count - r.n_keep)));
    if (r.fit) md.line(fit_receipt_line(*r.fit, in.spell));
    if (in.imported)
        md.line(fmt::format(
            "- **The kept experts come from another tool's plan**: `{}` ({} format{}), imported with "
            "`{}`. The criterion and consensus below only score them: the ranks, the safety "
            "margin, the dead and super-expert checks (warnings, not refusals) describe that plan.",
            base_name(in.imported->path), plan_format_name(in.imported->plan.format),
            in.imported->sha256.empty() ? std::string() : ", sha256 " + in.imported->sha256,
            spelled(RequestField::kFromPlan, in.spell)));
    md.line(
        fmt::format("- Criterion `{}`: {}.", criterion_name(r.criterion), criterion_formula(r.criterion)));
    if (criterion_spec(r.criterion).needs.score_files) {
        if (!in.score_is_mean)
            md.line(fmt::format("  Score field: `{}`.", in.score_field));
        else if (in.score_times_counts)
            md.line(fmt::format(
                "  Score field: `{}`, a per-token mean, summed over the routed tokens: `{}` × "
                "`activation_counts` (the default; `{} mean` keeps the mean).",
                in.score_field, in.score_field, spelled(RequestField::kScoreAggregate, in.spell)));
        else
            md.line(fmt::format("  Score field: `{}`, a per-token mean, as given (`{} mean`).",
                                in.score_field, spelled(RequestField::kScoreAggregate, in.spell)));
    }
    md.line(fmt::format("- Consensus `{}`: {}.", consensus_name(r.consensus), consensus_text(r.consensus)));
    md.line(fmt::format("- Ties: {}.", kTieRule));
    md.line(fmt::format("- Safety margin: {}.", safety_margin_sentence(r)));
    md.line("");
}

// Every domain's file, the model (or that there was none) and the neuron plan.
void receipt_inputs(const RankInput& in, const RankDecision& r, Markdown& md) {
    md.line("## Inputs");
    md.line("");
    md.line("| domain | file | format | bytes | sha256 | datasets | chunks × tokens | tokens |");
    md.line("| --- | --- | --- | ---: | --- | --- | --- | ---: |");
    for (const auto& d : in.domains) {
        std::string ds;
        for (const auto& x : d.datasets) ds += (ds.empty() ? "" : ", ") + x;
        md.line(fmt::format(
            "| {} | `{}` | {} | {} | {} | {} | {} × {} | {} |", d.name, base_name(d.path), d.format,
            with_commas(d.file_size), d.sha256.empty() ? "not hashed" : "`" + d.sha256 + "`",
            ds.empty() ? "–" : ds, d.chunks ? std::to_string(*d.chunks) : "?",
            d.chunk_size ? std::to_string(*d.chunk_size) : "?", d.tokens ? with_commas(*d.tokens) : "?"));
    }
    md.line("");
    if (in.source) {
        const KeepListSource& src = *in.source;
        md.line(fmt::format(
            "Model: architecture `{}`, {} experts per block, {} used per token, {} expert group(s), {} "
            "tensors (identified by name and size; not hashed):",
            src.architecture, src.expert_count, src.expert_used_count,
            std::max<uint64_t>(1, src.expert_group_count), src.tensor_count));
        md.line("");
        for (const auto& [name, size] : src.shards)
            md.line(fmt::format("- `{}` — {} bytes", name, with_commas(size)));
    } else {
        md.line(fmt::format(
            "Model: not given. Blocks and the expert count ({}) come from the imatrix entries; "
            "expert_used_count, groups and the architecture are unknown and left out of the keeplist.",
            r.expert_count));
    }
    if (!in.plan_path.empty()) {
        md.line("");
        md.line(fmt::format(
            "Neuron plan: `{}` (k = {} channels per expert){}. Each expert's energy is restricted to its "
            "kept channels.",
            base_name(in.plan_path), in.plan_k,
            in.plan_sha256.empty() ? "" : ", sha256 `" + in.plan_sha256 + "`"));
    }
    md.line("");
}

// One row per block: kept, pruned, dead, protected, the best pruned rank (and the Spearman).
void receipt_per_block(const RankInput& in, const RankDecision& r, Markdown& md) {
    const size_t B = r.blocks.size(), D = in.domains.size();
    md.line("## Per block");
    md.line("");
    std::string head = "| block | kept | pruned | dead | protected | best pruned rank |";
    std::string rule = "| ---: | --- | --- | --- | --- | ---: |";
    if (!in.plan_path.empty()) {
        head += " Spearman restricted vs full (min over domains) |";
        rule += " ---: |";
    }
    md.line(head);
    md.line(rule);
    for (size_t b = 0; b < B; ++b) {
        const KeepBlock& kb = r.keeplist.blocks[b];
        std::vector<int64_t> prot;
        for (const auto& p : kb.protected_experts) prot.push_back(p.expert);
        std::string row = fmt::format("| {} | {} | {} | {} | {} | {} |", kb.block, ids(kb.keep),
                                      ids(kb.prune), ids(kb.dead), ids(prot),
                                      r.best_pruned_rank[b] ? std::to_string(r.best_pruned_rank[b]) : "–");
        if (!in.plan_path.empty()) {
            double mn = std::numeric_limits<double>::infinity();
            for (size_t d = 0; d < D; ++d) {
                const double x = r.spearman[d * B + b];
                if (std::isfinite(x)) mn = std::min(mn, x);
            }
            row += std::isfinite(mn) ? fmt::format(" {:.4f} |", mn) : " n/a |";
        }
        md.line(row);
    }
    md.line("");
}

// The dead experts, and the super-experts and protected ones with the thresholds that found them.
void receipt_dead_and_protected(const RankInput& in, const RankDecision& r, Markdown& md) {
    md.line("## Dead experts");
    md.line("");
    if (r.dead_experts.empty()) md.line("None: every expert was routed in at least one domain.");
    for (const auto& d : r.dead_experts)
        md.line(fmt::format("- blk.{} expert {}: {}; pruned first.", d.block, d.expert, d.reason));
    md.line("");
    md.line("## Super-experts and protected experts");
    md.line("");
    md.line(fmt::format(
        "Detection: an expert carrying at least {:.1f} % of its block's energy in some domain, or whose "
        "hottest ffn_down_exps input channel is at least {:.0f}× the block's median hottest channel; plus "
        "`{}`. Always kept.",
        100 * r.super_share, r.super_channel_ratio, spelled(RequestField::kProtect, in.spell)));
    md.line("");
    if (r.protected_experts.empty()) md.line("None found.");
    for (const auto& p : r.protected_experts)
        md.line(fmt::format("- blk.{} expert {}: share {} of the block's {} ({}); {}.", p.block, p.expert,
                            pct(p.share), p.share_is_mean ? "per-token mean energy" : "energy",
                            p.share_domain.empty() ? "no imatrix data" : p.share_domain, p.reason));
    md.line("");
}

// Per domain: what the pruned experts carried, and what the kept ones retain (its worst block).
void receipt_domain_shares(const RankInput& in, const RankDecision& r, Markdown& md) {
    const size_t D = in.domains.size();
    md.line("## What the pruned experts carried");
    md.line("");
    md.line("| domain | share of routed tokens | share of energy |");
    md.line("| --- | ---: | ---: |");
    for (size_t d = 0; d < D; ++d)
        md.line(fmt::format("| {} | {} | {} |", in.domains[d].name, pct(r.pruned_token_share[d]),
                            pct(r.pruned_energy_share[d])));
    md.line("");
    md.line("## What each domain keeps");
    md.line("");
    md.line(fmt::format(
        "The kept experts' share of each domain's {} mass (max(0, score) per expert, as the consensus "
        "sees it), in the block where the domain keeps least; and of its routed tokens and energy over "
        "all blocks.",
        criterion_name(r.criterion)));
    md.line("");
    md.line(
        "| domain | least retained share of the criterion's mass (block) | routed tokens retained | "
        "energy retained |");
    md.line("| --- | ---: | ---: | ---: |");
    const auto kept_of = [](double pruned) { return std::isnan(pruned) ? pruned : 1 - pruned; };
    for (size_t d = 0; d < D; ++d) {
        const auto [w, wb] = worst_of(r, d);
        md.line(
            fmt::format("| {} | {} | {} | {} |", in.domains[d].name,
                        std::isnan(w) ? std::string("–") : fmt::format("{} (blk.{})", pct(w), r.blocks[wb]),
                        pct(kept_of(r.pruned_token_share[d])), pct(kept_of(r.pruned_energy_share[d]))));
    }
    if (!std::isnan(r.worst_share)) {
        md.line("");
        md.line(
            fmt::format("Worst domain: {} keeps {} of its {} mass in blk.{} (what `{} max-min` "
                        "maximises, block by block).",
                        in.domains[r.worst_domain].name, pct(r.worst_share), criterion_name(r.criterion),
                        r.blocks[r.worst_block], spelled(RequestField::kConsensus, in.spell)));
    }
    md.line("");
}

// The model's MTP (nextn) blocks, which splice --drop-mtp can leave out.
void receipt_mtp_blocks(const RankInput& in, Markdown& md) {
    if (in.nextn_blocks.empty()) return;
    std::vector<std::string> names;
    for (int b : in.nextn_blocks) names.push_back(fmt::format("blk.{}", b));
    const bool one = names.size() == 1;
    md.line("");
    md.line("## MTP (nextn) blocks");
    md.line("");
    md.line(
        fmt::format("{} {} the model's multi-token-prediction (nextn) block{}. {} ranked and pruned like the "
                    "others, as a plain `splice` cuts {}; `splice {}` leaves {} out of the model "
                    "instead, with {} keeplist entr{}, for those who do not use speculative decoding.",
                    fmt::join(names, ", "), one ? "is" : "are", one ? "" : "s", one ? "It is" : "They are",
                    one ? "it" : "them", spelled(RequestField::kDropMtp, in.spell), one ? "it" : "them",
                    one ? "its" : "their", one ? "y" : "ies"));
}

// Hash-routed blocks: how many token → expert entries the kept set redirects.
void receipt_hash_routed(const RankInput& in, const RankDecision& r, Markdown& md) {
    if (in.hash_entries.empty()) return;
    md.line("");
    md.line("## Hash-routed blocks");
    md.line("");
    md.line(
        "Their token → expert tables (`ffn_gate_tid2eid`) name experts by id; splice renumbers the kept "
        "ones and redirects every entry that names a pruned expert to the kept expert with the most "
        "similar router row that the token's row does not already name.");
    md.line("");
    md.line("| block | (token, slot) entries | redirected |");
    md.line("| --- | ---: | ---: |");
    for (const auto& [block, count] : in.hash_entries) {
        uint64_t total = 0, redirected = 0;
        const KeepBlock* kb = r.keeplist.find_block(block);
        std::vector<bool> kept(count.size(), false);
        if (kb)
            for (int64_t e : kb->keep) kept[static_cast<size_t>(e)] = true;
        for (size_t e = 0; e < count.size(); ++e) {
            total += count[e];
            if (!kept[e]) redirected += count[e];
        }
        md.line(fmt::format("| blk.{} | {} | {} |", block, total, redirected));
    }
}

// A titled list (warnings, notes on the inputs), left out when empty.
void receipt_list(const char* title, const std::vector<std::string>& items, Markdown& md) {
    if (items.empty()) return;
    md.line("");
    md.line(fmt::format("## {}", title));
    md.line("");
    for (const auto& x : items) md.line("- " + x);
}

}  // namespace

std::string render_receipt(const RankInput& in, const RankDecision& r) {
    Markdown md;
    md.line("# REAP keeplist receipt");
    md.line("");
    md.line(fmt::format("Made by gguf-reap {} `rank`. Keeplist: `{}`; per-expert scores and ranks: `{}`.",
                        GGUF_REAP_VERSION_STRING, kKeeplistFile, kRankingFile));
    md.line("");
    receipt_decision(in, r, md);
    receipt_inputs(in, r, md);
    receipt_per_block(in, r, md);
    receipt_dead_and_protected(in, r, md);
    receipt_domain_shares(in, r, md);
    md.text += blind_spot_receipt(in, r);  // rank_lodo.h
    md.text.pop_back();  // the section's closing blank line: the next section starts with its own
    receipt_mtp_blocks(in, md);
    receipt_hash_routed(in, r, md);
    receipt_list("Warnings", r.warnings, md);
    receipt_list("Notes on the inputs", in.notes, md);
    md.line("");
    md.line("Formulas, thresholds and the tie rule: docs/method.md. The keeplist schema: docs/keeplist.md.");
    return md.text;
}

// The arrays of ranking.npz (docs/keeplist.md).
static std::vector<std::pair<std::string, NpyArray>> ranking_arrays(const RankInput& in,
                                                                    const RankDecision& r) {
    const int64_t D = static_cast<int64_t>(in.domains.size()), B = static_cast<int64_t>(r.blocks.size()),
                  E = r.expert_count;
    std::vector<int32_t> blocks(r.blocks.begin(), r.blocks.end());
    std::vector<std::pair<std::string, NpyArray>> arrays;
    arrays.emplace_back("domains", NpyArray::strings(r.domain_names));
    arrays.emplace_back("blocks", NpyArray::i32({B}, blocks));
    arrays.emplace_back("scores", NpyArray::f64({D, B, E}, r.scores));
    arrays.emplace_back("ranks", NpyArray::i32({D, B, E}, r.ranks));
    arrays.emplace_back("counts", NpyArray::i64({D, B, E}, r.counts));
    arrays.emplace_back("consensus_rank", NpyArray::i32({B, E}, r.consensus_rank));
    arrays.emplace_back("consensus_score", NpyArray::f64({B, E}, r.consensus_score));
    arrays.emplace_back("keep", NpyArray::boolean({B, E}, r.keep));
    arrays.emplace_back("dead", NpyArray::boolean({B, E}, r.dead));
    arrays.emplace_back("protected", NpyArray::boolean({B, E}, r.protect));
    arrays.emplace_back("retained_share", NpyArray::f64({D, B}, r.retained_share));
    std::vector<double> lodo;  // [D, 2]: kept seen, kept unseen (ops/rank/rank_lodo.h)
    for (const BlindSpot& x : r.blind_spot) lodo.insert(lodo.end(), {x.seen, x.unseen});
    arrays.emplace_back("lodo_share", NpyArray::f64({D, 2}, lodo));
    if (!in.plan_path.empty()) arrays.emplace_back("spearman", NpyArray::f64({D, B}, r.spearman));
    return arrays;
}

void write_rank_outputs(const RankInput& in, const RankDecision& r, const std::string& dir, bool force,
                        int threads) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw IoError(dir, "create directory", ec.value());
    const fs::path base(dir);
    for (const char* f : {kKeeplistFile, kRankingFile, kReceiptFile})
        if (!force && fs::exists(base / f))
            throw RequestError(
                {(base / f).string() + " exists; use ", RequestField::kForce, " to overwrite it"});

    // The three files are built and written in parallel (the ranking's arrays are most of the bytes),
    // each under its temporary name; they are renamed into place only when all three are written, the
    // receipt last: its presence says the other two are complete, and a failed write leaves none.
    OutputFile ranking_out((base / kRankingFile).string());
    OutputFile keeplist_out((base / kKeeplistFile).string());
    std::string receipt;
    parallel_for(3, resolve_threads(threads), [&](size_t i) {
        if (i == 0) {
            write_npz_to(ranking_out, ranking_arrays(in, r));
        } else if (i == 1) {
            const std::string keeplist = r.keeplist.text();
            keeplist_out.write_at(0, keeplist.data(), keeplist.size());
        } else {
            receipt = render_receipt(in, r);
        }
    });
    OutputFile out((base / kReceiptFile).string());
    out.write_at(0, receipt.data(), receipt.size());
    ranking_out.commit();
    keeplist_out.commit();
    out.commit();
}

}  // namespace gguf_reap
