// The tensor table (tensor_table.h): the expert-indexed tensor kinds and the name rules. The
// per-architecture entries are in architectures.cpp.
#include "model/tensor_table.h"

#include <array>
#include <charconv>
#include <stdexcept>

#include <fmt/format.h>

namespace gguf_reap {

namespace {

using R = ExpertRole;
using P = Projection;

// Every kind, as llama.cpp's loaders create them (src/llama-model.cpp create_tensor calls):
//   weights  [n_embd, n_ff, E] (gate, up), [n_ff, n_embd, E] (down), [n_embd, 2·n_ff, E] (fused gate_up:
//            gate rows then up rows);
//   biases   [n_ff, E] (gate, up), [n_embd, E] (down) — gpt-oss, whose loader takes no fused gate_up;
//   scales   [E] per expert, input scales [E] (the generic pass of llama-model.cpp creates both for
//            gate, up and down; none for a fused gate_up);
//   router   [n_embd, E] weight and [E] bias; exp_probs_b [E] (deepseek2 and descendants: "bias";
//            a few converters wrote "weight"; hy_v3's loader names it with no suffix at all).
constexpr std::array<ExpertTensorKind, 18> kKinds{{
    {"ffn_gate_exps", "weight", R::kWeight, P::kGate, 2, 1, 1},
    {"ffn_up_exps", "weight", R::kWeight, P::kUp, 2, 1, 1},
    {"ffn_down_exps", "weight", R::kWeight, P::kDown, 2, 0, 1},
    {"ffn_gate_up_exps", "weight", R::kWeight, P::kGateUp, 2, 1, 2},
    {"ffn_gate_exps", "bias", R::kBias, P::kGate, 1, 0, 1},
    {"ffn_up_exps", "bias", R::kBias, P::kUp, 1, 0, 1},
    {"ffn_down_exps", "bias", R::kBias, P::kDown, 1, -1, 0},
    {"ffn_gate_exps", "scale", R::kScale, P::kGate, 0, -1, 0},
    {"ffn_up_exps", "scale", R::kScale, P::kUp, 0, -1, 0},
    {"ffn_down_exps", "scale", R::kScale, P::kDown, 0, -1, 0},
    {"ffn_gate_exps", "input_scale", R::kScale, P::kGate, 0, -1, 0},
    {"ffn_up_exps", "input_scale", R::kScale, P::kUp, 0, -1, 0},
    {"ffn_down_exps", "input_scale", R::kScale, P::kDown, 0, -1, 0},
    {"ffn_gate_inp", "weight", R::kRouter, P::kNone, 1, -1, 0},
    {"ffn_gate_inp", "bias", R::kRouterBias, P::kNone, 0, -1, 0},
    {"exp_probs_b", "bias", R::kProbsBias, P::kNone, 0, -1, 0},
    {"exp_probs_b", "weight", R::kProbsBias, P::kNone, 0, -1, 0},
    {"exp_probs_b", "", R::kProbsBias, P::kNone, 0, -1, 0},
}};

// Each role once, with the three names it goes by: the table's (`expert_role_name`, in tests and
// errors), inspect's label for its tensors (`expert_kind_label`; weights are labelled by their
// projection below), and the region an audit finding names (`expert_role_region`).
struct RoleEntry {
    ExpertRole role;
    const char* name;
    const char* label;
    const char* region;
};
constexpr std::array<RoleEntry, 6> kRoles{{
    {R::kWeight, "weight", nullptr, "kept slab"},
    {R::kBias, "bias", "exps_bias", "expert bias"},
    {R::kScale, "scale", "exps_scale", "expert scale"},
    {R::kRouter, "router", "router", "router row"},
    {R::kRouterBias, "router_bias", "router_bias", "router bias"},
    {R::kProbsBias, "exp_probs_b", "exp_probs_b", "exp_probs_b"},
}};

// Each projection once: its name and the label of its expert weights.
struct ProjectionEntry {
    Projection projection;
    const char* name;
    const char* weight_label;
};
constexpr std::array<ProjectionEntry, 5> kProjections{{
    {P::kNone, "", "?"},
    {P::kGate, "gate", "gate_exps"},
    {P::kUp, "up", "up_exps"},
    {P::kDown, "down", "down_exps"},
    {P::kGateUp, "gate_up", "gate_up_exps"},
}};

const RoleEntry& role_entry(ExpertRole r) {
    for (const auto& e : kRoles)
        if (e.role == r) return e;
    throw std::logic_error("an expert role missing from the role table");
}

// Bases whose every tensor must be a known kind: anything else under them is refused.
constexpr std::array<std::string_view, 6> kExpertBases{"ffn_gate_exps",    "ffn_up_exps",  "ffn_down_exps",
                                                       "ffn_gate_up_exps", "ffn_gate_inp", "exp_probs_b"};

std::pair<std::string_view, std::string_view> split_suffix(std::string_view rest) {
    const size_t dot = rest.rfind('.');
    if (dot == std::string_view::npos) return {rest, {}};
    return {rest.substr(0, dot), rest.substr(dot + 1)};
}

const ExpertTensorKind* find_kind(std::string_view base, std::string_view suffix) {
    for (const auto& k : kKinds)
        if (k.base == base && k.suffix == suffix) return &k;
    return nullptr;
}

}  // namespace

const char* expert_role_name(ExpertRole r) {
    return role_entry(r).name;
}

const char* expert_role_region(ExpertRole r) {
    return role_entry(r).region;
}

const char* expert_kind_label(const ExpertTensorKind& kind) {
    if (kind.role != ExpertRole::kWeight) return role_entry(kind.role).label;
    for (const auto& p : kProjections)
        if (p.projection == kind.projection) return p.weight_label;
    return "?";
}

const char* arch_status_name(ArchStatus s) {
    switch (s) {
        case ArchStatus::kPrunable:
            return "prunable";
        case ArchStatus::kNoExperts:
            return "no experts";
        case ArchStatus::kExpertsUnused:
            return "experts unused";
        case ArchStatus::kDraftOnly:
            return "draft only";
    }
    return "?";
}

const char* projection_name(Projection p) {
    for (const auto& e : kProjections)
        if (e.projection == p) return e.name;
    return "?";
}

std::span<const ExpertTensorKind> expert_tensor_kinds() {
    return kKinds;
}

const ExpertTensorKind& expert_kind(ExpertRole role, Projection projection) {
    for (const auto& k : kKinds)
        if (k.role == role && k.projection == projection) return k;
    throw std::logic_error(fmt::format("the tensor table has no {} kind for projection '{}'",
                                       expert_role_name(role), projection_name(projection)));
}

std::optional<std::pair<int, std::string_view>> split_block_name(std::string_view name) {
    if (name.substr(0, 4) != "blk.") return std::nullopt;
    std::string_view rest = name.substr(4);
    size_t dot = rest.find('.');
    if (dot == std::string_view::npos || dot == 0) return std::nullopt;
    int n = 0;
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + dot, n);
    if (ec != std::errc() || p != rest.data() + dot) return std::nullopt;
    return std::make_pair(n, rest.substr(dot + 1));
}

