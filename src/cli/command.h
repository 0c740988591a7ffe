// Registration of subcommands. Each command file adds its CLI11 subcommand and returns the action to
// run when it is chosen; app.cpp wires them together and maps errors to exit codes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/estimate.h"
#include "gguf_reap/events.h"
#include "gguf_reap/llama_args.h"

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
Command add_eval(CLI::App& app, const GlobalOptions& g);
Command add_calibrate(CLI::App& app, const GlobalOptions& g);

// The hardware options estimate and card share. Each throws UsageError naming the option.
// A size such as 141GiB, 80G, 512M.
uint64_t size_option(const char* option, const std::string& text);
// --gpu-mem: "" = not given (0); otherwise a size above 0 bytes.
uint64_t gpu_mem_option(const std::string& text);
// --ctx: a token count, digits only (CLI11 would wrap "-1" into 2^64 − 1), at most 2^40.
uint64_t ctx_option(const std::string& text);

// --calibration CALIBRATE.json, which eval and card share (docs/eval.md, docs/card.md "Held-out text"):
// the same spelling and meaning in both; `also` ends its help with what else the command does with it.
void add_calibration_option(CLI::App& sub, std::string& path, const std::string& also);

// Where the model is meant to run (gguf_reap::Deployment), as estimate and card take it: --tp, --gpu-mem,
// --overhead, --ctx, and llama.cpp's placement options (docs/estimate.md, "One GPU and RAM"): --cpu-moe,
// --n-cpu-moe N, -ctk/--cache-type-k TYPE, -ctv/--cache-type-v TYPE. Each starts from Deployment{}'s
// value, which --help shows: the defaults are the library's.
struct DeploymentOptions {
    std::string tp = tp_list_text(Deployment{}.tp);
    std::string gpu_mem;  // "" = not given (Deployment{}.gpu_mem, 0: no fit verdict)
    std::string overhead = std::to_string(Deployment{}.overhead);
    std::string ctx = std::to_string(Deployment{}.ctx);
    bool cpu_moe = Deployment{}.offload.all_experts;
    std::string n_cpu_moe;  // "" = not given
    std::string cache_type_k = kv_cache_type_name(Deployment{}.cache_types.k);
    std::string cache_type_v = kv_cache_type_name(Deployment{}.cache_types.v);
};
void add_deployment_options(CLI::App& sub, DeploymentOptions& o);
// Throws UsageError naming the option and its value.
Deployment deployment_option(const DeploymentOptions& o);
// llama.cpp spells -ctk and -ctv with one dash, which CLI11 reads as three short flags: argv with those
// two words written as --cache-type-k and --cache-type-v.
std::vector<std::string> llama_cpp_spellings(int argc, char** argv);
// --llama-args "ARGS" when given (even empty), else $GGUF_REAP_LLAMA_ARGS, split into words
// (gguf_reap/llama_args.h). UsageError naming the one it read.
LlamaArgs llama_args_option(const std::optional<std::string>& given);

// Prints exactly one JSON document on stdout.
void print_json(const nlohmann::ordered_json& doc);

// Events that go to the log (stderr), with a progress line when `progress` is allowed and stderr is
// a terminal.
Events cli_events(bool progress);

}  // namespace gguf_reap::cli
