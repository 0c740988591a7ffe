// llama.cpp's command lines as gguf-reap writes them for people to run (the card's "How to run") or names
// them in its documents and messages: the spellings are here, beside the table of the command lines
// gguf-reap runs itself (llama_tools.h).
#pragma once

#include <cstdint>
#include <string>

namespace gguf_reap::llama_cpp {

// What the run lines say: the build and the placement the card's hardware table assumes.
struct RunRecipe {
    std::string first_shard;  // the build's first file (llama.cpp opens the others from it)
    std::string hf_ref;       // "ORG/REPO" or "ORG/REPO:QUANT" for the -hf lines; "" = none
    uint64_t ctx = 0;         // -c; 0 = llama.cpp's default
    std::string offload;      // Offload::flag(): "", "--cpu-moe", "--n-cpu-moe N"
    std::string cache_type_k = "f16", cache_type_v = "f16";  // -ctk, -ctv (f16 is llama.cpp's default)
};

struct RunLines {
    std::string cli, server;        // from the downloaded files (llama-cli -m, llama-server -m --port 8080)
    std::string cli_hf, server_hf;  // from the Hub (llama-cli -hf, llama-server -hf); "" without hf_ref
};
RunLines run_lines(const RunRecipe& r);

// "-ngl 99" and the offload flag, if any: every layer on the GPU, the flag's experts in RAM.
std::string one_gpu_args(const std::string& offload);
// "llama-server -hf": the line a card has with a Hub repository.
std::string hub_run_words();
// "-hf": what the Hub lines give llama.cpp.
std::string hub_option();
// "-ctk" (K) or "-ctv" (V): llama.cpp's KV cache type options, which gguf-reap's take the names of.
const char* kv_cache_option(bool v);

}  // namespace gguf_reap::llama_cpp
