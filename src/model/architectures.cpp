// The architecture half of the tensor table (tensor_table.h): what each llama.cpp loader reads about
// routed experts, one entry per architecture, read from the loader file named in the entry (llama.cpp
// 34af94cd9). docs/architectures.md has the same facts as a table, with how to add an architecture.
#include <algorithm>
#include <array>

#include "model/tensor_table.h"

namespace gguf_reap {

namespace {

using W = ExpertWidthKey;
using S = SharedWidthRule;

constexpr std::array<std::string_view, 1> kArcticLookAlikes{"ffn_norm_exps"};

// Sorted by name (arch_info searches it).
constexpr std::array<ArchInfo, 16> kArchs{{
    {"arctic", "src/models/arctic.cpp", W::kUnknown, S::kFromTensors, kArcticLookAlikes},
    {"deepseek", "src/models/deepseek.cpp", W::kExpertKey, S::kWidthTimesCount},
    {"deepseek2", "src/models/deepseek2.cpp", W::kExpertKey, S::kWidthTimesCount},
    {"deepseek32", "src/models/deepseek32.cpp", W::kExpertKey, S::kWidthTimesCount},
    {"glm-dsa", "src/models/glm-dsa.cpp", W::kExpertKey, S::kWidthTimesCount},
    {"glm4moe", "src/models/glm4-moe.cpp", W::kExpertKey, S::kWidthTimesCount},
    {"gpt-oss", "src/models/openai-moe.cpp", W::kExpertKey, S::kFromTensors},
    {"kimi-k3", "src/models/kimi-k3.cpp", W::kExpertKey, S::kWidthTimesMaxCount},
    {"kimi-linear", "src/models/kimi-linear.cpp", W::kExpertKey, S::kWidthTimesMaxCount},
    {"llama", "src/models/llama.cpp", W::kDenseKey, S::kFromTensors},
    {"llama4", "src/models/llama4.cpp", W::kExpertKey, S::kEqualsWidth},
    {"olmoe", "src/models/olmoe.cpp", W::kDenseKey, S::kFromTensors},
    {"qwen2moe", "src/models/qwen2moe.cpp", W::kExpertKeyOrFf, S::kFromTensors},
    {"qwen35moe", "src/models/qwen35moe.cpp", W::kExpertKeyOrFf, S::kFromTensors},
    {"qwen3moe", "src/models/qwen3moe.cpp", W::kExpertKeyOrFf, S::kFromTensors},
    {"qwen3next", "src/models/qwen3next.cpp", W::kExpertKeyOrFf, S::kFromTensors},
}};

}  // namespace

const ArchInfo* arch_info(std::string_view arch) {
    auto it = std::lower_bound(kArchs.begin(), kArchs.end(), arch,
                               [](const ArchInfo& a, std::string_view n) { return a.name < n; });
    return it != kArchs.end() && it->name == arch ? &*it : nullptr;
}

std::span<const ArchInfo> architectures() {
    return kArchs;
}

}  // namespace gguf_reap
