// gguf-reap eval --source MODEL OUT [OUT...] --text NAME=FILE [--text NAME=FILE...] [--reference MODEL]
// [--llama-bin DIR]
// [--llama-args ARGS] [--ctx N] [--chunks N] [--threads N] [--cache-dir DIR] [--smoke-prompt TEXT
// [--smoke-tokens N]]
// [-o eval.json] [--json]: what pruning cost, per kind of text, measured by llama.cpp (docs/eval.md).
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/environment.h"
#include "gguf_reap/error.h"
#include "gguf_reap/eval.h"
#include "gguf_reap/version.h"
#include "io/progress.h"
#include "io/units.h"
#include "model/hub_local.h"
#include "model/vocab_text.h"
#include "services/eval_report.h"
#include "services/llama_cpp/llama_tools.h"

namespace gguf_reap::cli {

namespace {

// The options that are request fields as they are go straight into the request, whose defaults are
// theirs (gguf_reap/eval.h); the rest are parsed from their text.
struct EvalCli {
    EvalRequest q;
    std::vector<std::string> texts, prompts, temps;
    std::optional<std::string> llama_args;
    std::string samples, seed;
    std::string ctx = std::to_string(EvalRequest{}.ctx);
    std::string chunks;
    bool json = false;
};

// On a terminal: which run, which chunk, on one line redrawn in place. Elsewhere only warnings (and
// errors) reach stderr.
Events eval_events(const GlobalOptions& g) {
    Events e;
    e.on_warn = [](const std::string& m) { spdlog::warn("{}", m); };
    if (g.quiet || !stderr_is_terminal()) return e;
    e.on_info = [](const std::string& m) { spdlog::info("{}", m); };
    auto state = std::make_shared<std::pair<std::string, std::pair<uint64_t, uint64_t>>>();
    // The behaviour runs count prompts (their label starts "generating"), the llama.cpp runs chunks.
    const auto unit = [state] { return state->first.rfind("generating", 0) == 0 ? "prompt" : "chunk"; };
    e.on_progress_begin = [state, unit](std::string_view label, uint64_t total) {
        *state = {std::string(label), {0, total}};
        std::fprintf(stderr, "\r%s: %s 0/%llu\033[K", state->first.c_str(), unit(),
                     static_cast<unsigned long long>(total));
    };
    e.on_progress = [state, unit](uint64_t n) {
        state->second.first += n;
        std::fprintf(stderr, "\r%s: %s %llu/%llu\033[K", state->first.c_str(), unit(),
                     static_cast<unsigned long long>(state->second.first),
                     static_cast<unsigned long long>(state->second.second));
    };
    e.on_progress_end = [] { std::fputs("\r\033[K", stderr); };
    return e;
}

std::string fixed(double v, int digits) {
    return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : std::string("-");
}

std::string joined(const SmokeGeneration& g) {
    std::string s;
    for (const SmokeToken& t : g.tokens) s += t.text;
    return quoted_text(s);
}

void print_smoke(const EvalSmoke& s) {
    std::cout << fmt::format("\nsmoke   {} greedy tokens after {} ({})\n", s.tokens_requested,
                             quoted_text(s.prompt), llama_cpp::greedy_words());
    std::cout << fmt::format("  source  {} tokens: {}\n", s.source.tokens.size(), joined(s.source));
    for (const EvalSmokeOutput& o : s.outputs) {
        std::string line =
            fmt::format("  {}  {}/{} identical", o.output, o.identical, s.source.tokens.size());
        if (o.first_diff) {
            const auto i = static_cast<size_t>(*o.first_diff);
            const auto at = [&](const SmokeGeneration& g) {
                return i < g.tokens.size() ? quoted_text(g.tokens[i].text) : std::string("(ended)");
            };
            line += fmt::format(", first difference at token {}: {} (source) → {}", i + 1, at(s.source),
                                at(o.generation));
        }
        std::cout << line << "\n";
    }
}

std::string rate_cell(const EvalRate& x) {
    return fmt::format("{}/{} {:.1f}% [{:.1f}, {:.1f}]", x.k, x.n, 100 * x.rate, 100 * x.lo, 100 * x.hi);
}

// A block per (panel, temperature): each model's loops, natural ends and errors (with Wilson 95 %
// intervals), mean tokens and distinct-4, the source first.
void print_behaviour(const EvalResult& r) {
    for (const EvalPanelFacts& p : r.panels)
        for (const double t : r.temperatures) {
            if (t == 0)
                std::cout << fmt::format(
                    "\nbehaviour  {}: {} prompts, up to {} greedy tokens each ({}, {} slots{})\n", p.name,
                    p.prompts, r.gen_tokens, llama_tool_name(LlamaTool::server), r.parallel,
                    r.chat ? ", chat template" : "");
            else
                std::cout << fmt::format(
                    "\nbehaviour  {} at temperature {}: {} prompts × {} sample{} (seeds from --seed {}), up "
                    "to {} "
                    "tokens each ({}, {} slots{})\n",
                    p.name, t, p.prompts, r.samples, r.samples == 1 ? "" : "s", r.seed, r.gen_tokens,
                    llama_tool_name(LlamaTool::server), r.parallel, r.chat ? ", chat template" : "");
            std::cout << fmt::format("{:<40} {:>28} {:>28} {:>28} {:>8} {:>10}\n", "model", "loops",
                                     "natural ends", "errors", "tokens", "distinct-4");
            for (const EvalBehaviour& b : r.behaviour) {
                if (b.panel != p.name || b.temperature != t) continue;
                const std::string m =
                    b.model.size() > 40 ? "…" + b.model.substr(b.model.size() - 39) : b.model;
                std::cout << fmt::format("{:<40} {:>28} {:>28} {:>28} {:>8.1f} {:>10}\n", m,
                                         rate_cell(b.loops), rate_cell(b.natural_ends), rate_cell(b.errors),
                                         b.mean_tokens,
                                         b.distinct_4 ? fixed(*b.distinct_4, 4) : std::string("-"));
            }
            if (p.chat_lines == 0) continue;
            // The chat lines (docs/eval.md, "Chat and tools"): template errors of the chat lines'
            // generations, valid tool calls of those offering tools.
            std::cout << fmt::format("chat lines: {} of {}, {} offering tools\n", p.chat_lines, p.prompts,
                                     p.tool_lines);
            std::cout << fmt::format("{:<40} {:>28} {:>28}\n", "model", "template errors", "tool calls");
            for (const EvalBehaviour& b : r.behaviour) {
                if (b.panel != p.name || b.temperature != t) continue;
                const std::string m =
                    b.model.size() > 40 ? "…" + b.model.substr(b.model.size() - 39) : b.model;
                std::cout << fmt::format("{:<40} {:>28} {:>28}\n", m, rate_cell(b.template_errors),
                                         b.tool_calls.n > 0 ? rate_cell(b.tool_calls) : std::string("-"));
            }
        }
}

void print_kld(const EvalResult& r);

// The text line's last words (docs/eval.md, "Held-out text"): "yes", "no, calibration text of c", or "not
// known" and why.
std::string held_out_words(const EvalResult& r, const EvalTextFacts& t) {
    if (t.held_out)
        return *t.held_out ? "yes" : fmt::format("no, calibration text of {}", t.calibration_domain);
    return r.calibration ? "not known" : "not known (no --calibration)";
}

void print_table(const EvalResult& r) {
    std::cout << fmt::format("source  {} ({}, {} experts per block)\n", r.source, human_bytes(r.source_bytes),
                             r.source_expert_count);
    if (r.reference)
        std::cout << fmt::format("reference  {} ({}, {})\n", r.reference->model.path,
                                 human_bytes(r.reference->model.bytes), r.reference->main_type);
    for (const EvalTextFacts& t : r.texts)
        std::cout << fmt::format("text    {}: {} ({} tokens, {} chunks of {}, {} scored){}; held out: {}\n",
                                 t.name, t.path, t.tokens, t.chunks, r.ctx, t.scored_tokens,
                                 t.base.cached ? ", base cached" : "", held_out_words(r, t));
    for (const EvalPanelFacts& p : r.panels)
        std::cout << fmt::format("panel   {}: {} ({} prompts)\n", p.name, p.path, p.prompts);
    std::cout << fmt::format("llama.cpp  {}\n", r.llama_build.substr(0, r.llama_build.find('\n')));
    if (!r.texts.empty()) print_kld(r);
    if (r.smoke) print_smoke(*r.smoke);
    print_behaviour(r);
    if (!r.generations_written.empty())
        std::cout << fmt::format("wrote {}, {} and {}\n", r.json_written, r.svg_written,
                                 r.generations_written);
    else if (!r.json_written.empty())
        std::cout << fmt::format("wrote {} and {}\n", r.json_written, r.svg_written);
}

// One table of KLD runs: a row per model (its path as given, experts per block, size), per text its
// mean and 99th-percentile KLD, same top token and PPL ratio.
void print_kld_table(const EvalResult& r, const std::string& title,
                     const std::vector<EvalOutputFacts>& models, const std::vector<EvalRun>& runs) {
    std::cout << "\n" << title << "\n";
    std::string head = fmt::format("{:<40} {:>7} {:>10}", "output", "experts", "size");
    std::string sub = fmt::format("{:<40} {:>7} {:>10}", "", "", "");
    for (const EvalTextFacts& t : r.texts) {
        head += fmt::format("  | {:<37}", t.name);
        sub += fmt::format("  | {:>8} {:>8} {:>8} {:>8}", "KLD", "KLD99", "same%", "PPLx");
    }
    std::cout << head << "\n" << sub << "\n";
    for (const EvalOutputFacts& o : models) {
        std::string row = fmt::format("{:<40} {:>7} {:>10}",
                                      o.path.size() > 40 ? "…" + o.path.substr(o.path.size() - 39) : o.path,
                                      o.expert_count, human_bytes(o.bytes));
        for (const EvalTextFacts& t : r.texts)
            for (const EvalRun& run : runs)
                if (run.output == o.path && run.text == t.name) {
                    const KldFigures& f = run.figures;
                    row += fmt::format("  | {:>8} {:>8} {:>8} {:>8}", fixed(f.kld.value, 4),
                                       f.kld_p99 ? fixed(*f.kld_p99, 4) : std::string("-"),
                                       fixed(f.same_top.value, 2), fixed(std::exp(f.ln_ppl_ratio.value), 4));
                }
        std::cout << row << "\n";
    }
    for (const EvalRun& run : runs)
        if (run.figures.from != "summary")
            std::cout << fmt::format(
                "note: {} on {}: {}'s summary was cut off; figures from its last chunk row\n", run.output,
                run.text, llama_tool_name(LlamaTool::perplexity));
}

void print_kld(const EvalResult& r) {
    print_kld_table(r, fmt::format("against the source ({}): what pruning cost", r.source_main_type),
                    r.outputs, r.runs);
    if (!r.reference) return;
    std::vector<EvalOutputFacts> models{r.source_facts()};
    models.insert(models.end(), r.outputs.begin(), r.outputs.end());
    print_kld_table(r,
                    fmt::format("against the reference {} ({}): what the whole build costs, the source's "
                                "quantisation included",
                                r.reference->model.path, r.reference->main_type),
                    models, r.reference_runs);
}

int run_eval(const EvalCli& c, const GlobalOptions& g) {
    EvalRequest q = c.q;
    for (const std::string& t : c.texts) {
        const size_t eq = t.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == t.size())
            throw UsageError(
                fmt::format("--text '{}': write NAME=FILE, e.g. --text code=code.heldout.txt", t));
        q.texts.push_back({t.substr(0, eq), t.substr(eq + 1)});
    }
    for (const std::string& t : c.temps) {
        double v = 0;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (t.empty() || ec != std::errc() || end != t.data() + t.size())
            throw UsageError(
                fmt::format("--temp '{}' is not a temperature: give a number of 0 or more, e.g. 0.7", t));
        q.temperatures.push_back(v);
    }
    if (!c.samples.empty()) {
        q.samples = parse_whole(c.samples, UINT64_MAX);
        if (!q.samples)
            throw UsageError(
                fmt::format("--samples '{}' is not a number of generations (e.g. 4)", c.samples));
    }
    if (!c.seed.empty()) {
        q.seed = parse_whole(c.seed, UINT64_MAX);
        if (!q.seed)
            throw UsageError(fmt::format("--seed '{}' is not a seed: give a whole number from 0 to {}",
                                         c.seed, UINT64_MAX));
    }
    for (const std::string& p : c.prompts) {
        const size_t eq = p.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == p.size())
            throw UsageError(
                fmt::format("--prompts '{}': write NAME=FILE, e.g. --prompts code=code-prompts.txt", p));
        q.panels.push_back({p.substr(0, eq), p.substr(eq + 1)});
    }
    q.llama_bin_env = env("GGUF_REAP_LLAMA_BIN");
    q.path_env = env("PATH");
    if (q.cache_dir.empty()) q.cache_dir = default_kld_cache_dir();
    q.llama_args = llama_args_option(c.llama_args);
    q.ctx = ctx_option(c.ctx);
    if (!c.chunks.empty()) {
        const auto n = parse_whole(c.chunks, 999'999'999);
        if (!n) throw UsageError(fmt::format("--chunks '{}' is not a number of chunks (e.g. 100)", c.chunks));
        q.chunks = *n;
    }
    q.tool_version = std::string(GGUF_REAP_TOOL);
    // llama.cpp's tools read only local files: an hf:// model is given as its copy in the Hugging Face cache.
    for (std::string* model : {&q.source, &q.reference})
        if (const std::string local = local_model_file(*model); local != *model) {
            spdlog::info("{}: read from the Hugging Face cache, {}", *model, local);
            *model = local;
        }

