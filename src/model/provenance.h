// The provenance keys splice writes into shard 1 of its output (docs/splice.md, "Provenance") and
// audit reads back. Names only: each side has its own code for them, so that audit checks splice.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace gguf_reap {

inline constexpr const char* kProvenancePrefix = "gguf_reap.";
inline constexpr const char* kProvenanceVersionKey = "gguf_reap.version";
inline constexpr const char* kProvenanceSourceExpertCountKey = "gguf_reap.source_expert_count";
inline constexpr const char* kProvenanceKeeplistShaKey = "gguf_reap.keeplist_sha256";
// --drop-mtp: how many nextn (MTP) blocks the output leaves out (absent when none).
inline constexpr const char* kProvenanceDroppedNextnKey = "gguf_reap.dropped_nextn_blocks";
inline constexpr const char* kProvenanceKeptPrefix = "gguf_reap.kept.";  // + block number
// Width-spliced outputs only, after the keys above.
inline constexpr const char* kProvenanceNeuronPlanShaKey = "gguf_reap.neuron_plan_sha256";
inline constexpr const char* kProvenanceSourceExpertWidthKey = "gguf_reap.source_expert_feed_forward_length";

// With provenance, splice also says what the build is in the keys llama.cpp and Hugging Face show
// (docs/splice.md, "Name and base model"): general.name becomes the source's name with the kept experts,
// and the source becomes the build's base model (general.base_model.*, gguf-py's names), replacing any
// base model keys the source had.
inline constexpr const char* kGeneralNameKey = "general.name";
inline constexpr const char* kGeneralOrganizationKey = "general.organization";
inline constexpr const char* kGeneralRepoUrlKey = "general.repo_url";
inline constexpr const char* kSourceHfRepositoryKey = "general.source.huggingface.repository";
inline constexpr const char* kBaseModelPrefix = "general.base_model.";
inline constexpr const char* kBaseModelCountKey = "general.base_model.count";
inline constexpr const char* kBaseModel0NameKey = "general.base_model.0.name";
inline constexpr const char* kBaseModel0OrganizationKey = "general.base_model.0.organization";
inline constexpr const char* kBaseModel0RepoUrlKey = "general.base_model.0.repo_url";
// "Qwen3 30B A3B (96 of 128 routed experts)"; with a width cut "..., expert FFN 512 of 768)".
inline std::string pruned_model_name(const std::string& source_name, uint64_t kept, uint64_t experts,
                                     uint64_t width = 0, uint64_t native_width = 0) {
    std::string s = fmt::format("{} ({} of {} routed experts", source_name, kept, experts);
    if (width > 0 && width != native_width) s += fmt::format(", expert FFN {} of {}", width, native_width);
    return s + ")";
}

}  // namespace gguf_reap
