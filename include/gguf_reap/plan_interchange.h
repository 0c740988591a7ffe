// Expert keep plans of other tools (docs/keeplist.md, "Plans of other tools"): read by `rank --from-plan`,
// written by `rank --export`. Two formats, both named reap_plan.json by their tools:
//   hipfire   (crates/hipfire-reap/src/plan.rs): {"version": 1, "original_experts": E, "num_layers": L,
//             "keep": {"per_layer": [[kept ids], ...]}, "model_arch"?: "..."}: one row per layer of the
//             model, dense ones included, 0-based by position, each the kept original ids, all rows the
//             same length.
//   keepmap   (the reap_plan.json published with 0xSero's pruned models, read by hipfire's
//             build_reap_keepmap.py): {"keep_maps": {"keep_by_layer": {"L": [kept ids], ...}},
//             "kept_experts_per_layer"?: k, "original_experts_per_layer"?: E, "base_model_id"?: "...",
//             ...}: MoE layers only, keyed by the 0-based layer number as a string.
// The REAP reference implementation (CerebrasResearch/reap) writes no plan: its pruned checkpoint
// renumbers the kept experts and records no original ids, and its scores are a torch pickle. Its
// criterion reaches rank as external scores (llama.cpp's expert_stats.json layout) instead.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gguf_reap {

struct KeepList;

enum class PlanFormat { kHipfire, kKeepmap };
const char* plan_format_name(PlanFormat f);  // "hipfire", "keepmap"
std::optional<PlanFormat> parse_plan_format(std::string_view s);

struct ExternalPlan {
    PlanFormat format = PlanFormat::kHipfire;
    std::optional<uint64_t> original_experts;  // as the file states it
    std::optional<uint64_t> num_layers;        // hipfire: rows, = the model's block count
    std::map<int, std::vector<int64_t>> keep;  // layer → kept ids, ascending (hipfire: every layer)
    uint64_t n_keep = 0;                       // the common row length
};

// Parses either format (told apart by "keep"/"per_layer" versus "keep_maps"). Ids must be unique,
// non-negative and below original_experts when it is given; every row the same non-zero length.
// Throws InputError naming the file, the byte offset (JSON syntax) or the JSON path of the bad field.
ExternalPlan parse_external_plan(const std::string& text, const std::string& path);
ExternalPlan load_external_plan(const std::string& path);  // at most 64 MiB

// The plan file for `kl` (its blocks are the MoE layers), pretty-printed JSON. hipfire needs a row for
// every one of the model's `block_count` layers, all the same length, and says nothing of dense
// layers: a model with dense or missing layers is refused (UsageError) with a pointer to keepmap.
std::string export_plan(PlanFormat f, const KeepList& kl, uint64_t block_count, uint64_t expert_count,
                        const std::string& base_model);

}  // namespace gguf_reap
