#include "cli/app.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "io/error.h"
#include "io/progress.h"
#include "io/signals.h"

namespace gguf_reap::cli {

void print_json(const nlohmann::ordered_json& doc) {
    std::cout << doc.dump(2) << "\n";
}

Events cli_events(bool progress) {
    Events e;
    e.on_debug = [](const std::string& m) { spdlog::debug("{}", m); };
    e.on_info = [](const std::string& m) { spdlog::info("{}", m); };
    e.on_warn = [](const std::string& m) { spdlog::warn("{}", m); };
    if (!progress || !Progress::stderr_is_terminal()) return e;
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
}
}  // namespace

int run(int argc, char** argv) {
    CLI::App app{"gguf-reap: remove routed experts from MoE GGUF models, byte-exact, and prove it.",
                 "gguf-reap"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("gguf-reap ") + GGUF_REAP_VERSION);
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

    try {
        app.parse(argc, argv);
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
        for (auto& [sub, action] : commands)
            if (sub->parsed()) return action();
        return kExitBadInput;
    } catch (const Error& e) {
        std::fflush(stdout);
        std::cerr << "gguf-reap: error: " << e.what() << "\n";
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
