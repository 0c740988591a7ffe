// rank --from-plan (rank_import.h).
#include "ops/rank/rank_import.h"

#include <algorithm>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/input_file.h"
#include "io/sha256.h"

namespace gguf_reap {

RankInput::Imported import_plan(const std::string& path, bool hash, const std::string& model_path,
                                bool external, const RankInput& in) {
    RankInput::Imported im{load_external_plan(path), path, ""};
    const ExternalPlan& p = im.plan;
    if (p.original_experts && static_cast<int64_t>(*p.original_experts) != in.expert_count)
        throw UsageError(fmt::format("{}: the plan is for {} experts per layer but the {} {}", path,
                                     *p.original_experts,
                                     external             ? "score files have"
                                     : model_path.empty() ? "imatrix has"
                                                          : "model has",
                                     in.expert_count));
    if (p.format == PlanFormat::kHipfire && !model_path.empty() && p.keep.size() != in.block_count)
        throw UsageError(fmt::format("{}: hipfire's plan has a row for each of {} layers but {} has {}", path,
                                     p.keep.size(), model_path, in.block_count));
    for (int b : in.blocks) {
        const auto it = p.keep.find(b);
        if (it == p.keep.end())
            throw UsageError(fmt::format("{}: the plan has no kept experts for MoE layer {}", path, b));
        if (it->second.back() >= in.expert_count)
            throw UsageError(fmt::format("{}: layer {} keeps expert {}, but a layer has {} experts", path, b,
                                         it->second.back(), in.expert_count));
    }
    if (p.format == PlanFormat::kKeepmap)
        for (const auto& [layer, row] : p.keep)
            if (!std::binary_search(in.blocks.begin(), in.blocks.end(), layer))
                throw UsageError(
                    fmt::format("{}: the plan keeps experts of layer {}, which is not an MoE "
                                "block here: a plan for another model?",
                                path, layer));
    if (hash) im.sha256 = sha256_file(*InputFile::open(path));
    return im;
}

}  // namespace gguf_reap
