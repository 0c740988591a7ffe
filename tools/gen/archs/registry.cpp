#include <algorithm>
#include <array>

#include "gen/archs.h"

namespace gguf_reap::gen {

namespace {

// Sorted by name (find_arch_preset searches it).
constexpr auto kPresets = std::to_array<ArchPreset>({
    {"afmoe", build_afmoe},
    {"arctic", build_arctic},
    {"bailingmoe", build_bailingmoe},
    {"bailingmoe2", build_bailingmoe2},
    {"bailingmoe3", build_bailingmoe3},
    {"bert", build_bert, "embed"},
    {"cohere2moe", build_cohere2moe},
    {"dbrx", build_dbrx},
    {"deepseek", build_deepseek},
    {"deepseek2", build_deepseek2},
    {"deepseek2-ocr", build_deepseek2_ocr},
    {"deepseek32", build_deepseek32},
    {"deepseek4", build_deepseek4},
    {"dflash", build_dflash, "load"},
    {"dots1", build_dots1},
    {"ernie4_5-moe", build_ernie4_5_moe},
    {"exaone-moe", build_exaone_moe},
    {"gemma4", build_gemma4},
    {"glm-dsa", build_glm_dsa},
    {"glm4moe", build_glm4moe},
    {"gpt-oss", build_gpt_oss},
    {"granite", build_granite},
    {"granitehybrid", build_granitehybrid},
    {"granitemoe", build_granitemoe},
    {"grok", build_grok},
    {"grovemoe", build_grovemoe},
    {"hunyuan-moe", build_hunyuan_moe},
    {"hy_v3", build_hy_v3},
    {"jamba", build_jamba},
    {"jina-bert-v3", build_jina_bert_v3, "embed"},
    {"kimi-k3", build_kimi_k3},
    {"kimi-linear", build_kimi_linear},
    {"laguna", build_laguna},
    {"lfm2", build_lfm2},
    {"lfm2moe", build_lfm2moe},
    {"llada-moe", build_llada_moe},
    {"llama", build_llama},
    {"llama-embed", build_llama_embed, "embed"},
    {"llama4", build_llama4},
    {"mellum", build_mellum},
    {"mimo2", build_mimo2},
    {"minicpm", build_minicpm},
    {"minimax-01", build_minimax_01},
    {"minimax-m2", build_minimax_m2},
    {"minimax-m3", build_minimax_m3},
    {"mistral3", build_mistral3},
    {"mistral4", build_mistral4},
    {"nemotron_h", build_nemotron_h},
    {"nemotron_h_moe", build_nemotron_h_moe},
    {"nomic-bert", build_nomic_bert, "embed"},
    {"nomic-bert-moe", build_nomic_bert_moe, "embed"},
    {"olmoe", build_olmoe},
    {"phimoe", build_phimoe},
    {"qwen2moe", build_qwen2moe},
    {"qwen35moe", build_qwen35moe},
    {"qwen3moe", build_qwen3moe},
    {"qwen3next", build_qwen3next},
    {"qwen3vlmoe", build_qwen3vlmoe},
    {"refact", build_refact},
    {"rnd1", build_rnd1},
    {"smallthinker", build_smallthinker},
    {"step35", build_step35},
});
static_assert(std::ranges::is_sorted(kPresets, {}, &ArchPreset::name), "kPresets is sorted by name");

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
