// gguf-reap plan-width --imatrix NAME=FILE ... --k K -o plan.npz [--model MODEL]: choose the K FFN
// channels every routed expert keeps, from imatrix energies; write the plan and its JSON receipt.
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "gguf_reap/error.h"
#include "gguf_reap/plan_width.h"
#include "gguf_reap/version.h"

namespace gguf_reap::cli {

namespace {

struct PlanWidthCli {
    std::vector<std::string> imatrices;
    std::string model, out, receipt;
    std::string granularity = PlanWidthRequest{}.granularity == Granularity::kBlock ? "block" : "channel";
    int64_t k = 0;
    bool force = false, json = false;
};

std::string share(const nlohmann::ordered_json& v) {
    return v.is_number() ? fmt::format("{:.1f}%", 100 * v.get<double>()) : std::string("-");
}

void print_text(const PlanWidthResult& r) {
    std::cout << fmt::format(
        "kept {} of {} channels for {} experts in each of {} MoE blocks, from {} domain(s)\n", r.k,
        r.native_width, r.expert_count, r.blocks.size(), r.receipt["inputs"].size());
    if (r.group > 1)
        std::cout << fmt::format(
            "block granularity: whole groups of {} channels ({} of {} per expert), so every quant block of "
            "ffn_down_exps is kept or dropped whole\n",
            r.group, r.k / r.group, r.native_width / r.group);
    for (const auto& b : r.receipt["blocks"]) {
        const auto& e = b["energy_retained"];
        std::string line =
            fmt::format("blk.{}: energy retained min {} median {} max {}", b["block"].get<int>(),
                        share(e["min"]), share(e["median"]), share(e["max"]));
        if (b.contains("energy_retained_by_channel")) {
            const auto& c = b["energy_retained_by_channel"];
            line += fmt::format(" (per channel: min {} median {} max {})", share(c["min"]),
                                share(c["median"]), share(c["max"]));
        }
        if (!b["unrouted_experts"].empty())
            line += fmt::format("; never routed (channels 0..{} kept): {}", r.k - 1,
                                fmt::join(b["unrouted_experts"].get<std::vector<int64_t>>(), ", "));
        std::cout << line << "\n";
    }
    if (r.write_error)
        std::cout << fmt::format("not written: {}, {} (below, why)\n", r.plan_path, r.receipt_path);
    else
        std::cout << fmt::format("wrote {}, {}\n", r.plan_path, r.receipt_path);
}

int run_plan_width(const PlanWidthCli& c) {
    PlanWidthRequest o;
    for (const auto& s : c.imatrices) o.imatrices.push_back(parse_domain_spec(s));
    o.k = c.k;
    o.out = c.out;
    o.receipt = c.receipt;
    o.model = c.model;
    o.force = c.force;
    o.granularity = c.granularity == "block" ? Granularity::kBlock : Granularity::kChannel;
    o.tool_version = std::string(GGUF_REAP_TOOL);
    const PlanWidthResult r = ops::plan_width(o, cli_events(false));
    if (c.json) {
        nlohmann::ordered_json j = r.receipt;
        j["files"] = {{"plan", r.plan_path}, {"receipt", r.receipt_path}};
        print_json(j);
    } else {
        print_text(r);
    }
    if (r.write_error) std::rethrow_exception(r.write_error);
    return kExitOk;
}

}  // namespace

Command add_plan_width(CLI::App& app, const GlobalOptions&) {
    auto c = std::make_shared<PlanWidthCli>();
    CLI::App* sub = app.add_subcommand(
        "plan-width", "Choose the FFN channels every routed expert keeps (width pruning) from imatrix files");
    sub->add_option("--imatrix", c->imatrices,
                    "NAME=FILE: an imatrix (.gguf or legacy .dat) for one domain; repeat")
        ->type_name("NAME=FILE")
        ->required();
    sub->add_option("--k", c->k, "Channels kept per expert (the new expert FFN width)")->required();
    sub->add_option("-o,--out", c->out, "The plan (.npz)")->required();
    sub->add_option("--receipt", c->receipt, "The JSON receipt (default: the plan's name with .json)");
    sub->add_option("--model", c->model,
                    "The model (any shard): checks the imatrices and applies the width rules");
    sub->add_option("--granularity", c->granularity,
                    "channel (default): any K channels; block: whole aligned groups of the quant block "
                    "size, which splice cuts byte-exactly in quantized models (needs --model)")
        ->check(CLI::IsMember({"channel", "block"}));
    sub->add_flag("--force", c->force, "Overwrite existing outputs");
    sub->add_flag("--json", c->json, "Print one JSON document on stdout");
    return {sub, [c] { return run_plan_width(*c); }};
}

}  // namespace gguf_reap::cli