std::string block_tensor_name(int block, std::string_view base, std::string_view suffix) {
    if (suffix.empty()) return fmt::format("blk.{}.{}", block, base);
    return fmt::format("blk.{}.{}.{}", block, base, suffix);
}

std::string block_tensor_name(int block, const ExpertTensorKind& kind) {
    return block_tensor_name(block, kind.base, kind.suffix);
}

BlockTensorClass classify_block_tensor(std::string_view arch, std::string_view rest) {
    BlockTensorClass c;
    const auto [base, suffix] = split_suffix(rest);
    if (const ArchInfo* a = arch_info(arch))
        for (std::string_view l : a->look_alikes)
            if (base == l || rest == l) return c;
    if (const ExpertTensorKind* k = find_kind(base, suffix)) {
        c.expert = k;
        return c;
    }
    for (std::string_view b : kExpertBases)
        if (base == b) c.unknown_expert_like = true;
    if (base.find("_exps") != std::string_view::npos) c.unknown_expert_like = true;
    return c;
}

const ExpertTensorKind* expert_kind_of(std::string_view arch, std::string_view tensor_name) {
    const auto split = split_block_name(tensor_name);
    return split ? classify_block_tensor(arch, split->second).expert : nullptr;
}

const ExpertTensorKind& down_projection_kind() {
    static const ExpertTensorKind& down = *find_kind("ffn_down_exps", "weight");
    return down;
}

std::optional<int> down_projection_block(std::string_view name) {
    const auto split = split_block_name(name);
    if (!split) return std::nullopt;
    const ExpertTensorKind& down = down_projection_kind();
    const auto [base, suffix] = split_suffix(split->second);
    if (base != down.base || suffix != down.suffix || split->first < 0) return std::nullopt;
    return split->first;
}

bool is_expert_entry_name(std::string_view weight_name) {
    return weight_name.find("_exps") != std::string_view::npos;
}

bool is_hash_routing_table(std::string_view tensor_name) {
    return tensor_name.find("ffn_gate_tid2eid") != std::string_view::npos;
}

bool is_chunk_expert_tensor(std::string_view tensor_name) {
    return tensor_name.find("_chexps.") != std::string_view::npos;
}

std::optional<int> shared_expert_width_axis(std::string_view rest) {
    if (rest == "ffn_down_shexp.weight") return 0;
    if (rest == "ffn_gate_shexp.weight" || rest == "ffn_up_shexp.weight") return 1;
    return std::nullopt;
}

std::string shared_expert_down_name(int block) {
    return block_tensor_name(block, "ffn_down_shexp");
}

bool is_token_embedding(std::string_view tensor_name) {
    return tensor_name == kTokenEmbeddingName;
}

bool is_norm(std::string_view tensor_name) {
    return tensor_name.find("_norm") != std::string_view::npos;
}

std::string tensor_class(std::string_view name) {
    if (const auto split = split_block_name(name)) name = split->second;
    constexpr std::string_view kWeight = ".weight";
    if (name.size() > kWeight.size() && name.substr(name.size() - kWeight.size()) == kWeight)
        name = name.substr(0, name.size() - kWeight.size());
    return std::string(name);
}

std::string arch_key(std::string_view arch, std::string_view suffix) {
    return fmt::format("{}.{}", arch, suffix);
}

}  // namespace gguf_reap
