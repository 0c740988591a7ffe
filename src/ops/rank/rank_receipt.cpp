// rank, step 4: the receipt, REAP-KEEPLIST-RECEIPT.md (docs/rank.md, "Outputs"): the decision, its
// inputs, every block's lists and what each domain keeps, in Markdown.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "gguf_reap/splice.h"
#include "gguf_reap/version.h"
#include "io/input_file.h"
#include "io/paths.h"
#include "io/units.h"
#include "io/upload_path.h"
#include "ops/rank/criteria.h"
#include "ops/rank/rank_lodo.h"
#include "ops/rank/rank_steps.h"
#include "services/budget_search.h"

namespace gguf_reap {

namespace {

std::string pct(double v) {
    return std::isfinite(v) ? fmt::format("{:.2f} %", 100 * v) : "n/a";
}

std::string ids(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t i : v) s += (s.empty() ? "" : ", ") + std::to_string(i);
    return s.empty() ? "–" : s;
}

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
            input_name(in.imported->path), plan_format_name(in.imported->plan.format),
            in.imported->sha256.empty() ? std::string() : ", sha256 " + in.imported->sha256,
            spelled(RankOptions::kFromPlan, in.spell)));
    md.line(
        fmt::format("- Criterion `{}`: {}.", criterion_name(r.criterion), criterion_formula(r.criterion)));
    if (criterion_spec(r.criterion).needs.score_files) {
        if (!in.score_is_mean)
            md.line(fmt::format("  Score field: `{}`.", in.score_field));
        else if (in.score_times_counts)
            md.line(
                fmt::format("  Score field: `{}`, a per-token mean, summed over the routed tokens: `{}` × "
                            "`activation_counts` (the default; `{} mean` keeps the mean).",
                            in.score_field, in.score_field, spelled(RankOptions::kScoreAggregate, in.spell)));
        else
            md.line(fmt::format("  Score field: `{}`, a per-token mean, as given (`{} mean`).",
                                in.score_field, spelled(RankOptions::kScoreAggregate, in.spell)));
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
        for (const auto& x : upload_names(d.datasets)) ds += (ds.empty() ? "" : ", ") + x;
        md.line(fmt::format(
            "| {} | `{}` | {} | {} | {} | {} | {} × {} | {} |", d.name, input_name(d.path), d.format,
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
            input_name(in.plan_path), in.plan_k,
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
        100 * r.super_share, r.super_channel_ratio, spelled(RankOptions::kProtect, in.spell)));
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
        const auto [w, wb] = worst_retained_share(r, d);
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
                        r.blocks[r.worst_block], spelled(RankOptions::kConsensus, in.spell)));
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
                    one ? "it" : "them", spelled(SpliceOptions::kDropMtp, in.spell), one ? "it" : "them",
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

}  // namespace gguf_reap
