// The architecture half of the tensor table (tensor_table.h): what each llama.cpp loader reads about
// routed experts, one entry per architecture, read from the loader file named in the entry (llama.cpp
// 34af94cd9). docs/architectures.md has the same facts as a table, with how to add an architecture.
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "model/tensor_table.h"

namespace gguf_reap {

namespace {

using A = ArchStatus;
using W = ExpertWidthKey;
using S = SharedWidthRule;
using C = SharedCount;
using F = ArchFlag;
using M = MoeBlocks;
using T = ArchTakes;

constexpr std::array<std::string_view, 1> kArcticLookAlikes{"ffn_norm_exps"};
constexpr std::array<std::string_view, 1> kGemma4LookAlikes{"ffn_gate_inp.scale"};
constexpr std::array<std::string_view, 3> kGrovemoeLookAlikes{"ffn_gate_chexps", "ffn_up_chexps",
                                                              "ffn_down_chexps"};

// Keys a loader requires beyond its width key (get_key without `false`), and those it requires > 0
// (a GGML_ASSERT).
constexpr RequiredKey kNeedSharedCount[] = {{kExpertSharedCountKey, false}};
constexpr RequiredKey kNeedExpertWidth[] = {{kExpertWidthKey, false}};
constexpr RequiredKey kNeedInterleaveStep[] = {{kInterleaveMoeStepKey, true}};
constexpr RequiredKey kNeedExpertsPerGroup[] = {{kExpertsPerGroupKey, true}};

// Sorted by name (arch_info searches it). Columns: general.architecture, loader file, status, where the
// expert width is read, how the shared experts are sized and how their count is read, flags, look-alikes,
// which blocks are MoE, whether feed_forward_length sizes dense FFN tensors (model/loader_ffn.h), the
// optional expert tensors the loader creates (ArchTakes), the keys it requires beyond the width key. Two
// lines a row: the first six columns, then the other six.
constexpr auto kArchs = std::to_array<ArchInfo>({
    // clang-format off
    {"afmoe",          "src/models/afmoe.cpp",          A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       0,                                                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   {}},
    {"arctic",         "src/models/arctic.cpp",         A::kPrunable,      W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      kArcticLookAlikes,   M::kFromTensors,  false, 0,                               {}},
    {"bailingmoe",     "src/models/bailingmoe.cpp",     A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"bailingmoe2",    "src/models/bailingmoe2.cpp",    A::kPrunable,      W::kExpertKey,          S::kOwnKeyOrWidthTimesCount,   C::kAsRead,
                       F::kNextn | F::kNextnHeadRequired,                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   {}},
    {"bailingmoe3",    "src/models/bailingmoe3.cpp",    A::kPrunable,      W::kExpertKey,          S::kOwnKeyElseWidthTimesCount, C::kAtLeastOne,
                       F::kNextn | F::kNextnHeadRequired,                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   kNeedSharedCount},
    {"bert",           "src/models/bert.cpp",           A::kNoExperts,     W::kUnknown,            S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kEveryN,       true,  0,                               {}},
    {"cohere2moe",     "src/models/cohere2moe.cpp",     A::kPrunable,      W::kExpertKey,          S::kOwnKeyElseWidthTimesCount, C::kGatesShared,
                       F::kNextn | F::kNextnHeadRequired,                      {},                  M::kLeadingDense, true,  T::kFusedGateUp,                 {}},
    {"dbrx",           "src/models/dbrx.cpp",           A::kPrunable,      W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"deepseek",       "src/models/deepseek.cpp",       A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       0,                                                      {},                  M::kLeadingDense, true,  0,                               {}},
    {"deepseek2",      "src/models/deepseek2.cpp",      A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       F::kNextn,                                              {},                  M::kLeadingDense, true,  T::kProbsBias | T::kFusedGateUp, {}},
    {"deepseek2-ocr",  "src/models/deepseek2ocr.cpp",   A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       0,                                                      {},                  M::kLeadingDense, true,  T::kProbsBias | T::kFusedGateUp, {}},
    {"deepseek32",     "src/models/deepseek32.cpp",     A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       F::kNextn,                                              {},                  M::kLeadingDense, true,  T::kProbsBias,                   {}},
    {"deepseek4",      "src/models/deepseek4.cpp",      A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       F::kNextn | F::kHashRouting | F::kNextnHeadRequired,    {},                  M::kFromTensors,  false, T::kProbsBias,                   {}},
    {"dflash",         "src/models/dflash.cpp",         A::kDraftOnly,     W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  T::kProbsBias,                   {}},
    {"dots1",          "src/models/dots1.cpp",          A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       0,                                                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   {}},
    {"ernie4_5-moe",   "src/models/ernie4-5.cpp",       A::kPrunable,      W::kExpertKey,          S::kOwnKey,                    C::kAsRead,
                       0,                                                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   kNeedInterleaveStep},
    {"exaone-moe",     "src/models/exaone-moe.cpp",     A::kPrunable,      W::kExpertKey,          S::kOwnKeyElseWidth,           C::kAsRead,
                       F::kNextn | F::kNextnHeadRequired,                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   {}},
    {"gemma4",         "src/models/gemma4.cpp",         A::kPrunable,      W::kExpertKey,          S::kFromTensors,               C::kAsRead,
                       0,                                                      kGemma4LookAlikes,   M::kFromTensors,  true,  T::kFusedGateUp,                 {}},
    {"glm-dsa",        "src/models/glm-dsa.cpp",        A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       F::kNextn,                                              {},                  M::kLeadingDense, true,  T::kProbsBias,                   {}},
    {"glm4moe",        "src/models/glm4-moe.cpp",       A::kPrunable,      W::kExpertKeyZeroIsFf,  S::kWidthTimesCount,           C::kAsRead,
                       F::kNextn | F::kNextnHeadRequired,                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   {}},
    {"gpt-oss",        "src/models/openai-moe.cpp",     A::kPrunable,      W::kExpertKey,          S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, T::kRouterBias | T::kExpsBias,   {}},
    {"granite",        "src/models/granite.cpp",        A::kPrunable,      W::kFfKey,              S::kOwnKey,                    C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"granitehybrid",  "src/models/granite-hybrid.cpp", A::kPrunable,      W::kFfKey,              S::kOwnKey,                    C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"granitemoe",     "src/models/granite-moe.cpp",    A::kPrunable,      W::kFfKey,              S::kOwnKey,                    C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"grok",           "src/models/grok.cpp",           A::kPrunable,      W::kExpertKeyOrWholeFf, S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"grovemoe",       "src/models/grovemoe.cpp",       A::kPrunable,      W::kExpertKeyZeroIsFf,  S::kFromTensors,               C::kAsRead,
                       F::kChunkExperts,                                       kGrovemoeLookAlikes, M::kFromTensors,  false, 0,                               kNeedExpertsPerGroup},
    {"hunyuan-moe",    "src/models/hunyuan-moe.cpp",    A::kPrunable,      W::kFfKey,              S::kOwnKeyElseFf,              C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               kNeedExpertWidth},
    {"hy_v3",          "src/models/hy-v3.cpp",          A::kPrunable,      W::kExpertKeyZeroIsFf,  S::kOwnKeyElseWidth,           C::kAsRead,
                       F::kNextn,                                              {},                  M::kFromTensors,  true,  T::kProbsBias | T::kFusedGateUp, {}},
    {"jamba",          "src/models/jamba.cpp",          A::kPrunable,      W::kDenseKey,           S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"jina-bert-v3",   "src/models/jina-bert-v3.cpp",   A::kNoExperts,     W::kUnknown,            S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kEveryN,       true,  0,                               {}},
    {"kimi-k3",        "src/models/kimi-k3.cpp",        A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAtLeastOne,
                       0,                                                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   kNeedSharedCount},
    {"kimi-linear",    "src/models/kimi-linear.cpp",    A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAtLeastOne,
                       0,                                                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   kNeedSharedCount},
    {"laguna",         "src/models/laguna.cpp",         A::kPrunable,      W::kExpertKey,          S::kOwnKeyElseWidthTimesCount, C::kDefaultOne,
                       0,                                                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   {}},
    {"lfm2",           "src/models/lfm2.cpp",           A::kNoExperts,     W::kUnknown,            S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"lfm2moe",        "src/models/lfm2moe.cpp",        A::kPrunable,      W::kExpertKey,          S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   {}},
    {"llada-moe",      "src/models/llada-moe.cpp",      A::kPrunable,      W::kExpertKeyOrFf,      S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"llama",          "src/models/llama.cpp",          A::kPrunable,      W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"llama-embed",    "src/models/llama.cpp",          A::kPrunable,      W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"llama4",         "src/models/llama4.cpp",         A::kPrunable,      W::kExpertKey,          S::kEqualsWidth,               C::kAsRead,
                       0,                                                      {},                  M::kInterleave,   true,  0,                               {}},
    {"mellum",         "src/models/mellum.cpp",         A::kPrunable,      W::kExpertKeyZeroIsFf,  S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"mimo2",          "src/models/mimo2.cpp",          A::kPrunable,      W::kExpertKey,          S::kFromTensors,               C::kAsRead,
                       F::kNextn,                                              {},                  M::kFromTensors,  true,  T::kProbsBias,                   {}},
    {"minicpm",        "src/models/minicpm.cpp",        A::kPrunable,      W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"minimax-01",     "src/models/minimax-01.cpp",     A::kPrunable,      W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"minimax-m2",     "src/models/minimax-m2.cpp",     A::kPrunable,      W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, T::kProbsBias,                   kNeedExpertWidth},
    {"minimax-m3",     "src/models/minimax-m3.cpp",     A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       0,                                                      {},                  M::kLeadingDense, true,  T::kProbsBias,                   {}},
    {"mistral3",       "src/models/mistral3.cpp",       A::kPrunable,      W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"mistral4",       "src/models/deepseek2.cpp",      A::kPrunable,      W::kExpertKey,          S::kWidthTimesCount,           C::kAsRead,
                       F::kNextn,                                              {},                  M::kLeadingDense, true,  T::kProbsBias | T::kFusedGateUp, {}},
    {"nemotron_h",     "src/models/nemotron-h.cpp",     A::kPrunable,      W::kExpertKeyOrFf,      S::kOwnKey,                    C::kAsRead,
                       F::kNextn | F::kFfLayerPattern | F::kNextnHeadRequired, {},                  M::kFromTensors,  true,  T::kProbsBias,                   {}},
    {"nemotron_h_moe", "src/models/nemotron-h.cpp",     A::kPrunable,      W::kExpertKeyOrFf,      S::kOwnKey,                    C::kAsRead,
                       F::kNextn | F::kFfLayerPattern | F::kNextnHeadRequired, {},                  M::kFromTensors,  true,  T::kProbsBias,                   {}},
    {"nomic-bert",     "src/models/nomic-bert.cpp",     A::kPrunable,      W::kDenseKey,           S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kEveryN,       true,  0,                               {}},
    {"nomic-bert-moe", "src/models/nomic-bert-moe.cpp", A::kPrunable,      W::kDenseKey,           S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kEveryN,       true,  0,                               {}},
    {"olmoe",          "src/models/olmoe.cpp",          A::kPrunable,      W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"phimoe",         "src/models/phimoe.cpp",         A::kPrunable,      W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"qwen2moe",       "src/models/qwen2moe.cpp",       A::kPrunable,      W::kExpertKeyOrFf,      S::kOwnKeyElseFf,              C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"qwen35moe",      "src/models/qwen35moe.cpp",      A::kPrunable,      W::kExpertKeyOrFf,      S::kOwnKeyElseFf,              C::kAsRead,
                       F::kNextn | F::kNextnHeadRequired,                      {},                  M::kFromTensors,  false, T::kFusedGateUp,                 {}},
    {"qwen3moe",       "src/models/qwen3moe.cpp",       A::kPrunable,      W::kExpertKeyOrFf,      S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"qwen3next",      "src/models/qwen3next.cpp",      A::kPrunable,      W::kExpertKeyOrFf,      S::kOwnKeyElseFf,              C::kAsRead,
                       F::kNextn | F::kNextnHeadRequired,                      {},                  M::kFromTensors,  false, T::kFusedGateUp,                 {}},
    {"qwen3vlmoe",     "src/models/qwen3vlmoe.cpp",     A::kPrunable,      W::kExpertKeyOrFf,      S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"refact",         "src/models/refact.cpp",         A::kExpertsUnused, W::kFfKey,              S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  true,  0,                               {}},
    {"rnd1",           "src/models/rnd1.cpp",           A::kPrunable,      W::kExpertKeyOrFf,      S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"smallthinker",   "src/models/smallthinker.cpp",   A::kPrunable,      W::kExpertKey,          S::kFromTensors,               C::kAsRead,
                       0,                                                      {},                  M::kFromTensors,  false, 0,                               {}},
    {"step35",         "src/models/step35.cpp",         A::kPrunable,      W::kExpertKey,          S::kOwnKey,                    C::kAsRead,
                       F::kNextn,                                              {},                  M::kFromTensors,  true,  T::kProbsBias,                   {}},
    // clang-format on
});
static_assert(std::ranges::is_sorted(kArchs, {}, &ArchInfo::name), "kArchs is sorted by name (arch_info)");

}  // namespace

const ArchInfo* arch_info(std::string_view arch) {
    auto it = std::lower_bound(kArchs.begin(), kArchs.end(), arch,
                               [](const ArchInfo& a, std::string_view n) { return a.name < n; });
    return it != kArchs.end() && it->name == arch ? &*it : nullptr;
}

std::span<const ArchInfo> architectures() {
    return kArchs;
}

bool loader_reads(std::string_view arch, uint8_t flag) {
    const ArchInfo* info = arch_info(arch);
    return info == nullptr || info->has(flag);
}

std::optional<std::string> expert_count_change_refusal(std::string_view arch, uint64_t from, uint64_t to) {
    if (arch == "llama4" && from == 128 && to != 128)
        return fmt::format(
            "llama.cpp's llama4 loader switches the Q/K L2 norm off only for exactly 128 experts (Llama-4 "
            "Maverick, src/models/llama4.cpp:43): with {} experts the model would load but compute a "
            "different attention",
            to);
    return std::nullopt;
}

}  // namespace gguf_reap
