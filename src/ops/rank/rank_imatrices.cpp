// rank's imatrix reader (rank_imatrices.h).
#include "ops/rank/rank_imatrices.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "format/dequant.h"
#include "format/ggml_types.h"
#include "format/imatrix.h"
#include "gguf_reap/calibrate.h"
#include "gguf_reap/error.h"
#include "gguf_reap/width.h"
#include "io/parallel.h"
#include "io/sha256.h"
#include "ops/rank/criteria.h"
#include "ops/rank/down_norms.h"
#include "ops/rank/imatrix_scan.h"
#include "services/imatrix_domains.h"

namespace gguf_reap {

namespace {

// The expert count of a legacy entry, which the .dat format does not store: from the model, a GGUF
// imatrix of the same model, or the same file's router entry (ne0 = n_embd) and gate/up entries
// (n_embd × E values).
std::optional<int64_t> legacy_expert_count(const ImatrixFile& im, int block, std::string& how) {
    const ExpertTensorKind& router_kind = expert_kind(ExpertRole::kRouter);
    const ImatrixEntry* router = im.find(block_tensor_name(block, router_kind));
    if (!router || router->nval < 1) return std::nullopt;
    for (Projection p : {Projection::kUp, Projection::kGate, Projection::kGateUp}) {
        const ExpertTensorKind& k = expert_kind(ExpertRole::kWeight, p);
        const ImatrixEntry* x = im.find(block_tensor_name(block, k));
        if (x && x->nval % router->nval == 0 && x->nval / router->nval >= 1) {
            how = fmt::format("blk.{}.{} ({} values = n_embd) and blk.{}.{} ({} values = n_embd × experts)",
                              block, router_kind.base, router->nval, block, k.base, x->nval);
            return x->nval / router->nval;
        }
    }
    return std::nullopt;
}

// The shape of a block's entry in the first GGUF imatrix that has it.
struct GgufShape {
    int64_t n_mat, ne0;
    size_t domain;
};

// GGUF imatrices state each entry's shape: they must agree.
void check_gguf_shapes(const ImatrixFile& im, size_t d, const std::map<int, const ImatrixEntry*>& down,
                       const std::vector<DomainSpec>& specs, std::map<int, GgufShape>& gguf_shape) {
    if (im.kind() != ImatrixKind::kGguf) return;
    for (const auto& [b, e] : down) {
        auto [it, inserted] = gguf_shape.emplace(b, GgufShape{e->n_mat, e->ne0, d});
        if (!inserted && (it->second.n_mat != e->n_mat || it->second.ne0 != e->ne0))
            throw UsageError(
                fmt::format("{}: {} is [{}, {}] but in {} it is [{}, {}]: the imatrices were made "
                            "from different models",
                            specs[d].path, e->name, e->ne0, e->n_mat, specs[it->second.domain].path,
                            it->second.ne0, it->second.n_mat));
    }
}

// The expert count of one entry: a GGUF entry states it; a legacy one takes the model's, a GGUF
// imatrix's, or what the file's router and gate/up entries imply (noted).
int64_t entry_expert_count(const ImatrixFile& im, const DomainSpec& spec, size_t bi, int b,
                           const ImatrixEntry& e, const std::map<int, GgufShape>& gguf_shape,
                           ImatrixRead& out) {
    if (im.kind() != ImatrixKind::kLegacy) return e.n_mat;
    if (out.expert_count > 0) return out.expert_count;
    if (auto g = gguf_shape.find(b); g != gguf_shape.end()) {
        out.notes.push_back(
            fmt::format("{}: expert count of blk.{} ({}) taken from a GGUF imatrix of the same model",
                        spec.name, b, g->second.n_mat));
        return g->second.n_mat;
    }
    std::string how;
    auto derived = legacy_expert_count(im, b, how);
    if (!derived)
        throw RequestError(
            {fmt::format("{}: the legacy .dat format does not store the expert count of {}, and "
                         "this file has no router and gate/up entries to derive it from: give ",
                         spec.path, e.name),
             RankOptions::kModel, " (or a GGUF imatrix of the same model)"});
    if (bi == 0)
        out.notes.push_back(fmt::format("{}: expert count {} derived from {}", spec.name, *derived, how));
    return *derived;
}

// A legacy .dat stores no shape: with the model, its values must be the model's experts × expert width,
// else it was made for another model, said as for a GGUF imatrix.
void check_legacy_size(const DomainSpec& spec, int b, const ImatrixEntry& e, const RankModel& model) {
    const auto it = model.down.find(b);
    if (it == model.down.end()) return;
    const auto W = static_cast<uint64_t>(model.set->info(*it->second).ne[0]);
    const uint64_t want = model.layout.expert_count * W;
    if (static_cast<uint64_t>(e.nval) != want)
        throw UsageError(
            fmt::format("{}: {} holds {} values, but {} has {} experts × {} channels = {}: the imatrix was "
                        "made for another model",
                        spec.path, e.name, e.nval, model.path, model.layout.expert_count, W, want));
}

// Per imatrix and block (out.blocks): the ffn_down_exps entry (null: none) and its expert width.
struct BlockEntries {
    std::vector<std::vector<const ImatrixEntry*>> entry;
    std::vector<std::vector<int64_t>> width;  // 0: no entry
};

// Each imatrix's ffn_down_exps entries (services/imatrix_domains.h) with the experts of every one, the
// same everywhere and as in the model; the blocks, when no model gave them.
BlockEntries match_entries(const ImatrixSources& src, const std::vector<ImatrixFile>& ims,
                           const RankModel& model, ImatrixRead& out) {
    const std::vector<DomainSpec>& specs = src.files;
    std::map<int, GgufShape> gguf_shape;  // block → shape in the first GGUF imatrix that has it
    ImatrixDomainChecks checks;
    checks.found = [&](size_t d, const std::map<int, const ImatrixEntry*>& down) {
        check_gguf_shapes(ims[d], d, down, specs, gguf_shape);
    };
    checks.entry = [&](size_t d, size_t bi, int b, const ImatrixEntry& e) {
        if (ims[d].kind() == ImatrixKind::kLegacy && model.set && src.neuron_plan.empty())
            check_legacy_size(specs[d], b, e, model);
        const int64_t E = entry_expert_count(ims[d], specs[d], bi, b, e, gguf_shape, out);
        if (E < 1 || e.nval % E != 0)
            throw InputError(ims[d].path(), e.entry_offset, fmt::format("entry '{}'", e.name),
                             fmt::format("{} values cannot be split among {} experts", e.nval, E));
        if (out.expert_count == 0) out.expert_count = E;
        if (E != out.expert_count)
            throw UsageError(fmt::format("{}: {} has {} experts, but {} has {}{}", specs[d].path, e.name, E,
                                         model.set ? model.path : "the other entries", out.expert_count,
                                         model.set ? ": the imatrix was made for another model" : ""));
    };
    const ImatrixDomains found =
        match_imatrix_domains(ims, specs, model.set ? &model.blocks : nullptr, model.path, out.notes, checks);
    out.blocks = found.blocks;
    // Every entry holds out.expert_count experts (checked above).
    BlockEntries x;
    x.entry.assign(ims.size(), std::vector<const ImatrixEntry*>(out.blocks.size(), nullptr));
    x.width.assign(ims.size(), std::vector<int64_t>(out.blocks.size(), 0));
    for (size_t d = 0; d < ims.size(); ++d)
        for (size_t bi = 0; bi < out.blocks.size(); ++bi)
            if (const auto it = found.down[d].find(out.blocks[bi]); it != found.down[d].end()) {
                x.entry[d][bi] = it->second;
                x.width[d][bi] = it->second->nval / out.expert_count;
            }
    return x;
}

// Each block's expert width: the same in every imatrix that has the block.
std::vector<int64_t> agree_widths(const std::vector<DomainSpec>& specs, const BlockEntries& x,
                                  const std::vector<int>& blocks) {
    std::vector<int64_t> block_width(blocks.size(), 0);
    for (size_t bi = 0; bi < blocks.size(); ++bi) {
        for (size_t d = 0; d < specs.size(); ++d) {
            if (!x.width[d][bi]) continue;
            if (block_width[bi] && block_width[bi] != x.width[d][bi])
                throw UsageError(
                    fmt::format("{}: blk.{}.ffn_down_exps has expert width {}, other imatrices have {}",
                                specs[d].path, blocks[bi], x.width[d][bi], block_width[bi]));
            block_width[bi] = x.width[d][bi];
        }
    }
    return block_width;
}

// With a model: its ffn_down_exps widths match the imatrices' (or the plan's k), and weighted-energy
// can read its weights.
void check_model_widths(const ImatrixSources& src, const RankModel& model,
                        const std::optional<NeuronPlan>& plan, const BlockEntries& x,
                        const std::vector<int64_t>& block_width, const std::vector<int>& blocks) {
    const std::vector<DomainSpec>& specs = src.files;
    for (size_t bi = 0; bi < blocks.size(); ++bi) {
        const TensorRef* r = model.down.at(blocks[bi]);
        const TensorInfo& t = model.set->info(*r);
        const int64_t want = plan ? plan->k : block_width[bi];
        if (t.ne[0] != want) {
            if (plan)
                throw UsageError(
                    fmt::format("{}: {} has width {} but the neuron plan keeps {} channels: the model "
                                "must be the width-pruned one made with this plan",
                                model.path, t.name, t.ne[0], plan->k));
            size_t from = 0;  // the first domain with data for the block (all agree)
            while (from + 1 < specs.size() && !x.width[from][bi]) ++from;
            throw RequestError(
                Message{fmt::format("{}: {} has expert width {} but the imatrix entry in {} has {}",
                                    model.path, t.name, t.ne[0], specs[from].path, block_width[bi])} +
                (t.ne[0] < block_width[bi]
                     ? Message{": a width-pruned model needs its ", RankOptions::kNeuronPlan}
                     : Message{": the imatrix was made for another model"}));
        }
        if (src.column_norms && !can_dequantize(t.type))
            throw RequestError(
                {fmt::format("{}: {} is {}: {} reads the down-projection weights and handles "
                             "F32, F16, BF16 and Q8_0 only; use ",
                             model.path, t.name, ggml_type_display(t.type), criterion_name(src.criterion)),
                 RankOptions::kCriterion, " energy, or a model file with such a down projection"});
    }
}

// Each imatrix's metadata: format, size, datasets, chunks and tokens.
void describe_domains(const std::vector<ImatrixFile>& ims, ImatrixRead& out) {
    for (size_t d = 0; d < ims.size(); ++d) {
        DomainData& dom = out.domains[d];
        dom.file_size = ims[d].file().size();
        dom.datasets = ims[d].datasets();
        dom.chunks = ims[d].chunk_count();
        dom.chunk_size = ims[d].chunk_size();
        if (dom.chunks && dom.chunk_size) dom.tokens = *dom.chunks * *dom.chunk_size;
        if (ims[d].kind() == ImatrixKind::kLegacy)
            out.notes.push_back(
                fmt::format("{}: legacy .dat: per-expert routing counts and total energies are not "
                            "stored (only per-token means), so token and energy shares are unknown",
                            dom.name));
    }
}

// What gguf-reap calibrate recorded of each GGUF imatrix (gguf_reap/calibrate.h): its entry in the
// calibrate.json beside it, or in `calibration`. A record whose imatrix sha256 is not the file's (the
// file was made again since) is left out, with a note.
void attach_calibration(const std::string& calibration, ImatrixRead& out) {
    bool any = false;
    for (DomainData& dom : out.domains) {
        if (dom.format != "gguf") continue;
        auto rec = find_calibration(dom.path, calibration, dom.sha256);
        if (rec && !dom.sha256.empty() && rec->imatrix_sha256 != dom.sha256) {
            out.notes.push_back(
                fmt::format("{}: {} records another imatrix of this name (sha256 {}); its "
                            "calibration is not reported",
                            dom.path, rec->json_path, rec->imatrix_sha256.substr(0, 12)));
            rec.reset();
        }
        any = any || rec.has_value();
        dom.calibration = std::move(rec);
    }
    if (!calibration.empty() && !any)
        throw RequestError({RankOptions::kCalibration,
                            fmt::format(" {}: it records none of the imatrices given", calibration)});
}

}  // namespace

ImatrixRead read_imatrices(const ImatrixSources& src, const RankModel& model, bool hash, int threads) {
    ImatrixRead out;
    out.expert_count = static_cast<int64_t>(model.layout.expert_count);  // 0 without a model
    threads = resolve_threads(threads);
    const std::vector<ImatrixFile> ims = open_imatrices(src.files, threads);
    out.domains.resize(ims.size());
    for (size_t d = 0; d < ims.size(); ++d) {
        out.domains[d].name = src.files[d].name;
        out.domains[d].path = src.files[d].path;
        out.domains[d].format = imatrix_kind_name(ims[d].kind());
    }
    check_criterion_inputs(out.domains, src.criterion, src.consensus);
    const BlockEntries entries = match_entries(src, ims, model, out);
    const std::vector<int64_t> block_width = agree_widths(src.files, entries, out.blocks);
    out.expert_width = block_width.front();
    std::optional<NeuronPlan> plan;  // --neuron-plan: the channels each expert keeps
    if (!src.neuron_plan.empty()) {
        const int64_t native = *std::max_element(block_width.begin(), block_width.end());
        plan = read_neuron_plan(src.neuron_plan, out.blocks, out.expert_count, native);
        out.plan_path = src.neuron_plan;
        out.plan_k = plan->k;
        if (hash) out.plan_sha256 = sha256_file(*InputFile::open(src.neuron_plan));
    }
    if (model.set) check_model_widths(src, model, plan, entries, block_width, out.blocks);
    describe_domains(ims, out);

    ImatrixScan scan;
    scan.ims = &ims;
    scan.entry = entries.entry;
    scan.block_width = block_width;
    scan.expert_count = out.expert_count;
    scan.plan = plan ? &*plan : nullptr;
    scan.hash = hash;
    scan.threads = threads;
    if (src.column_norms)
        scan.column_norms = [&](size_t bi) {
            return down_column_norms(*model.set, *model.down.at(out.blocks[bi]));
        };
    std::vector<DomainScan> scanned = scan_imatrices(scan);
    for (size_t d = 0; d < ims.size(); ++d) {
        out.domains[d].blocks = std::move(scanned[d].blocks);
        out.domains[d].sha256 = std::move(scanned[d].sha256);
    }
    attach_calibration(src.calibration, out);
    return out;
}

}  // namespace gguf_reap
