#include "model/moe_layout.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "io/error.h"

namespace gguf_reap {

namespace {

struct Classified {
    int block;
    ExpertRole role;
    int axis;
};

std::optional<ExpertRole> exps_weight_role(std::string_view base) {
    if (base == "ffn_gate_exps") return ExpertRole::kGateExps;
    if (base == "ffn_up_exps") return ExpertRole::kUpExps;
    if (base == "ffn_down_exps") return ExpertRole::kDownExps;
    if (base == "ffn_gate_up_exps") return ExpertRole::kGateUpExps;
    return std::nullopt;
}

// Classifies a tensor of a block; nullopt for tensors pruning never touches. `looks_expert` is set for
// names that suggest an expert axis but match no known pattern (those are refused, not ignored).
std::optional<Classified> classify(int block, std::string_view rest, bool& looks_expert) {
    looks_expert = false;
    size_t dot = rest.rfind('.');
    std::string_view base = dot == std::string_view::npos ? rest : rest.substr(0, dot);
    std::string_view suffix = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
    if (exps_weight_role(base)) {
        if (suffix == "weight") return Classified{block, *exps_weight_role(base), 2};
        if (suffix == "bias") return Classified{block, ExpertRole::kExpsBias, 1};
        if (suffix == "scale" || suffix == "input_scale") return Classified{block, ExpertRole::kExpsScale, 0};
        looks_expert = true;
        return std::nullopt;
    }
    if (base == "ffn_gate_inp") {
        if (suffix == "weight") return Classified{block, ExpertRole::kRouter, 1};
        if (suffix == "bias") return Classified{block, ExpertRole::kRouterBias, 0};
        looks_expert = true;
        return std::nullopt;
    }
    if (base == "exp_probs_b") {
        if (suffix == "bias" || suffix == "weight") return Classified{block, ExpertRole::kProbsBias, 0};
        looks_expert = true;
        return std::nullopt;
    }
    if (base.find("_exps") != std::string_view::npos) looks_expert = true;
    return std::nullopt;
}

std::string shape_str(const TensorInfo& t) {
    return fmt::format("{{{}, {}, {}, {}}}", t.ne[0], t.ne[1], t.ne[2], t.ne[3]);
}

}  // namespace

const char* expert_role_name(ExpertRole r) {
    switch (r) {
        case ExpertRole::kGateExps:
            return "gate_exps";
        case ExpertRole::kUpExps:
            return "up_exps";
        case ExpertRole::kDownExps:
            return "down_exps";
        case ExpertRole::kGateUpExps:
            return "gate_up_exps";
        case ExpertRole::kExpsBias:
            return "exps_bias";
        case ExpertRole::kExpsScale:
            return "exps_scale";
        case ExpertRole::kRouter:
            return "router";
        case ExpertRole::kRouterBias:
            return "router_bias";
        case ExpertRole::kProbsBias:
            return "exp_probs_b";
    }
    return "?";
}

bool is_router_role(ExpertRole r) {
    return r == ExpertRole::kRouter || r == ExpertRole::kRouterBias || r == ExpertRole::kProbsBias;
}

const MoeBlock* MoeLayout::find_block(int block) const {
    for (const auto& b : blocks)
        if (b.block == block) return &b;
    return nullptr;
}

bool MoeLayout::is_expert_tensor(size_t tensor) const {
    for (const auto& b : blocks)
        for (const auto& t : b.tensors)
            if (t.tensor == tensor) return true;
    return false;
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

bool MoeLayout::is_nextn_block(int block) const {
    return nextn_predict_layers > 0 && block_count >= nextn_predict_layers && block >= 0 &&
           static_cast<uint64_t>(block) >= block_count - nextn_predict_layers;
}

MoeLayout build_moe_layout(const ShardSet& model) {
    MoeLayout L;
    L.arch = model.architecture();
    const Shard& first = model.shards().front();
    auto uint_key = [&](const char* suffix) -> uint64_t {
        const std::string key = L.arch + "." + suffix;
        const Kv* kv = model.find_kv(key);
        if (!kv) return 0;
        auto v = kv->as_uint();
        if (!v)
            throw InputError(first.path, kv->file_offset, fmt::format("kv '{}'", key),
                             fmt::format("must be a non-negative integer, found {} {}",
                                         gguf_type_name(kv->type), kv->display()));
        return *v;
    };
    L.expert_count = uint_key("expert_count");
    L.expert_used_count = uint_key("expert_used_count");
    L.expert_shared_count = uint_key("expert_shared_count");
    L.expert_group_count = uint_key("expert_group_count");
    L.expert_group_used_count = uint_key("expert_group_used_count");
    L.leading_dense_block_count = uint_key("leading_dense_block_count");
    L.block_count = uint_key("block_count");
    L.nextn_predict_layers = uint_key("nextn_predict_layers");

    // llama.cpp asserts both at load time (reference §5.4); everything downstream (keeplist checks,
    // per-group counts) relies on them, so a model that breaks them is refused here, by name.
    auto refuse_kv = [&](const char* suffix, const std::string& msg) {
        const std::string key = L.arch + "." + suffix;
        throw InputError(first.path, model.find_kv(key)->file_offset, fmt::format("kv '{}'", key), msg);
    };
    if (L.expert_used_count > L.expert_count)
        refuse_kv("expert_used_count",
                  fmt::format("{} experts used per token, but the model has only {} (llama.cpp "
                              "refuses such a model)",
                              L.expert_used_count, L.expert_count));
    if (L.expert_count > 0 && L.expert_group_count > 1 && L.expert_count % L.expert_group_count != 0)
        refuse_kv("expert_group_count",
                  fmt::format("{} experts do not split into {} equal groups (llama.cpp refuses "
                              "such a model)",
                              L.expert_count, L.expert_group_count));

    // deepseek4 routes some tokens through a token-id → expert-id table whose *values* are expert ids:
    // removing experts would need those values remapped, which byte-exact slicing cannot do.
    for (const TensorRef& r : model.tensors()) {
        const TensorInfo& t = model.info(r);
        if (t.name.find("ffn_gate_tid2eid") != std::string::npos)
            throw InputError(
                model.shards()[r.shard].path, t.info_offset, fmt::format("tensor '{}'", t.name),
                fmt::format("architecture '{}' stores expert ids inside tensor values (hash routing); "
                            "removing experts would require remapping them, which gguf-reap refuses",
                            L.arch));
    }
    if (L.expert_count == 0) return L;

    std::map<int, MoeBlock> blocks;
    const auto& refs = model.tensors();
    for (size_t i = 0; i < refs.size(); ++i) {
        const TensorInfo& t = model.info(refs[i]);
        const std::string& path = model.shards()[refs[i].shard].path;
        auto split = split_block_name(t.name);
        if (!split) continue;
        bool looks_expert = false;
        auto c = classify(split->first, split->second, looks_expert);
        const std::string field = fmt::format("tensor '{}'", t.name);
        if (!c) {
            if (looks_expert)
                throw InputError(
                    path, t.info_offset, field,
                    "looks expert-indexed but matches no tensor layout gguf-reap knows; refusing "
                    "rather than copying it unsliced");
            continue;
        }
        const int64_t E = static_cast<int64_t>(L.expert_count);
        bool ok = t.ne[c->axis] == E;
        for (int j = c->axis + 1; j < 4; ++j) ok = ok && t.ne[j] == 1;
        if (!ok)
            throw InputError(path, t.info_offset, field,
                             fmt::format("has shape {} but {} tensors must have ne[{}] = expert_count = {}{}",
                                         shape_str(t), expert_role_name(c->role), c->axis, E,
                                         c->axis < 3 ? " as their outermost dimension" : ""));
        const GgmlType* gt = ggml_type(t.type);
        if (c->axis == 0 && gt->block_size != 1)
            throw InputError(path, t.info_offset, field,
                             fmt::format("per-expert vector of type {} packs several experts into one block; "
                                         "it cannot be sliced byte-exactly",
                                         ggml_type_display(t.type)));
        ExpertTensor et;
        et.name = t.name;
        et.tensor = i;
        et.role = c->role;
        et.axis = c->axis;
        et.slab = E > 0 ? t.nbytes / static_cast<uint64_t>(E) : 0;
        MoeBlock& b = blocks[c->block];
        b.block = c->block;
        b.tensors.push_back(et);
    }

    for (auto& [id, b] : blocks) {
        bool has_router = false, has_weights = false;
        for (const auto& et : b.tensors) {
            has_router |= et.role == ExpertRole::kRouter;
            const bool weight = et.role == ExpertRole::kGateExps || et.role == ExpertRole::kUpExps ||
                                et.role == ExpertRole::kDownExps || et.role == ExpertRole::kGateUpExps;
            has_weights |= weight;
            if (weight) b.slab_bytes += et.slab;
            b.slab_bytes_all += et.slab;
            L.expert_tensor_bytes += model.tensors()[et.tensor].nbytes;
        }
        if (!has_router || !has_weights) {
            const ExpertTensor& any = b.tensors.front();
            const TensorRef& r = model.tensors()[any.tensor];
            throw InputError(model.shards()[r.shard].path, model.info(r).info_offset,
                             fmt::format("tensor '{}'", any.name),
                             fmt::format("block {} has {} but no {}: an MoE block needs both a router "
                                         "(ffn_gate_inp.weight) and expert weights (ffn_*_exps.weight)",
                                         id, has_router ? "a router" : "expert tensors",
                                         has_router ? "expert weights" : "router"));
        }
        L.blocks.push_back(std::move(b));
    }
    return L;
}

}  // namespace gguf_reap
