// Other tools' expert keep plans (gguf_reap/plan_interchange.h).
#include "gguf_reap/plan_interchange.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/json_input.h"
#include "gguf_reap/error.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/rank.h"
#include "io/sequential_reader.h"

namespace gguf_reap {

namespace {

constexpr uint64_t kMaxPlanBytes = uint64_t{64} << 20;

std::optional<uint64_t> count_field(const nlohmann::json& j, const char* key, const std::string& path) {
    if (!j.contains(key)) return std::nullopt;
    const nlohmann::json& v = j[key];
    if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 || v.get<uint64_t>() > (uint64_t{1} << 20))
        throw InputError(path, std::nullopt, key, "must be a positive integer (at most 1048576)");
    return v.get<uint64_t>();
}

std::vector<int64_t> id_row(const nlohmann::json& v, const std::string& path, const std::string& where,
                            std::optional<uint64_t> experts) {
    if (!v.is_array()) throw InputError(path, std::nullopt, where, "must be an array of expert ids");
    std::vector<int64_t> ids;
    std::set<int64_t> seen;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string at = fmt::format("{}[{}]", where, i);
        if (!v[i].is_number_integer() || v[i].get<int64_t>() < 0)
            throw InputError(path, std::nullopt, at, "must be a non-negative integer expert id");
        const int64_t e = v[i].get<int64_t>();
        if (e >= int64_t{1} << 20)
            throw InputError(path, std::nullopt, at, fmt::format("expert id {} is beyond 1048576", e));
        if (experts && static_cast<uint64_t>(e) >= *experts)
            throw InputError(path, std::nullopt, at,
                             fmt::format("expert {} is not below original_experts = {}", e, *experts));
        if (!seen.insert(e).second)
            throw InputError(path, std::nullopt, at, fmt::format("expert {} is listed twice", e));
        ids.push_back(e);
    }
    std::sort(ids.begin(), ids.end());
    return ids;
}

}  // namespace

const char* plan_format_name(PlanFormat f) {
    return f == PlanFormat::kHipfire ? "hipfire" : "keepmap";
}

std::optional<PlanFormat> parse_plan_format(std::string_view s) {
    if (s == "hipfire") return PlanFormat::kHipfire;
    if (s == "keepmap") return PlanFormat::kKeepmap;
    return std::nullopt;
}

ExternalPlan parse_external_plan(const std::string& text, const std::string& path) {
    // A plan nests 4 levels; 16 million values bound the DOM to a few hundred MB.
    const nlohmann::json j = parse_json_input<nlohmann::json>(text, path, 16, size_t{16} << 20, "a plan");
    if (!j.is_object()) throw InputError(path, std::nullopt, "json", "a plan must be a JSON object");
    ExternalPlan p;
    if (j.contains("keep_maps")) {
        p.format = PlanFormat::kKeepmap;
        p.original_experts = count_field(j, "original_experts_per_layer", path);
        const nlohmann::json& km = j["keep_maps"];
        if (!km.is_object() || !km.contains("keep_by_layer") || !km["keep_by_layer"].is_object())
            throw InputError(path, std::nullopt, "keep_maps.keep_by_layer",
                             "must be an object {\"LAYER\": [kept ids], ...}");
        for (const auto& [key, row] : km["keep_by_layer"].items()) {
            int layer = -1;
            const auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), layer);
            if (ec != std::errc() || ptr != key.data() + key.size() || layer < 0)
                throw InputError(path, std::nullopt,
                                 fmt::format("keep_maps.keep_by_layer.\"{}\"", key.substr(0, 40)),
                                 "is not a layer number");
            p.keep[layer] =
                id_row(row, path, fmt::format("keep_maps.keep_by_layer.{}", layer), p.original_experts);
        }
        if (const auto k = count_field(j, "kept_experts_per_layer", path)) p.n_keep = *k;
    } else if (j.contains("keep")) {
        p.format = PlanFormat::kHipfire;
        p.original_experts = count_field(j, "original_experts", path);
        p.num_layers = count_field(j, "num_layers", path);
        const nlohmann::json& k = j["keep"];
        if (!k.is_object() || !k.contains("per_layer") || !k["per_layer"].is_array())
            throw InputError(path, std::nullopt, "keep.per_layer", "must be an array with one row per layer");
        const nlohmann::json& rows = k["per_layer"];
        if (p.num_layers && rows.size() != *p.num_layers)
            throw InputError(path, std::nullopt, "keep.per_layer",
                             fmt::format("has {} rows but num_layers is {}", rows.size(), *p.num_layers));
        for (size_t l = 0; l < rows.size(); ++l)
            p.keep[static_cast<int>(l)] =
                id_row(rows[l], path, fmt::format("keep.per_layer[{}]", l), p.original_experts);
    } else {
        throw InputError(path, std::nullopt, "json",
                         "is neither a hipfire plan (\"keep\": {\"per_layer\": ...}) nor a keep map "
                         "(\"keep_maps\": {\"keep_by_layer\": ...})");
    }
    if (p.keep.empty()) throw InputError(path, std::nullopt, "json", "the plan keeps no layer");
    const auto& [first_layer, first] = *p.keep.begin();
    for (const auto& [layer, row] : p.keep) {
        if (row.empty())
            throw InputError(path, std::nullopt, fmt::format("layer {}", layer), "keeps no experts");
        if (row.size() != first.size())
            throw InputError(path, std::nullopt, fmt::format("layer {}", layer),
                             fmt::format("keeps {} experts but layer {} keeps {}: every layer must keep the "
                                         "same number",
                                         row.size(), first_layer, first.size()));
    }
    if (p.n_keep && p.n_keep != first.size())
        throw InputError(path, std::nullopt, "kept_experts_per_layer",
                         fmt::format("is {} but the rows keep {}", p.n_keep, first.size()));
    p.n_keep = first.size();
    return p;
}

ExternalPlan load_external_plan(const std::string& path) {
    return parse_external_plan(read_small_file(path, kMaxPlanBytes, "plan"), path);
}

std::string export_plan(PlanFormat f, const KeepList& kl, uint64_t block_count, uint64_t expert_count,
                        const std::string& base_model) {
    nlohmann::ordered_json j;
    if (f == PlanFormat::kHipfire) {
        if (kl.blocks.size() != block_count)
            throw RequestError(
                {RankOptions::kExport,
                 fmt::format(" hipfire: the model has {} layers but {} MoE layers; hipfire's "
                             "reap_plan.json needs a row of kept experts for every layer and says "
                             "nothing of dense ones: use ",
                             block_count, kl.blocks.size()),
                 RankOptions::kExport, " keepmap"});
        nlohmann::ordered_json rows = nlohmann::ordered_json::array();
        for (const KeepBlock& b : kl.blocks) rows.push_back(b.keep);
        j["version"] = 1;
        j["original_experts"] = expert_count;
        j["num_layers"] = block_count;
        j["keep"] = {{"per_layer", rows}};
    } else {
        nlohmann::ordered_json by_layer = nlohmann::ordered_json::object();
        for (const KeepBlock& b : kl.blocks) by_layer[std::to_string(b.block)] = b.keep;
        if (!base_model.empty()) j["base_model_id"] = base_model;
        j["original_experts_per_layer"] = expert_count;
        j["kept_experts_per_layer"] = kl.n_keep;
        j["keep_maps"] = {{"keep_by_layer", by_layer}};
    }
    return j.dump(2) + "\n";
}

}  // namespace gguf_reap
