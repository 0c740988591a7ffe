// Architecture presets: for every llama.cpp architecture the generator knows, a function that writes
// a tiny model llama.cpp 34af94cd9 loads (and generates from, where the architecture can). Each was
// first written as a gguf-py model and loaded in llama.cpp, from the loader named in
// docs/architectures.md. One file per family under tools/gen/archs/.
#pragma once

#include <span>
#include <string_view>

#include "gen/builder.h"

namespace gguf_reap::gen {

struct ArchPreset {
    std::string_view name;  // general.architecture
    void (*build)(ModelBuilder& b);
    // What runs the model in llama.cpp: "generate" (llama-simple), "embed" (llama-embedding, encoders),
    // "load" (it loads, but generating needs more than the file, e.g. a draft model's target).
    std::string_view runs = "generate";
};

// Every preset, sorted by name.
std::span<const ArchPreset> arch_presets();
const ArchPreset* find_arch_preset(std::string_view name);

// ---- the families (tools/gen/archs/*.cpp) -----------------------------------------------------
void build_skeleton(ModelBuilder& b);  // --skeleton: gguf-reap's test layout, any architecture string
void build_deepseek2(ModelBuilder& b);
void build_qwen3moe(ModelBuilder& b);

}  // namespace gguf_reap::gen
