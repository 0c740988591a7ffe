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
void build_deepseek(ModelBuilder& b);
void build_deepseek2_ocr(ModelBuilder& b);
void build_deepseek32(ModelBuilder& b);
void build_dots1(ModelBuilder& b);
void build_glm4moe(ModelBuilder& b);
void build_glm_dsa(ModelBuilder& b);
void build_mistral4(ModelBuilder& b);
void build_deepseek4(ModelBuilder& b);  // archs/deepseek4.cpp
void build_dflash(ModelBuilder& b);
void build_kimi_k3(ModelBuilder& b);  // archs/kimi.cpp
void build_kimi_linear(ModelBuilder& b);
void build_qwen2moe(ModelBuilder& b);
void build_qwen3vlmoe(ModelBuilder& b);
void build_qwen35moe(ModelBuilder& b);
void build_qwen3next(ModelBuilder& b);
void build_olmoe(ModelBuilder& b);  // tools/gen/archs/simple_moe.cpp
void build_phimoe(ModelBuilder& b);
void build_mellum(ModelBuilder& b);
void build_rnd1(ModelBuilder& b);
void build_llada_moe(ModelBuilder& b);
void build_llama(ModelBuilder& b);
void build_llama_embed(ModelBuilder& b);
void build_mistral3(ModelBuilder& b);
void build_minicpm(ModelBuilder& b);
void build_granite(ModelBuilder& b);
void build_granitemoe(ModelBuilder& b);
void build_granitehybrid(ModelBuilder& b);
void build_refact(ModelBuilder& b);
void build_llama4(ModelBuilder& b);
void build_bailingmoe(ModelBuilder& b);  // archs/bailing.cpp
void build_bailingmoe2(ModelBuilder& b);
void build_bailingmoe3(ModelBuilder& b);
void build_ernie4_5_moe(ModelBuilder& b);  // archs/misc_moe.cpp
void build_exaone_moe(ModelBuilder& b);
void build_hunyuan_moe(ModelBuilder& b);
void build_hy_v3(ModelBuilder& b);
void build_minimax_01(ModelBuilder& b);  // minimax.cpp
void build_minimax_m2(ModelBuilder& b);
void build_minimax_m3(ModelBuilder& b);
void build_gpt_oss(ModelBuilder& b);  // others.cpp
void build_grok(ModelBuilder& b);
void build_dbrx(ModelBuilder& b);
void build_arctic(ModelBuilder& b);
void build_smallthinker(ModelBuilder& b);
void build_gemma4(ModelBuilder& b);
void build_jamba(ModelBuilder& b);
void build_nemotron_h(ModelBuilder& b);
void build_nemotron_h_moe(ModelBuilder& b);
void build_lfm2moe(ModelBuilder& b);
void build_afmoe(ModelBuilder& b);
void build_cohere2moe(ModelBuilder& b);
void build_laguna(ModelBuilder& b);
void build_bert(ModelBuilder& b);  // encoders.cpp
void build_jina_bert_v3(ModelBuilder& b);
void build_nomic_bert(ModelBuilder& b);
void build_nomic_bert_moe(ModelBuilder& b);
void build_step35(ModelBuilder& b);  // misc_moe3.cpp
void build_mimo2(ModelBuilder& b);
void build_grovemoe(ModelBuilder& b);
void build_lfm2(ModelBuilder& b);

}  // namespace gguf_reap::gen
