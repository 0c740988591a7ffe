// gguf-reap rank --imatrix NAME=FILE ... (--keep N | --prune N | --ratio R | --fit BUDGET) --out DIR: score
// experts from imatrix files and write keeplist.json, ranking.npz and REAP-KEEPLIST-RECEIPT.md.
#include <algorithm>
#include <cmath>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/options.h"
#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "ops/rank/rank_lodo.h"
#include "ops/rank/rank_steps.h"
#include "services/budget_search.h"

namespace gguf_reap::cli {

namespace {

struct RankCli {
    std::vector<std::string> imatrices, scores, protect;
    std::string model, calibration, plan, score_field, score_aggregate = "sum", from_plan, export_format, out,
                                                       ratio, super_share, fit;
    std::string criterion = criterion_name(RankOptions{}.criterion);
    std::string consensus = consensus_name(RankOptions{}.consensus);
    std::optional<int64_t> keep, prune;
    double super_channel_ratio = RankOptions{}.super_channel_ratio;
    bool json = false, force = false, no_hash = false, strict = false;
    int threads = 0;
};

// "0.25", "25%" → 0.25.
double parse_fraction(const std::string& s, const char* option) {
    try {
        size_t used = 0;
        const bool percent = !s.empty() && s.back() == '%';
        const std::string num = percent ? s.substr(0, s.size() - 1) : s;
        const double v = std::stod(num, &used);
        if (used != num.size() || !std::isfinite(v)) throw std::invalid_argument(s);
        return percent ? v / 100 : v;
    } catch (const std::exception&) {
        throw UsageError(fmt::format("{} {}: expected a fraction such as 0.25 or 25%", option, s));
    }
}

RankOptions to_options(const RankCli& c) {
    RankOptions o;
    for (const auto& s : c.imatrices) o.imatrices.push_back(parse_domain_spec(s));
    for (const auto& s : c.scores) o.score_files.push_back(parse_domain_spec(s));
    o.model = c.model;
    o.calibration = c.calibration;
    o.neuron_plan = c.plan;
    o.score_field = c.score_field;
    o.score_aggregate = c.score_aggregate;
    auto cr = parse_criterion(c.criterion);
    if (!cr)
        throw UsageError(
            fmt::format("--criterion {}: choose {}", c.criterion, criterion_choices(", ", " or ")));
    o.criterion = *cr;
    auto cs = parse_consensus(c.consensus);
    if (!cs)
        throw UsageError(
            fmt::format("--consensus {}: choose {}", c.consensus, consensus_choices(", ", " or ")));
    o.consensus = *cs;
    o.keep = c.keep;
    o.prune = c.prune;
    if (!c.ratio.empty()) {
        o.ratio = parse_fraction(c.ratio, "--ratio");
        // Echoed as given: "--ratio 150%", not the 1.5 it was read as.
        if (!(*o.ratio > 0 && *o.ratio < 1))
            throw UsageError(fmt::format(
                "--ratio {}: must be a fraction of experts to prune, above 0 and below 1 (e.g. 0.25 or 25%)",
                c.ratio));
    }
    if (!c.fit.empty()) o.fit = parse_budget(c.fit);
    if (!c.super_share.empty()) {
        const double v = parse_fraction(c.super_share, "--super-share");
        if (!(v > 0 && v <= 1))
            throw UsageError(fmt::format("--super-share {}: must be in (0, 1]", c.super_share));
        o.super_share = v;
    }
    if (!(c.super_channel_ratio > 1)) throw UsageError("--super-channel-ratio must be greater than 1");
    o.super_channel_ratio = c.super_channel_ratio;
    for (const auto& arg : c.protect) {
        // Accept repeated options and comma-separated lists.
        size_t start = 0;
        while (start <= arg.size()) {
            const size_t comma = arg.find(',', start);
            const std::string one =
                arg.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            auto r = parse_expert_ref(one);
            if (!r) throw UsageError(fmt::format("--protect {}: expected BLOCK:EXPERT, e.g. 2:6", one));
            o.protect.push_back(*r);
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    o.hash_inputs = !c.no_hash;
    o.strict = c.strict;
    o.from_plan = c.from_plan;
    if (!c.export_format.empty()) o.export_format = parse_plan_format(c.export_format);
    o.threads = c.threads;
    return o;
}

void print_text(const ops::RankResult& o) {
    const RankInput& in = o.input;
    const RankDecision& r = o.result;
    std::cout << fmt::format(
        "ranked {} MoE blocks × {} experts from {} domain(s) ({}), criterion {}, consensus {}\n",
        r.blocks.size(), r.expert_count, in.domains.size(), fmt::join(r.domain_names, ", "),
        criterion_name(r.criterion), consensus_name(r.consensus));
    std::cout << fmt::format("keep {} of {} per block ({}): {} pruned per block\n", r.n_keep, r.expert_count,
                             option_message(rule_message(r)), r.expert_count - r.n_keep);
    // Counts, not lists: a Kimi-K3-shaped model has 92 MoE blocks; the per-block lists are in the
    // receipt and in --json.
    if (r.dead_experts.empty()) {
        std::cout << "dead experts: none\n";
    } else {
        size_t blocks = 0, pruned = 0, lo = SIZE_MAX, hi = 0;
        for (const auto& kb : r.keeplist.blocks) {
            if (kb.dead.empty()) continue;
            ++blocks;
            lo = std::min(lo, kb.dead.size());
            hi = std::max(hi, kb.dead.size());
            for (int64_t e : kb.dead) pruned += std::binary_search(kb.prune.begin(), kb.prune.end(), e);
        }
        std::cout << fmt::format(
            "dead experts: {} in {} of {} blocks ({} per block), {}\n", r.dead_experts.size(), blocks,
            r.blocks.size(), lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi),
            pruned == r.dead_experts.size() ? "all pruned" : fmt::format("{} of them pruned", pruned));
    }
    // At most three protected experts by name, each with the one fact that protected it.
    const auto& ps = r.protected_experts;
    std::vector<std::string> named;
    for (size_t i = 0; i < std::min<size_t>(ps.size(), 3); ++i) {
        const SuperExpert& p = ps[i];
        const std::string why =
            p.by_option  ? "--protect"
            : p.by_share ? fmt::format("{:.1f} % of the block's {} in {}", 100 * p.share,
                                       p.share_is_mean ? "per-token energy" : "energy", p.share_domain)
                         : fmt::format("hottest channel {:.0f}× the block's median", p.channel_ratio);
        named.push_back(fmt::format("blk.{} expert {} ({})", p.block, p.expert, why));
    }
    if (ps.empty())
        std::cout << "protected experts: none\n";
    else
        std::cout << fmt::format(
            "protected experts: {} kept: {}{}\n", ps.size(), fmt::join(named, "; "),
            ps.size() > named.size() ? fmt::format("; {} more", ps.size() - named.size()) : "");
    std::cout << "safety margin: " << safety_margin_sentence(r) << "\n";
    std::cout << blind_spot_summary(in, r) << "\n";
    if (o.write_error)
        std::cout << fmt::format("not written: {}, {}, {} (below, why)\n", o.keeplist_path, o.ranking_path,
                                 o.receipt_path);
    else
        std::cout << fmt::format("wrote {}, {}, {} (per-block lists in the receipt)\n", o.keeplist_path,
                                 o.ranking_path, o.receipt_path);
    if (!o.exported_path.empty())
        std::cout << fmt::format("exported {} ({} format)\n", o.exported_path,
                                 plan_format_name(*o.exported_format));
}

int run_rank(const RankCli& c) {
    ops::RankRequest q;
    q.options = to_options(c);
    q.out_dir = c.out;
    q.force = c.force;
    const ops::RankResult o = ops::rank(q, cli_events(false));
    if (o.result.fit && !o.result.fit->above)
        spdlog::warn("{}; keeplist.json keeps every expert", option_message(fit_sentence(*o.result.fit)));
    if (c.json) {
        nlohmann::ordered_json j = rank_summary_json(o.input, o.result);
        j["files"] = {
            {"keeplist", o.keeplist_path}, {"ranking", o.ranking_path}, {"receipt", o.receipt_path}};
        if (!o.exported_path.empty()) j["files"]["exported_plan"] = o.exported_path;
        print_json(j);
    } else {
        print_text(o);
    }
    if (o.write_error) std::rethrow_exception(o.write_error);
    return kExitOk;
}

}  // namespace

Command add_rank(CLI::App& app, const GlobalOptions&) {
    auto c = std::make_shared<RankCli>();
    CLI::App* sub =
        app.add_subcommand("rank", "Score routed experts from imatrix files and write a keeplist");
    sub->add_option("--imatrix", c->imatrices,
                    "NAME=FILE: an imatrix (.gguf or legacy .dat) for one domain; repeat")
        ->type_name("NAME=FILE");
    sub->add_option("--scores", c->scores,
                    "NAME=FILE: external per-expert scores (JSON) for --criterion external")
        ->type_name("NAME=FILE");
    sub->add_option("--model", c->model,
                    "The model (any shard): checks the imatrices and records its identity");
    sub->add_option("--calibration", c->calibration,
                    "gguf-reap calibrate's calibrate.json (default: the one beside each imatrix, if any)");
    sub->add_option("--criterion", c->criterion, criterion_choices(" | ", " | "))->capture_default_str();
    sub->add_option("--consensus", c->consensus, consensus_choices(" | ", " | "))->capture_default_str();
    sub->add_option("--keep", c->keep, "Experts kept in every MoE block");
    sub->add_option("--prune", c->prune, "Experts pruned in every MoE block");
    sub->add_option("--ratio", c->ratio, "Fraction of experts pruned in every block (0.25 or 25%)");
    sub->add_option(
           "--fit", c->fit,
           "The most experts that fit a budget: size=277GB, or memory=288GiB[,ctx=N][,overhead=SIZE][,tp=N] "
           "(needs --model)")
        ->type_name("BUDGET");
    sub->add_option("--protect", c->protect, "BLOCK:EXPERT always kept; repeat or comma-separate");
    sub->add_option("--neuron-plan", c->plan,
                    "Width-pruning plan (.npz): restrict energies to the kept channels");
    sub->add_option("--score-field", c->score_field,
                    "External scores: the JSON field (default reap, else score)");
    sub->add_option("--score-aggregate", c->score_aggregate,
                    "External per-token-mean fields (reap, ean_mean, avg_gate_weight): sum (default: mean "
                    "× activation_counts) or mean (the REAP paper's form)")
        ->check(CLI::IsMember({"sum", "mean"}));
    sub->add_option("--super-share", c->super_share,
                    "Super-expert share-of-energy threshold (default 10/E, clamped to [0.25, 0.5])");
    sub->add_option("--super-channel-ratio", c->super_channel_ratio,
                    "Super-expert test: hottest channel vs the block median")
        ->capture_default_str();
    sub->add_option("-o,--out", c->out, "Output directory for keeplist.json, ranking.npz and the receipt")
        ->required();
    sub->add_flag("--force", c->force, "Overwrite existing outputs");
    sub->add_flag("--no-hash", c->no_hash, "Do not compute sha256 of the inputs (recorded as not hashed)");
    sub->add_option("--from-plan", c->from_plan,
                    "Keep what another tool's plan keeps (hipfire or keep-map reap_plan.json); the inputs "
                    "still score it and check it");
    sub->add_option("--export", c->export_format,
                    "Also write the keeplist as another tool's plan, DIR/reap_plan.json: hipfire or keepmap")
        ->check(CLI::IsMember({"hipfire", "keepmap"}));
    sub->add_flag("--strict", c->strict,
                  "Refuse imatrices whose counts or metadata contradict each other (exit 2) instead of "
                  "warning");
    sub->add_option("--threads", c->threads, "Threads (default: all cores)");
    sub->add_flag("--json", c->json, "Print one JSON document on stdout");
    return {sub, [c] { return run_rank(*c); }};
}

}  // namespace gguf_reap::cli
