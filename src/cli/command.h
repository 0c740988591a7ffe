// Registration of subcommands. Each command file adds its CLI11 subcommand and returns the action to
// run when it is chosen; app.cpp wires them together and maps errors to exit codes.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "ops/events.h"

namespace CLI {
class App;
}

namespace gguf_reap::cli {

struct GlobalOptions {
    int verbose = 0;
    bool quiet = false;
};

using Action = std::function<int()>;
using Command = std::pair<CLI::App*, Action>;

Command add_inspect(CLI::App& app, const GlobalOptions& g);
Command add_rank(CLI::App& app, const GlobalOptions& g);
Command add_plan_width(CLI::App& app, const GlobalOptions& g);
Command add_splice(CLI::App& app, const GlobalOptions& g);
Command add_audit(CLI::App& app, const GlobalOptions& g);
Command add_estimate(CLI::App& app, const GlobalOptions& g);
Command add_card(CLI::App& app, const GlobalOptions& g);

// Prints exactly one JSON document on stdout.
void print_json(const nlohmann::ordered_json& doc);

// Events that go to the log (stderr), with a progress line when `progress` is allowed and stderr is
// a terminal.
Events cli_events(bool progress);

}  // namespace gguf_reap::cli
