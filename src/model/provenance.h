// The provenance keys splice writes into shard 1 of its output (docs/splice.md, "Provenance") and
// audit reads back. Names only: each side has its own code for them, so that audit checks splice.
#pragma once

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

}  // namespace gguf_reap
