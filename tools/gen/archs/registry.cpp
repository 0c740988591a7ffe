#include <algorithm>
#include <array>

#include "gen/archs.h"

namespace gguf_reap::gen {

namespace {

// Sorted by name (find_arch_preset searches it).
constexpr std::array<ArchPreset, 2> kPresets{{
    {"deepseek2", build_deepseek2},
    {"qwen3moe", build_qwen3moe},
}};

}  // namespace

std::span<const ArchPreset> arch_presets() {
    return kPresets;
}

const ArchPreset* find_arch_preset(std::string_view name) {
    auto it = std::lower_bound(kPresets.begin(), kPresets.end(), name,
                               [](const ArchPreset& a, std::string_view n) { return a.name < n; });
    return it != kPresets.end() && it->name == name ? &*it : nullptr;
}

}  // namespace gguf_reap::gen
