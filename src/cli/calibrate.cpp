// gguf-reap calibrate --model MODEL --text NAME=FILE [--text NAME=FILE...] -o DIR [--ctx N] [--tokens N]
// [--threads N] [--llama-bin DIR] [--llama-args ARGS] [--json]: one imatrix per kind of text, made by
// llama-imatrix, recorded in DIR/calibrate.json (docs/calibrate.md).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/environment.h"
#include "gguf_reap/calibrate.h"
#include "gguf_reap/error.h"
#include "gguf_reap/version.h"
#include "io/progress.h"
#include "io/units.h"
#include "model/hub_local.h"

namespace gguf_reap::cli {

namespace {

// The options that are request fields as they are go straight into the request, whose defaults are
// theirs (gguf_reap/calibrate.h); the rest are parsed from their text.
struct CalibrateCli {
    CalibrateRequest q;
    std::vector<std::string> texts;
    std::string ctx = std::to_string(CalibrateRequest{}.ctx);
    std::string tokens;
    std::optional<std::string> llama_args;
    bool json = false;
};

std::string clock(double seconds) {
    const auto s = static_cast<int64_t>(seconds + 0.5);
    return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                     : fmt::format("{}:{:02}", s / 60, s % 60);
}

// On a terminal: the text, the chunks llama-imatrix has printed out of its total, and an ETA from the
// rate so far, on one line redrawn in place. Elsewhere only warnings (and errors) reach stderr.
Events calibrate_events(const GlobalOptions& g) {
    Events e;
    e.on_warn = [](const std::string& m) { spdlog::warn("{}", m); };
    if (g.quiet || !stderr_is_terminal()) return e;
    e.on_info = [](const std::string& m) { spdlog::info("{}", m); };
    struct State {
        std::string label;
        uint64_t done = 0, total = 0;
        std::chrono::steady_clock::time_point start;
    };
    auto st = std::make_shared<State>();
    const auto draw = [st] {
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - st->start).count();
        const std::string eta =
            st->done > 0 && st->done < st->total
                ? fmt::format(", ETA {}", clock(secs / static_cast<double>(st->done) *
                                                static_cast<double>(st->total - st->done)))
                : std::string();
        std::fprintf(stderr, "\r%s: chunk %llu/%llu%s\033[K", st->label.c_str(),
                     static_cast<unsigned long long>(st->done), static_cast<unsigned long long>(st->total),
                     eta.c_str());
    };
    e.on_progress_begin = [st, draw](std::string_view label, uint64_t total) {
        *st = {std::string(label), 0, total, std::chrono::steady_clock::now()};
        draw();
    };
    e.on_progress = [st, draw](uint64_t n) {
        st->done += n;
        draw();
    };
    e.on_progress_end = [] { std::fputs("\r\033[K", stderr); };
    return e;
}

void print_table(const CalibrateResult& r) {
    std::cout << fmt::format("model   {} ({}, {} experts, {} per token)\n", r.model,
                             human_bytes(r.model_bytes), r.expert_count, r.expert_used_count);
    std::cout << fmt::format("llama.cpp  {}\n", r.llama_build.substr(0, r.llama_build.find('\n')));
    if (!r.llama_args.empty()) std::cout << fmt::format("llama args  {}\n", shell_join(r.llama_args));
    std::cout << fmt::format("\n{:<16} {:>9} {:>9} {:>7} {:>10} {:>9}  {}\n", "text", "tokens", "used",
                             "chunks", "PPL", "seconds", "imatrix");
    for (const CalibrateTextFacts& t : r.texts)
        std::cout << fmt::format("{:<16} {:>9} {:>9} {:>7} {:>10} {:>9}  {}{}\n", t.name, t.tokens,
                                 t.used_tokens, t.chunks,
                                 t.ppl ? fmt::format("{:.4f}", t.ppl->value) : std::string("-"),
                                 fmt::format("{:.1f}", t.seconds), t.imatrix, t.cached ? " (cached)" : "");
    if (r.sanity.empty())
        std::cout << fmt::format(
            "\nsanity  every imatrix holds what it claims: per MoE block, the routed counts "
            "sum to tokens x {} (rank's check)\n",
            r.expert_used_count);
    else
        for (const SanityProblem& p : r.sanity)
            std::cout << fmt::format("sanity  {}: {}\n", p.file, p.message);
    std::cout << (r.json_written.empty() ? std::string("calibrate.json unchanged (every text cached)\n")
                                         : fmt::format("wrote {}\n", r.json_written));
}

int run_calibrate(const CalibrateCli& c, const GlobalOptions& g) {
    CalibrateRequest q = c.q;
    for (const std::string& t : c.texts) {
        const size_t eq = t.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == t.size())
            throw UsageError(fmt::format("--text '{}': write NAME=FILE, e.g. --text code=code.calib.txt", t));
        q.texts.push_back({t.substr(0, eq), t.substr(eq + 1)});
    }
    q.ctx = ctx_option(c.ctx);
    if (!c.tokens.empty()) {
        const auto n = parse_whole(c.tokens, 999'999'999'999);
        if (!n)
            throw UsageError(fmt::format("--tokens '{}' is not a number of tokens (e.g. 23552)", c.tokens));
        q.tokens = *n;
    }
    q.llama_bin_env = env("GGUF_REAP_LLAMA_BIN");
    q.path_env = env("PATH");
    q.llama_args = llama_args_option(c.llama_args);
    q.tool_version = std::string(GGUF_REAP_TOOL);
    // llama-imatrix reads only local files: an hf:// model is given as its copy in the Hugging Face cache.
    if (const std::string local = local_model_file(q.model); local != q.model) {
        spdlog::info("{}: read from the Hugging Face cache, {}", q.model, local);
        q.model = local;
    }

    const CalibrateResult r = ops::calibrate(q, calibrate_events(g));
    for (const SanityProblem& p : r.sanity) spdlog::warn("{}: {}", p.file, p.message);
    if (c.json)
        print_json(calibrate_json(r));
    else
        print_table(r);
    return r.sanity.empty() ? kExitOk : kExitFindings;
}

}  // namespace

Command add_calibrate(CLI::App& app, const GlobalOptions& g) {
    auto o = std::make_shared<CalibrateCli>();
    CLI::App* sub = app.add_subcommand(
        "calibrate", "Make one imatrix per kind of text with llama-imatrix, and record how each was made");
    sub->add_option("--model", o->q.model, "Any shard of the model to calibrate")->required();
    sub->add_option("--text", o->texts, "NAME=FILE: one kind of calibration text (repeatable)")->required();
    sub->add_option("-o,--out", o->q.out_dir, "Directory for NAME.imatrix.gguf and calibrate.json")
        ->required();
    sub->add_option("--ctx", o->ctx, "Tokens per chunk (llama-imatrix -c and -b)")->capture_default_str();
    sub->add_option("--tokens", o->tokens, "Cut every text to its first N tokens (the same budget for each)");
    sub->add_option("--threads", o->q.threads, "llama.cpp threads (-t; default: llama.cpp's)");
    sub->add_option("--llama-bin", o->q.llama_bin,
                    "llama.cpp's bin directory (default: $GGUF_REAP_LLAMA_BIN, else PATH)");
    sub->add_option(
        "--llama-args", o->llama_args,
        "Arguments for llama-imatrix, e.g. \"-ngl 99 -ot exps=CPU\" (default: $GGUF_REAP_LLAMA_ARGS)");
    sub->add_flag("--json", o->json, "Print calibrate.json's document on stdout");
    return {sub, [o, &g] { return run_calibrate(*o, g); }};
}

}  // namespace gguf_reap::cli
