#include "cli/app.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/environment.h"
#include "cli/options.h"
#include "gguf_reap/error.h"
#include "gguf_reap/version.h"
#include "io/http_client.h"
#include "io/progress.h"
#include "io/signals.h"
#include "io/units.h"

namespace gguf_reap::cli {

uint64_t size_option(const char* option, const std::string& text) {
    auto v = parse_size(text);
    if (!v) throw UsageError(fmt::format("{} '{}' {}", option, text, size_refusal(text)));
    return *v;
}

uint64_t gpu_mem_option(const std::string& text) {
    if (text.empty()) return 0;
    const uint64_t v = size_option("--gpu-mem", text);
    if (v == 0) throw UsageError("--gpu-mem must be more than 0 bytes");
    return v;
}

uint64_t ctx_option(const std::string& text) {
    uint64_t v = 0;
    bool ok = !text.empty() && text.size() <= 13;
    for (char c : text) ok = ok && c >= '0' && c <= '9';
    if (ok)
        for (char c : text) v = v * 10 + static_cast<uint64_t>(c - '0');
    if (!ok || v > (uint64_t{1} << 40))
        throw UsageError(
            fmt::format("--ctx '{}' is not a number of tokens (a whole number, e.g. 131072)", text));
    return v;
}

void add_calibration_option(CLI::App& sub, std::string& path, const std::string& also) {
    sub.add_option("--calibration", path,
                   "The calibrate.json that made the imatrices: a text whose sha256 is one of its texts' "
                   "(or cuts') is calibration text, not held out; " +
                       also)
        ->type_name("CALIBRATE.json");
}

void add_deployment_options(CLI::App& sub, DeploymentOptions& o) {
    sub.add_option("--tp", o.tp, "Tensor-parallel degrees, comma-separated (1 is always shown)")
        ->capture_default_str();
    sub.add_option("--gpu-mem", o.gpu_mem, "Memory per GPU (e.g. 141GiB, 80G): say whether it fits");
    sub.add_option("--overhead", o.overhead,
                   "Memory per GPU besides weights and KV cache (activations, CUDA graphs, buffers)")
        ->capture_default_str();
    sub.add_option("--ctx", o.ctx, "Tokens of KV cache to budget per GPU (all sequences together)")
        ->capture_default_str();
    sub.add_flag("--cpu-moe", o.cpu_moe,
                 "llama.cpp's --cpu-moe (-ot exps=CPU): every routed expert in RAM, the rest on one GPU");
    sub.add_option("--n-cpu-moe", o.n_cpu_moe,
                   "llama.cpp's --n-cpu-moe N: the routed experts of blocks 0..N-1 in RAM")
        ->type_name("N");
    sub.add_option("--cache-type-k", o.cache_type_k,
                   "-ctk: the KV cache type of K, as llama.cpp: " + kv_cache_type_choices())
        ->capture_default_str();
    sub.add_option("--cache-type-v", o.cache_type_v, "-ctv: the KV cache type of V")->capture_default_str();
}

namespace {

Offload offload_option(const DeploymentOptions& o) {
    Offload r;
    r.all_experts = o.cpu_moe;
    if (!o.n_cpu_moe.empty()) {
        if (o.cpu_moe) throw UsageError("--cpu-moe and --n-cpu-moe: give one (--cpu-moe is every block)");
        uint64_t v = 0;
        bool ok = o.n_cpu_moe.size() <= 6;
        for (char c : o.n_cpu_moe) ok = ok && c >= '0' && c <= '9';
        if (ok)
            for (char c : o.n_cpu_moe) v = v * 10 + static_cast<uint64_t>(c - '0');
        if (!ok || v == 0)
            throw UsageError(fmt::format(
                "--n-cpu-moe '{}' is not a number of blocks (a whole number from 1, e.g. --n-cpu-moe 20)",
                o.n_cpu_moe));
        r.first_layers = v;
    }
    return r;
}

KvCacheTypes cache_types_option(const DeploymentOptions& o) {
    KvCacheTypes t;
    const auto one = [](const char* option, const std::string& name) {
        const auto v = parse_kv_cache_type(name);
        if (!v)
            throw UsageError(fmt::format("{} '{}' is not a KV cache type llama.cpp accepts ({})", option,
                                         name, kv_cache_type_choices()));
        return *v;
    };
    t.k = one("-ctk", o.cache_type_k);
    t.v = one("-ctv", o.cache_type_v);
    return t;
}

}  // namespace

Deployment deployment_option(const DeploymentOptions& o) {
    Deployment d;
    d.tp = parse_tp_list(o.tp);
    d.overhead = size_option("--overhead", o.overhead);
    d.gpu_mem = gpu_mem_option(o.gpu_mem);
    d.ctx = ctx_option(o.ctx);
    d.offload = offload_option(o);
    d.cache_types = cache_types_option(o);
    return d;
}

std::vector<std::string> llama_cpp_spellings(int argc, char** argv) {
    std::vector<std::string> args;
    for (int i = 0; i < argc; ++i) {
        const std::string a = argv[i];
        args.push_back(i > 0 && a == "-ctk" ? "--cache-type-k" : i > 0 && a == "-ctv" ? "--cache-type-v" : a);
    }
    return args;
}

LlamaArgs llama_args_option(const std::optional<std::string>& given) {
    if (given) return LlamaArgs::parse(*given, "--llama-args");
    if (const char* e = std::getenv("GGUF_REAP_LLAMA_ARGS"))  // set, even empty: it is the default
        return LlamaArgs::parse(e, "GGUF_REAP_LLAMA_ARGS");
    return {};
}

void print_json(const nlohmann::ordered_json& doc) {
    std::cout << doc.dump(2) << "\n";
}

Events cli_events(bool progress) {
    Events e;
    e.spell = option_spelling;
    e.on_debug = [](const std::string& m) { spdlog::debug("{}", m); };
    e.on_info = [](const std::string& m) { spdlog::info("{}", m); };
    e.on_warn = [](const std::string& m) { spdlog::warn("{}", m); };
    if (!progress || !stderr_is_terminal()) return e;
    auto line = std::make_shared<std::unique_ptr<Progress>>();
    e.on_progress_begin = [line](std::string_view label, uint64_t total) {
        *line = std::make_unique<Progress>(std::string(label), total, true);
    };
    e.on_progress = [line](uint64_t n) {
        if (*line) (*line)->add(n);
    };
    e.on_progress_end = [line] {
        if (*line) (*line)->finish();
        line->reset();
    };
    return e;
}

namespace {
void setup_logging(const GlobalOptions& g) {
    // Colour only on a terminal, and never when NO_COLOR is set (no-color.org).
    auto mode = std::getenv("NO_COLOR") ? spdlog::color_mode::never : spdlog::color_mode::automatic;
    auto logger = spdlog::stderr_color_mt("gguf-reap", mode);
    logger->set_pattern("gguf-reap: %^%l%$: %v");
    logger->set_level(g.quiet         ? spdlog::level::warn
                      : g.verbose > 0 ? spdlog::level::debug
                                      : spdlog::level::info);
    spdlog::set_default_logger(logger);
    // A request being retried says so (docs/remote.md, "Failures and retries"): attempt, reason, next try.
    set_http_notice([](const std::string& m) { spdlog::warn("{}", m); });
}
}  // namespace

int run(int argc, char** argv) {
    CLI::App app{"gguf-reap: remove routed experts from MoE GGUF models, byte-exact, and prove it.",
                 "gguf-reap"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string(GGUF_REAP_TOOL));
    GlobalOptions g;
    app.add_flag("-v,--verbose", g.verbose, "More log output on stderr");
    app.add_flag("-q,--quiet", g.quiet, "Only warnings and errors on stderr");

    std::vector<Command> commands;
    commands.push_back(add_inspect(app, g));
    commands.push_back(add_rank(app, g));
    commands.push_back(add_plan_width(app, g));
    commands.push_back(add_splice(app, g));
    commands.push_back(add_audit(app, g));
    commands.push_back(add_estimate(app, g));
    commands.push_back(add_card(app, g));
    commands.push_back(add_eval(app, g));
    commands.push_back(add_calibrate(app, g));

    try {
        // -ctk and -ctv as llama.cpp spells them. CLI11 takes the arguments in reverse, program name last.
        std::vector<std::string> args = llama_cpp_spellings(argc, argv);
        args.erase(args.begin());
        std::reverse(args.begin(), args.end());
        app.parse(args);
    } catch (const CLI::CallForHelp& e) {
        std::cout << app.help();
        return 0;
    } catch (const CLI::CallForAllHelp& e) {
        std::cout << app.help("", CLI::AppFormatMode::All);
        return 0;
    } catch (const CLI::CallForVersion& e) {
        std::cout << e.what() << "\n";
        return 0;
    } catch (const CLI::ParseError& e) {
        // Subcommand help arrives here too (as Success-coded errors); route it to stdout.
        if (e.get_exit_code() == 0) return app.exit(e);
        std::cerr << "gguf-reap: error: " << e.what() << "\n";
        std::cerr << "Run 'gguf-reap --help' for usage.\n";
        return kExitBadInput;
    }

    setup_logging(g);
    install_signal_handlers();
    try {
        set_remote_settings(remote_settings_from_env());
        for (auto& [sub, action] : commands)
            if (sub->parsed()) return action();
        return kExitBadInput;
    } catch (const Error& e) {
        std::fflush(stdout);
        std::cerr << "gguf-reap: error: " << (e.message().empty() ? e.what() : option_message(e.message()))
                  << "\n";
        return e.exit_code();
    } catch (const std::bad_alloc&) {
        std::cerr << "gguf-reap: error: out of memory\n";
        return kExitIo;
    } catch (const std::exception& e) {
        std::cerr << "gguf-reap: error: internal error: " << e.what() << "\n";
        return kExitIo;
    }
}

}  // namespace gguf_reap::cli
