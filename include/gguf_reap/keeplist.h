// The keeplist: which routed experts survive in every MoE block. `rank` writes it, `splice` and
// `audit` consume it. Schema (docs/keeplist.md), version 1:
//   { "format": "gguf-reap.keeplist", "version": 1,
//     "source": { "architecture", "expert_count", "expert_used_count", "expert_group_count",
//                 "tensor_count", "tensor_names_sha256", "shards": [{"name", "size"}] },
//     "n_keep": N,
//     "method": { ... free-form provenance written by rank ... },
//     "blocks": [ { "block": B, "keep": [ids ascending], "prune": [ids ascending],
//                   "dead": [ids], "protected": [{"expert": e, "reason": "..."}],
//                   "dead_reasons": [{"expert": e, "reason": "..."}] } ] }
//   Without a model, `rank` writes "source": {"expert_count": E, "derived_from": "imatrix"} only.
// Also accepted, for hand-written specs: { "drop": { "B": [ids], ... } } (the shape of
// ../shared/fixtures/prune_specs), resolved against the model's expert_count.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gguf_reap {

struct MoeLayout;

struct KeepListSource {
    std::string architecture;
    uint64_t expert_count = 0;
    uint64_t expert_used_count = 0;
    uint64_t expert_group_count = 0;
    uint64_t tensor_count = 0;
    // sha256 of the model's tensor names, sorted, each followed by '\n'; "" in keeplists of an older rank.
    std::string tensor_names_sha256;
    std::vector<std::pair<std::string, uint64_t>> shards;  // file name, size
    // Written by `rank` without --model: only expert_count is known (from the imatrix entries); the
    // other identity fields are left out of the JSON rather than written as zeros.
    bool from_imatrix_only = false;
};

struct ProtectedExpert {
    int64_t expert = 0;
    std::string reason;
};

struct KeepBlock {
    int block = 0;
    std::vector<int64_t> keep;   // ascending
    std::vector<int64_t> prune;  // ascending
    std::vector<int64_t> dead;
    std::vector<ProtectedExpert> protected_experts;
    std::vector<ProtectedExpert> dead_reasons;  // why each dead expert is dead (same shape as protected)
};

struct KeepList {
    int version = 1;
    std::optional<KeepListSource> source;  // absent in drop-form specs
    uint64_t n_keep = 0;
    std::vector<KeepBlock> blocks;  // ascending block id
    nlohmann::ordered_json method = nlohmann::ordered_json::object();
    bool drop_form = false;  // parsed from {"drop": ...}: keep lists filled by resolve()

    const KeepBlock* find_block(int block) const;

    // Parses a keeplist file. Throws InputError naming the file, the byte offset (JSON syntax errors)
    // and the JSON path of the bad field. Limits: 64 MiB, nesting depth 64.
    static KeepList load(const std::string& path);
    static KeepList parse(const std::string& text, const std::string& path_for_messages);

    nlohmann::ordered_json to_json() const;
    std::string text() const;                  // the file's contents, as save writes them
    void save(const std::string& path) const;  // atomic: temp + rename
};

// One ranking, a family of quants (docs/keeplist.md): a keeplist applies to any model with the same
// architecture, expert layout (expert count, experts used per token, groups) and tensor names as the
// model it was ranked on, such as every quantisation of the F16 it was ranked on. Returns "" when
// `model` is that model (the same shard names and sizes) or the keeplist cannot say (a drop spec, a
// ranking without --model), else the sentence each command says once:
//   "ranked on A-f16.gguf, applied to A-Q8_0.gguf (the same architecture, expert layout and tensor names)"
// A model of another layout is refused, in every command with the same wording: InputError naming the
// keeplist, the `source.*` field and both values.
std::string keeplist_applies_to(const KeepList& kl, const std::string& keeplist_path,
                                const KeepListSource& model, const std::string& model_name);

// Checks a keeplist against a model's MoE layout before any byte is written: architecture and
// expert_count match the source identity (when present), the set of blocks equals the layout's MoE
// blocks, ids in range, unique, ascending, keep ∪ prune = all experts, the same count in every block,
// count >= expert_used_count and >= 1, equal counts per contiguous group when expert_group_count > 1.
// Drop-form lists are resolved here (keep = all − drop). Throws UsageError with a message naming the
// block and the id.
void validate_keeplist(KeepList& kl, const MoeLayout& layout, const std::string& keeplist_path);

}  // namespace gguf_reap
