// llama.cpp's load-time limits on the shape of a model (reference §5.4). gguf-reap reads, ranks, splices
// and audits models beyond them: pruning is how a model with too many experts becomes one llama.cpp
// loads, so refusing the input would refuse the cure. What it reports is an output that llama.cpp
// would still refuse (`splice` warns; docs/reliability.md "Limits").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace gguf_reap {

// LLAMA_MAX_EXPERTS: 256 (Jan 2025), 384 (Jul 2025), 512 (Nov 2025), 1024 since Aug 2026 (Kimi-K3).
inline constexpr uint64_t kLlamaMaxExperts = 1024;
// LLAMA_MAX_LAYERS: block_count, MTP (nextn) blocks included.
inline constexpr uint64_t kLlamaMaxLayers = 512;

// Why a model with `expert_count` experts per MoE block and `block_count` blocks would not load in
// llama.cpp, one sentence each; empty when it would (as far as these two limits go).
inline std::vector<std::string> llama_cpp_limit_problems(uint64_t expert_count, uint64_t block_count) {
    std::vector<std::string> out;
    if (expert_count > kLlamaMaxExperts)
        out.push_back(
            fmt::format("{} experts per block is more than llama.cpp loads (LLAMA_MAX_EXPERTS = {}): "
                        "keep at most {} if the model is to run in llama.cpp",
                        expert_count, kLlamaMaxExperts, kLlamaMaxExperts));
    if (block_count > kLlamaMaxLayers)
        out.push_back(
            fmt::format("{} blocks is more than llama.cpp loads (LLAMA_MAX_LAYERS = {}); pruning "
                        "experts does not change the block count",
                        block_count, kLlamaMaxLayers));
    return out;
}

}  // namespace gguf_reap
