// llama.cpp's command lines for people to run, and its words in gguf-reap's documents
// (services/llama_cpp/llama_recipes.h).
#include "services/llama_cpp/llama_recipes.h"

#include <fmt/format.h>

#include "gguf_reap/estimate.h"
#include "gguf_reap/llama_args.h"
#include "services/llama_cpp/llama_tools.h"

namespace gguf_reap::llama_cpp {

namespace {

// The options every run line carries: the context, and the placement and cache types the hardware table
// assumes.
std::string run_options(const RunRecipe& r) {
    return fmt::format(
        "{}{}{}{}", r.ctx ? fmt::format(" -c {}", r.ctx) : std::string(),
        r.offload.empty() ? std::string() : fmt::format(" {}", one_gpu_args(r.offload)),
        r.cache_type_k != "f16" ? fmt::format(" {} {}", kv_cache_option(false), r.cache_type_k) : "",
        r.cache_type_v != "f16" ? fmt::format(" {} {}", kv_cache_option(true), r.cache_type_v) : "");
}

}  // namespace

RunLines run_lines(const RunRecipe& r) {
    const char* cli = llama_tool_name(LlamaTool::cli);
    const char* server = llama_tool_name(LlamaTool::server);
    const std::string opts = run_options(r);
    RunLines l;
    l.cli = fmt::format("{} -m {}{}", cli, r.first_shard, opts);
    l.server = fmt::format("{} -m {}{} --port 8080", server, r.first_shard, opts);
    if (!r.hf_ref.empty()) {
        l.cli_hf = fmt::format("{} {} {}{}", cli, hub_option(), r.hf_ref, opts);
        l.server_hf = fmt::format("{} {} {}{}", server, hub_option(), r.hf_ref, opts);
    }
    return l;
}

std::string one_gpu_args(const std::string& offload) {
    return fmt::format("-ngl 99{}{}", offload.empty() ? "" : " ", offload);
}

std::string hub_run_words() {
    return fmt::format("{} {}", llama_tool_name(LlamaTool::server), hub_option());
}

std::string hub_option() {
    return "-hf";
}

const char* kv_cache_option(bool v) {
    return v ? "-ctv" : "-ctk";
}

}  // namespace gguf_reap::llama_cpp

namespace gguf_reap {

// llama.cpp's spelling of the placement (include/gguf_reap/estimate.h), as a card's run lines give it.
std::string Offload::flag() const {
    if (all_experts) return "--cpu-moe";
    if (first_layers > 0) return fmt::format("{} {}", "--n-cpu-moe", first_layers);  // llama.cpp's argv
    return "";
}

}  // namespace gguf_reap
