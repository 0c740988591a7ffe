// gguf-reap estimate MODEL [--keeplist K] [--neuron-plan P] [--tp LIST] [--overhead SIZE] [--gpu-mem SIZE]
// [--ctx N] [--json]: size, parameters, decode bytes, per-rank weights and fit, before and after pruning.
// With --fit BUDGET / --sweep [--svg FILE] [--imatrix FILE ...]: the K a budget allows, the table over K.
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/options.h"
#include "gguf_reap/error.h"
#include "gguf_reap/estimate.h"
#include "gguf_reap/estimate_fit.h"
#include "gguf_reap/version.h"
#include "io/units.h"
#include "services/budget_search.h"

namespace gguf_reap::cli {

namespace {

struct EstimateCli {
    std::string model;
    std::string keeplist;
    std::string neuron_plan;
    bool drop_mtp = false;
    DeploymentOptions deploy;
    bool json = false;
    std::string fit, svg;
    bool sweep = false;
    std::vector<std::string> imatrices;
};

nlohmann::ordered_json figures_json(const ModelFigures& f) {
    return {{"expert_count", f.expert_count},
            {"expert_width", f.expert_width},
            {"file_bytes", f.file_bytes},
            {"file_bytes_exact", f.file_bytes_exact},
            {"file_bytes_slack", f.file_bytes_slack},
            {"file_human", human_bytes(f.file_bytes)},
            {"tensor_bytes", f.tensor_bytes},
            {"parameters", f.parameters},
            {"active_parameters", f.active_parameters},
            {"decode_bytes_per_token",
             {{"dense", f.decode_dense},
              {"router", f.decode_router},
              {"experts", f.decode_experts},
              {"total", f.decode_total()},
              {"total_human", human_bytes(f.decode_total())}}},
            {"replicated_bytes", f.replicated_bytes},
            {"nextn_bytes", f.nextn_bytes}};
}

nlohmann::ordered_json fit_json(const FitRow& r, uint64_t gpu_mem) {
    nlohmann::ordered_json j = {{"weights", r.weights},   {"weights_human", human_bytes(r.weights)},
                                {"kv_cache", r.kv_cache}, {"overhead", r.overhead},
                                {"need", r.need()},       {"need_human", human_bytes(r.need())}};
    j["fits"] = gpu_mem ? nlohmann::ordered_json(r.fits(gpu_mem)) : nlohmann::ordered_json(nullptr);
    j["headroom"] = gpu_mem ? nlohmann::ordered_json(r.headroom(gpu_mem)) : nlohmann::ordered_json(nullptr);
    return j;
}

nlohmann::ordered_json estimate_json(const EstimateResult& e, const EstimateCli& c) {
    using nlohmann::ordered_json;
    ordered_json j;
    j["model"] = e.model_path;
    j["arch"] = e.arch;
    j["moe_blocks"] = e.moe_blocks;
    j["nextn_blocks"] = e.nextn_blocks;
    j["expert_used_count"] = e.expert_used_count;
    j["tied_embeddings"] = e.tied_embeddings;
    j["keeplist"] = c.keeplist.empty() ? ordered_json(nullptr) : ordered_json(c.keeplist);
    j["keeplist_note"] = e.keeplist_note.empty() ? ordered_json(nullptr) : ordered_json(e.keeplist_note);
    j["neuron_plan"] = c.neuron_plan.empty() ? ordered_json(nullptr) : ordered_json(c.neuron_plan);
    j["overhead"] = e.deployment.overhead;
    j["gpu_mem"] = e.deployment.gpu_mem ? ordered_json(e.deployment.gpu_mem) : ordered_json(nullptr);
    j["ctx"] = e.deployment.ctx;
    j["before"] = figures_json(e.before);
    j["after"] = e.after ? figures_json(*e.after) : ordered_json(nullptr);
    j["after_requantised"] = e.after_requantised;
    ordered_json kv = {{"kind", kv_kind_name(e.kv.kind)},
                       {"bytes_per_token", e.kv.bytes_per_token},
                       {"attention_layers", e.kv.attention_layers},
                       {"stateful_layers", e.kv.stateful_layers},
                       {"cache_type", e.kv.types.default_types() ? "F16" : "per type"},
                       {"cache_type_k", kv_cache_type_name(e.kv.types.k)},
                       {"cache_type_v", kv_cache_type_name(e.kv.types.v)}};
    if (e.kv.kind == KvKind::kMla) {
        kv["kv_lora_rank"] = e.kv.kv_lora_rank;
        kv["rope_dims"] = e.kv.rope_dims;
    } else if (e.kv.kind == KvKind::kStandard) {
        kv["heads_kv"] = e.kv.heads_kv;
        kv["key_length"] = e.kv.key_length;
        kv["value_length"] = e.kv.value_length;
    }
    j["kv_cache"] = kv;
    ordered_json tp = ordered_json::array();
    for (size_t i = 0; i < e.tp.size(); ++i) {
        ordered_json row = {{"tp", e.tp[i]}, {"kv_bytes_per_token", e.kv.bytes_per_token_per_rank(e.tp[i])}};
        row["before"] = fit_json(e.fits_before[i], e.deployment.gpu_mem);
        row["after"] = e.after ? fit_json(e.fits_after[i], e.deployment.gpu_mem) : ordered_json(nullptr);
        tp.push_back(row);
    }
    j["tensor_parallel"] = tp;
    const auto split_json = [&](const HostSplit& h) {
        return ordered_json{
            {"gpu",
             {{"weights", h.gpu_weights},
              {"kv_cache", h.gpu_kv},
              {"overhead", h.gpu_overhead},
              {"total", h.gpu_total()},
              {"fits", e.deployment.gpu_mem ? ordered_json(h.gpu_total() <= e.deployment.gpu_mem)
                                            : ordered_json(nullptr)}}},
            {"ram", {{"weights", h.ram_weights}, {"experts", h.ram_experts}}}};
    };
    j["one_gpu"] = {{"offload", e.deployment.offload.any() ? ordered_json(e.deployment.offload.flag())
                                                           : ordered_json(nullptr)},
                    {"before", split_json(e.split_before)},
                    {"after", e.split_after ? split_json(*e.split_after) : ordered_json(nullptr)}};
    return j;
}

// The KV cache per token, as llama.cpp sizes it for these cache types.
void print_kv_cache(const EstimateResult& e) {
    const bool f16 = e.kv.types.default_types();
    std::cout << fmt::format("\nKV cache per token ({}): ",
                             f16 ? std::string("F16")
                                 : fmt::format("-ctk {} -ctv {}", kv_cache_type_name(e.kv.types.k),
                                               kv_cache_type_name(e.kv.types.v)));
    switch (e.kv.kind) {
        case KvKind::kMla:
            std::cout << fmt::format(
                "{} = (kv_lora_rank {} + rope {}) × {} MLA layers{}; every TP rank "
                "holds all of it\n",
                human_bytes(e.kv.bytes_per_token), e.kv.kv_lora_rank, e.kv.rope_dims, e.kv.attention_layers,
                f16 ? " × 2 bytes" : fmt::format(" in {}", kv_cache_type_name(e.kv.types.k)));
            break;
        case KvKind::kStandard:
            std::cout << fmt::format(
                "{} over {} attention layers ({} KV heads × (key {} + value {}){} in the first)\n",
                human_bytes(e.kv.bytes_per_token), e.kv.attention_layers, e.kv.heads_kv, e.kv.key_length,
                e.kv.value_length, f16 ? " × 2 bytes" : " elements in the cache types");
            break;
        case KvKind::kNone:
            std::cout << "none found (no attention keys)\n";
            break;
    }
    if (e.kv.stateful_layers)
        std::cout << fmt::format(
            "  {} layer(s) without a KV cache: their recurrent state is constant per "
            "sequence and not counted\n",
            e.kv.stateful_layers);
}

// The first case: one GPU and the host's RAM, as llama.cpp places the model.
void print_one_gpu(const EstimateResult& e) {
    const bool a = e.after.has_value();
    const auto split_cell = [&](const HostSplit& h) {
        std::string s = human_bytes(h.gpu_total());
        if (e.deployment.gpu_mem)
            s += h.gpu_total() <= e.deployment.gpu_mem
                     ? fmt::format(" fits, {} free", human_bytes(e.deployment.gpu_mem - h.gpu_total()))
                     : fmt::format(" NO, {} short", human_bytes(h.gpu_total() - e.deployment.gpu_mem));
        return s;
    };
    std::cout << fmt::format(
        "\none GPU and RAM, as llama.cpp places it (-ngl 99{}): GPU = weights + KV cache "
        "({} tokens) + overhead {}{}\n",
        e.deployment.offload.any() ? " " + e.deployment.offload.flag() : "", with_commas(e.deployment.ctx),
        human_bytes(e.deployment.overhead),
        e.deployment.gpu_mem ? fmt::format(", against {}", human_bytes(e.deployment.gpu_mem)) : "");
    std::cout << fmt::format("  {:<10} {:>34}", "", "before");
    if (a) std::cout << fmt::format(" {:>34}", "after");
    std::cout << "\n";
    const auto split_row = [&](const char* what, const std::string& before, const std::string& after) {
        std::cout << fmt::format("  {:<10} {:>34}", what, before);
        if (a) std::cout << fmt::format(" {:>34}", after);
        std::cout << "\n";
    };
    split_row("GPU", split_cell(e.split_before), a ? split_cell(*e.split_after) : "");
    split_row("  weights", human_bytes(e.split_before.gpu_weights),
              a ? human_bytes(e.split_after->gpu_weights) : "");
    split_row("  KV cache", human_bytes(e.split_before.gpu_kv), a ? human_bytes(e.split_after->gpu_kv) : "");
    split_row("RAM", human_bytes(e.split_before.ram_weights),
              a ? human_bytes(e.split_after->ram_weights) : "");
    split_row("  experts", human_bytes(e.split_before.ram_experts),
              a ? human_bytes(e.split_after->ram_experts) : "");
}

void print_text(const EstimateResult& e) {
    const bool a = e.after.has_value();
    const ModelFigures& b = e.before;
    std::cout << fmt::format("model        {}\n", e.model_path);
    std::cout << fmt::format(
        "architecture {}; {} MoE blocks, {} experts ({} used per token), expert width {}",
        e.arch.empty() ? "(none)" : e.arch, e.moe_blocks, b.expert_count, e.expert_used_count,
        b.expert_width);
    std::cout << fmt::format(
        "{}\n", e.nextn_blocks ? fmt::format("; {} MTP block(s), not in decode figures", e.nextn_blocks)
                               : std::string());
    if (a)
        std::cout << fmt::format("pruned to    {} experts per block, expert width {}\n",
                                 e.after->expert_count, e.after->expert_width);
    if (!e.keeplist_note.empty()) std::cout << fmt::format("keeplist     {}\n", e.keeplist_note);

    const auto line = [&](const std::string& what, const std::string& before, const std::string& after) {
        std::cout << fmt::format("  {:<24} {:>22}", what, before);
        if (a) std::cout << fmt::format(" {:>22}", after);
        std::cout << "\n";
    };
    const auto file = [](const ModelFigures& f) {
        return human_bytes(f.file_bytes) +
               (f.file_bytes_exact ? "" : fmt::format(" ±{}", human_bytes(f.file_bytes_slack)));
    };
    std::cout << "\n";
    line("", "before", "after");
    line("size on disk", file(b), a ? file(*e.after) : "");
    line("  tensor data", human_bytes(b.tensor_bytes), a ? human_bytes(e.after->tensor_bytes) : "");
    line("parameters", human_count(b.parameters), a ? human_count(e.after->parameters) : "");
    line("  active per token", human_count(b.active_parameters),
         a ? human_count(e.after->active_parameters) : "");
    line("decode bytes per token", human_bytes(b.decode_total()),
         a ? human_bytes(e.after->decode_total()) : "");
    line("  dense", human_bytes(b.decode_dense), a ? human_bytes(e.after->decode_dense) : "");
    line("  router", human_bytes(b.decode_router), a ? human_bytes(e.after->decode_router) : "");
    line("  experts", human_bytes(b.decode_experts), a ? human_bytes(e.after->decode_experts) : "");
    line("replicated per rank", human_bytes(b.replicated_bytes),
         a ? human_bytes(e.after->replicated_bytes) : "");

    print_kv_cache(e);
    print_one_gpu(e);

    std::cout << fmt::format(
        "\nper GPU at tensor parallel N: weights + KV cache ({} tokens) + overhead {}{}\n",
        with_commas(e.deployment.ctx), human_bytes(e.deployment.overhead),
        e.deployment.gpu_mem ? fmt::format(", against {} per GPU", human_bytes(e.deployment.gpu_mem)) : "");
    const auto cell = [&](const FitRow& r) {
        std::string s = human_bytes(r.need());
        if (e.deployment.gpu_mem)
            s += r.fits(e.deployment.gpu_mem)
                     ? fmt::format(" fits, {} free",
                                   human_bytes(static_cast<uint64_t>(r.headroom(e.deployment.gpu_mem))))
                     : fmt::format(" NO, {} short",
                                   human_bytes(static_cast<uint64_t>(-r.headroom(e.deployment.gpu_mem))));
        return s;
    };
    std::cout << fmt::format("  {:<10} {:>34}", "TP", "before");
    if (a) std::cout << fmt::format(" {:>34}", "after");
    std::cout << "\n";
    for (size_t i = 0; i < e.tp.size(); ++i) {
        std::cout << fmt::format("  {:<10} {:>34}", e.tp[i] == 1 ? "1 (single)" : std::to_string(e.tp[i]),
                                 cell(e.fits_before[i]));
        if (a) std::cout << fmt::format(" {:>34}", cell(e.fits_after[i]));
        std::cout << "\n";
    }
}

nlohmann::ordered_json estimate_fit_json(const EstimateFitResult& e) {
    using nlohmann::ordered_json;
    ordered_json j;
    j["model"] = e.model_path;
    j["arch"] = e.arch;
    j["expert_count"] = e.expert_count;
    j["dead_only"] = e.dead_only ? ordered_json(*e.dead_only) : ordered_json(nullptr);
    j["fit"] = e.fit ? fit_json(*e.fit) : ordered_json(nullptr);
    if (e.sweep.empty()) {
        j["sweep"] = nullptr;
        return j;
    }
    ordered_json rows = ordered_json::array();
    for (const SweepRow& r : e.sweep) {
        ordered_json gpus = ordered_json::array();
        for (const FitRow& g : r.per_gpu)
            gpus.push_back({{"tp", g.tp},
                            {"weights", g.weights},
                            {"kv_cache", g.kv_cache},
                            {"overhead", g.overhead},
                            {"need", g.need()}});
        rows.push_back({{"k", r.k},
                        {"file_bytes", r.figures.file_bytes},
                        {"file_bytes_exact", r.figures.file_bytes_exact},
                        {"parameters", r.figures.parameters},
                        {"decode_bytes_per_token", r.figures.decode_total()},
                        {"per_gpu", gpus}});
    }
    j["sweep"] = rows;
    return j;
}

void print_fit_text(const EstimateFitResult& e, const EstimateFitRequest& q) {
    std::cout << fmt::format("model        {}\n", e.model_path);
    std::cout << fmt::format("architecture {}; {} experts per MoE block\n", e.arch, e.expert_count);
    if (e.dead_only)
        std::cout << fmt::format(
            "dead-only    K = {}: the most experts kept when only dead ones are pruned ({})\n", *e.dead_only,
            e.rules.max_why.empty() ? "no dead experts" : e.rules.max_why);
    if (e.fit) std::cout << option_message(fit_sentence(*e.fit)) << "\n";
    if (e.sweep.empty()) return;
    std::cout << fmt::format("\nper GPU: weights + KV cache ({} tokens) + overhead {}\n",
                             with_commas(q.deployment.ctx), human_bytes(q.deployment.overhead));
    std::cout << fmt::format("  {:>6} {:>14} {:>24} {:>14}", "K", "size on disk", "parameters",
                             "decode/token");
    for (uint64_t n : e.tp) std::cout << fmt::format(" {:>12}", fmt::format("GPU at TP {}", n));
    std::cout << "\n";
    for (const SweepRow& r : e.sweep) {
        std::cout << fmt::format("  {:>6} {:>14} {:>24} {:>14}", r.k, human_bytes(r.figures.file_bytes),
                                 human_count(r.figures.parameters), human_bytes(r.figures.decode_total()));
        for (const FitRow& g : r.per_gpu) std::cout << fmt::format(" {:>12}", human_bytes(g.need()));
        std::cout << "\n";
    }
    if (!q.svg.empty()) std::cout << fmt::format("wrote {}\n", q.svg);
}

// --fit / --sweep: which K a budget allows, and the table over K.
int run_estimate_fit(const EstimateCli& c) {
    if (!c.keeplist.empty()) throw UsageError("--fit and --sweep choose K themselves: give no --keeplist");
    const Deployment deployment = deployment_option(c.deploy);
    if (deployment.offload.any() || !deployment.cache_types.default_types())
        throw UsageError(
            "--fit and --sweep count memory per GPU at tensor parallel N with an F16 cache: --cpu-moe, "
            "--n-cpu-moe, -ctk and -ctv are for the before/after tables");
    if (!c.svg.empty() && !c.sweep) throw UsageError("--svg draws the sweep: give --sweep too");
    EstimateFitRequest q;
    q.model = c.model;
    q.neuron_plan = c.neuron_plan;
    q.drop_mtp = c.drop_mtp;
    q.imatrices = c.imatrices;
    if (!c.fit.empty()) q.fit = parse_budget(c.fit);
    q.sweep = c.sweep;
    q.deployment = deployment;
    // A memory budget counts the KV cache and the overhead as the sweep does: --ctx and --overhead
    // apply to it unless the budget names its own (and the two must then agree).
    if (q.fit && q.fit->kind == BudgetKind::kMemory) {
        const auto take = [&](const char* key, uint64_t& budget_value, uint64_t option_value,
                              const char* option) {
            if (q.fit->text.find(std::string(key) + "=") == std::string::npos)
                budget_value = option_value;
            else if (option_value && option_value != budget_value)
                throw UsageError(fmt::format("--fit '{}' says {}={}, but {} says {}: give it once",
                                             q.fit->text, key, budget_value, option, option_value));
        };
        take("ctx", q.fit->ctx, q.deployment.ctx, "--ctx");
        take("overhead", q.fit->overhead, q.deployment.overhead, "--overhead");
    }
    q.svg = c.svg;
    q.tool_version = std::string(GGUF_REAP_TOOL);
    const EstimateFitResult e = ops::estimate_fit(q);
    if (e.write_error) q.svg.clear();  // not "wrote FILE": the error below says why
    if (e.fit && !e.fit->above) spdlog::warn("{}", option_message(fit_sentence(*e.fit)));
    if (c.json)
        print_json(estimate_fit_json(e));
    else
        print_fit_text(e, q);
    if (e.write_error) std::rethrow_exception(e.write_error);
    return kExitOk;
}

int run_estimate(const EstimateCli& c) {
    if (!c.fit.empty() || c.sweep) return run_estimate_fit(c);
    if (!c.svg.empty()) throw UsageError("--svg draws the sweep: give --sweep too");
    if (!c.imatrices.empty()) throw UsageError("--imatrix bounds K for --fit and --sweep: give one of them");
    // Options first, so that a typo fails before a large model is opened.
    EstimateRequest in;
    in.model = c.model;
    in.keeplist_path = c.keeplist;
    in.neuron_plan_path = c.neuron_plan;
    in.drop_mtp = c.drop_mtp;
    in.deployment = deployment_option(c.deploy);
    in.tool_version = std::string(GGUF_REAP_TOOL);

    // Open, read the keeplist / plan as splice would, compute, report.
    const EstimateResult e = ops::estimate(in);
    if (c.json)
        print_json(estimate_json(e, c));
    else
        print_text(e);
    return kExitOk;
}

}  // namespace

Command add_estimate(CLI::App& app, const GlobalOptions&) {
    auto o = std::make_shared<EstimateCli>();
    CLI::App* sub = app.add_subcommand(
        "estimate", "Size, parameters, decode bytes, per-GPU memory and KV cache, before and after pruning");
    sub->add_option("MODEL", o->model, "The model: an unsplit GGUF or any shard of a split set")->required();
    sub->add_option("--keeplist", o->keeplist, "keeplist.json (or a {\"drop\": ...} spec): experts kept");
    sub->add_option("--neuron-plan", o->neuron_plan, "plan.npz from `plan-width`: expert FFN channels kept");
    sub->add_flag("--drop-mtp", o->drop_mtp, "The after figures of `splice --drop-mtp` (no nextn blocks)");
    add_deployment_options(*sub, o->deploy);
    sub->add_option("--fit", o->fit,
                    "The most experts that fit: size=277GB, or memory=288GiB[,ctx=N][,overhead=SIZE][,tp=N]")
        ->type_name("BUDGET");
    sub->add_flag("--sweep", o->sweep, "A table over K: every 1/16 of the experts that is legal");
    sub->add_option("--svg", o->svg, "With --sweep: also draw it (size and per-GPU memory against K)");
    sub->add_option("--imatrix", o->imatrices,
                    "NAME=FILE or FILE, repeatable: dead experts (rank's rule) bound K for --fit and --sweep")
        ->type_name("FILE");
    sub->add_flag("--json", o->json, "Print one JSON document on stdout");
    return {sub, [o] { return run_estimate(*o); }};
}

}  // namespace gguf_reap::cli