    const EvalResult r = ops::eval(q, eval_events(g));
    if (c.json)
        print_json(eval_report_json(r));
    else
        print_table(r);
    // Every run done, only the files failed: the figures are on stdout above, and the exit says so.
    if (!r.write_error.empty())
        throw IoError(q.json_out,
                      fmt::format("not written ({}); the figures on stdout are this eval's", r.write_error));
    return kExitOk;
}

}  // namespace

Command add_eval(CLI::App& app, const GlobalOptions& g) {
    auto o = std::make_shared<EvalCli>();
    CLI::App* sub = app.add_subcommand(
        "eval",
        "Measure each pruned build against its source with llama.cpp: KL divergence, same top token, PPL");
    sub->add_option("--source", o->q.source, "Any shard of the source model")->required();
    sub->add_option("OUT", o->q.outputs, "Any shard of each pruned build of that source")->required();
    sub->add_option("--text", o->texts, "NAME=FILE: one kind of text to measure on (repeatable)");
    sub->add_option("--reference", o->q.reference,
                    "The unpruned model at another quantisation (BF16, F16): the source and each OUT are "
                    "also measured against its logits");
    sub->add_option(
        "--prompts", o->prompts,
        "NAME=FILE: a panel of prompts, one per line or .jsonl with a \"prompt\" field (repeatable); "
        "each is generated greedily on the source and each build by llama-server");
    sub->add_option("--gen-tokens", o->q.gen_tokens, "Tokens generated per prompt at most")
        ->capture_default_str();
    sub->add_option("--parallel", o->q.parallel, "llama-server slots (-np): prompts generated at once")
        ->capture_default_str();
    sub->add_option("--temp", o->temps,
                    "T: also generate each prompt at this temperature (repeatable; default: 0 only, greedy)");
    sub->add_option("--samples", o->samples,
                    "Generations per prompt at each temperature above 0 (default 1; greedy is always one)");
    sub->add_option("--seed", o->seed,
                    fmt::format("S: each sampled generation's seed is derived from it (default {})",
                                EvalRequest::kDefaultSeed));
    sub->add_flag("--chat", o->q.chat,
                  "Send each prompt through the model's chat template (as one user message)");
    sub->add_option("--server-timeout", o->q.server_timeout_s,
                    "Seconds llama-server may take to become ready, and to answer each request")
        ->capture_default_str();
    sub->add_option("--llama-bin", o->q.llama_bin,
                    "llama.cpp's bin directory (default: $GGUF_REAP_LLAMA_BIN, else PATH)");
    sub->add_option(
        "--llama-args", o->llama_args,
        "Arguments for llama.cpp, e.g. \"-ngl 99 -ot exps=CPU\" (default: $GGUF_REAP_LLAMA_ARGS)");
    sub->add_option("--ctx", o->ctx, "Tokens per chunk (llama-perplexity -c)")->capture_default_str();
    sub->add_option("--chunks", o->chunks, "At most this many chunks per text (default: all)");
    sub->add_option("--threads", o->q.threads, "llama.cpp threads (-t; default: llama.cpp's)");
    sub->add_option(
        "--cache-dir", o->q.cache_dir,
        "Where base logits are kept (default: $XDG_CACHE_HOME/gguf-reap/kld or ~/.cache/gguf-reap/kld)");
    sub->add_option("--smoke-prompt", o->q.smoke_prompt,
                    "Also generate greedy tokens from this prompt on the source and each build, and compare");
    sub->add_option(
        "--smoke-tokens", o->q.smoke_tokens,
        fmt::format("Tokens the smoke test generates (default {})", EvalRequest::kDefaultSmokeTokens));
    add_calibration_option(*sub, o->q.calibration,
                           "each text is marked held out or not (without it: not known)");
    sub->add_option("-o,--out", o->q.json_out, "Write eval.json here (and eval.svg beside it)");
    sub->add_flag("--json", o->json, "Print the document as one JSON document on stdout");
    return {sub, [o, &g] { return run_eval(*o, g); }};
}

}  // namespace gguf_reap::cli
