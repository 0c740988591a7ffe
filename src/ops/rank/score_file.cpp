#include "ops/rank/score_file.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/json_input.h"
#include "gguf_reap/error.h"
#include "io/input_file.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"

namespace gguf_reap {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr uint64_t kMaxScoresJson = uint64_t{256} << 20;

struct ExternalFile {
    std::map<int, nlohmann::json> blocks;  // block → object of fields (or {"score": [...]})
};

ExternalFile load_external(const std::string& path) {
    const std::string text = read_small_file(path, kMaxScoresJson, "score file");
    // A score file nests 3 levels: depth 32 is refused. 16 million values (a few fields × 1,024 experts ×
    // 512 blocks is 3 million) bound the DOM, at 16+ bytes a value, to a few hundred MB whatever the
    // 256 MiB of text hold.
    const nlohmann::json j =
        parse_json_input<nlohmann::json>(text, path, 32, size_t{16} << 20, "a score file");
    if (!j.is_object()) throw InputError(path, std::nullopt, "json", "a score file must be a JSON object");
    const nlohmann::json& blocks = j.contains("blocks") ? j["blocks"] : j;
    if (!blocks.is_object())
        throw InputError(path, std::nullopt, "blocks", "must be an object {\"BLOCK\": {...}}");
    ExternalFile out;
    for (const auto& [key, val] : blocks.items()) {
        int b = -1;
        auto [p, ec] = std::from_chars(key.data(), key.data() + key.size(), b);
        if (ec != std::errc() || p != key.data() + key.size() || b < 0) {
            if (&blocks == &j && (key == "format" || key == "version")) continue;
            throw InputError(path, std::nullopt, fmt::format("\"{}\"", key.substr(0, 40)),
                             "is not a block number");
        }
        if (val.is_array())
            out.blocks[b] = nlohmann::json{{"score", val}};
        else if (val.is_object())
            out.blocks[b] = val;
        else
            throw InputError(path, std::nullopt, fmt::format("block {}", b),
                             "must be an object of per-expert arrays or an array of scores");
    }
    if (out.blocks.empty()) throw InputError(path, std::nullopt, "blocks", "holds no blocks");
    return out;
}

std::vector<double> external_array(const nlohmann::json& v, const std::string& path, const std::string& field,
                                   int64_t E) {
    if (!v.is_array())
        throw InputError(path, std::nullopt, field, "must be an array with one number per expert");
    if (E > 0 && static_cast<int64_t>(v.size()) != E)
        throw InputError(path, std::nullopt, field,
                         fmt::format("has {} values but the model has {} experts", v.size(), E));
    std::vector<double> out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_number())
            throw InputError(path, std::nullopt, fmt::format("{}[{}]", field, i), "must be a number");
        const double x = v[i].get<double>();
        if (!std::isfinite(x))
            throw InputError(path, std::nullopt, fmt::format("{}[{}]", field, i), "must be finite");
        out.push_back(x);
    }
    return out;
}

// One block's scores of one file: the field, and the counts where given (multiplied in for a
// per-token mean that is summed).
BlockStats block_scores(const nlohmann::json& o, const std::string& path, int b, ScoreRead& out) {
    const std::string& field = out.field;
    if (!o.contains(field)) {
        std::string have;
        for (const auto& [k, v] : o.items())
            if (v.is_array()) have += (have.empty() ? "" : ", ") + k;
        throw RequestError({fmt::format("{}: block {} has no field '{}' (it has: {}); choose one with ", path,
                                        b, field, have.empty() ? "none" : have),
                            RankOptions::kScoreField});
    }
    std::vector<double> s =
        external_array(o[field], path, fmt::format("block {} '{}'", b, field), out.expert_count);
    if (out.expert_count == 0) out.expert_count = static_cast<int64_t>(s.size());
    if (static_cast<int64_t>(s.size()) != out.expert_count)
        throw InputError(path, std::nullopt, fmt::format("block {} '{}'", b, field),
                         fmt::format("has {} values but other blocks have {}", s.size(), out.expert_count));
    BlockStats st;
    st.present = true;
    st.external = s;
    const size_t n = s.size();
    st.count.assign(n, kNaN);
    st.energy.assign(n, kNaN);
    st.mean.assign(n, kNaN);
    st.peak.assign(n, kNaN);
    st.dead.assign(n, 0);
    if (o.contains("activation_counts")) {
        st.count = external_array(o["activation_counts"], path,
                                  fmt::format("block {} 'activation_counts'", b), out.expert_count);
        for (size_t e = 0; e < n; ++e) st.dead[e] = st.count[e] == 0;
    }
    if (out.times_counts) {
        if (!o.contains("activation_counts"))
            throw RequestError(
                {fmt::format("{}: block {}: '{}' is a per-token mean, which rank sums over the routed tokens "
                             "(mean × activation_counts) by default, but the block has no "
                             "activation_counts: add them, or give ",
                             path, b, field),
                 RankOptions::kScoreAggregate,
                 " mean for the REAP paper's per-token form (docs/method.md: it keeps rarely routed "
                 "experts at high ratios)"});
        for (size_t e = 0; e < n; ++e) st.external[e] *= st.count[e];
    }
    return st;
}

}  // namespace

ScoreRead read_score_files(const ScoreSources& src, const std::vector<int>* model_blocks,
                           int64_t model_experts, bool hash) {
    ScoreRead out;
    out.expert_count = model_experts;
    std::vector<ExternalFile> files;
    for (const auto& d : src.files) files.push_back(load_external(d.path));
    if (model_blocks) {
        out.blocks = *model_blocks;
    } else {
        std::set<int> all;
        for (const auto& f : files)
            for (const auto& [b, v] : f.blocks) all.insert(b);
        out.blocks.assign(all.begin(), all.end());
    }
    // The field: as asked, else "reap" (llama-expert-profile), else "score".
    const nlohmann::json& first = files.front().blocks.begin()->second;
    out.field = src.field.empty() ? (first.contains("reap") ? "reap" : "score") : src.field;
    // Per-token means (REAP's `reap`, its factors) are summed over routed tokens unless asked not to:
    // at high ratios a mean keeps rarely routed experts and drops busy ones (docs/method.md).
    out.is_mean = out.field == "reap" || out.field == "ean_mean" || out.field == "avg_gate_weight";
    out.times_counts = out.is_mean && src.sum_means;
    out.domains.resize(files.size());
    for (size_t d = 0; d < files.size(); ++d) {
        const std::string& path = src.files[d].path;
        DomainData& dom = out.domains[d];
        dom.name = src.files[d].name;
        dom.path = path;
        dom.format = "json";
        dom.blocks.assign(out.blocks.size(), BlockStats{});
        for (const auto& [b, v] : files[d].blocks)
            if (!std::binary_search(out.blocks.begin(), out.blocks.end(), b))
                throw UsageError(
                    fmt::format("{}: block {} has scores but is not an MoE block of the model", path, b));
        for (size_t bi = 0; bi < out.blocks.size(); ++bi) {
            const int b = out.blocks[bi];
            auto it = files[d].blocks.find(b);
            if (it == files[d].blocks.end())
                throw UsageError(fmt::format("{}: has no scores for MoE block {}", path, b));
            dom.blocks[bi] = block_scores(it->second, path, b, out);
        }
    }
    for (auto& dom : out.domains) {
        auto f = InputFile::open(dom.path);
        dom.file_size = f->size();
        if (hash) dom.sha256 = sha256_file(*f);
    }
    return out;
}

}  // namespace gguf_reap
