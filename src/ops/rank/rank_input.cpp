// rank, step 1: read the inputs and check that they fit together (and the model, with --model). Only
// the ffn_down_exps entry of each MoE block is read from an imatrix (its in_sum2 rows hold each
// expert's intermediate-activation energy per channel, its counts the routed tokens): imatrix_scan.cpp.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "format/dequant.h"
#include "format/ggml_types.h"
#include "format/imatrix.h"
#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "gguf_reap/width.h"
#include "io/parallel.h"
#include "io/paths.h"
#include "io/sha256.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "ops/rank/criteria.h"
#include "ops/rank/down_norms.h"
#include "ops/rank/imatrix_sanity.h"
#include "ops/rank/imatrix_scan.h"
#include "ops/rank/rank_steps.h"
#include "ops/rank/score_file.h"
#include "services/imatrix_domains.h"

namespace gguf_reap {

namespace {

struct ModelInfo {
    std::optional<ShardSet> set;
    MoeLayout layout;
    std::map<int, const TensorRef*> down;  // block → ffn_down_exps.weight
};

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

}  // namespace

namespace {

// --from-plan: another tool's plan, read and checked against the blocks and experts of `in` (the model
// at `model_path`, "" without --model; `external`: the blocks came from score files).
void import_plan(const RankOptions& opts, const std::string& model_path, bool external, RankInput& in) {
    if (opts.from_plan.empty()) return;
    RankInput::Imported im{load_external_plan(opts.from_plan), opts.from_plan, ""};
    const ExternalPlan& p = im.plan;
    const std::string& path = opts.from_plan;
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
    if (opts.hash_inputs) im.sha256 = sha256_file(*InputFile::open(path));
    in.imported = std::move(im);
}

}  // namespace

namespace {

// Which inputs the criterion reads, and that they are given (and nothing it does not read).
void check_rank_options(const RankOptions& opts) {
    const CriterionSpec& criterion = criterion_spec(opts.criterion);
    const bool external = criterion.needs.score_files;
    if (external && opts.score_files.empty())
        throw RequestError({RequestField::kCriterion, " external needs score files: ", RequestField::kScores,
                            " NAME=FILE (JSON, see docs/rank.md)"});
    if (external && !opts.imatrices.empty())
        throw RequestError({RequestField::kCriterion, " external ranks by ", RequestField::kScores,
                            " files; ", RequestField::kImatrix, " cannot be combined with it"});
    if (!external && !opts.score_files.empty())
        throw RequestError(
            {RequestField::kScores, " files are only read with ", RequestField::kCriterion, " external"});
    if (!external && opts.imatrices.empty())
        throw RequestError({"give at least one ", RequestField::kImatrix, " NAME=FILE"});
    if (criterion.needs.down_weights && opts.model.empty())
        throw RequestError({RequestField::kCriterion, fmt::format(" {} needs ", criterion.name),
                            RequestField::kModel, std::string(": ") + criterion.model_why});
    if (external && !opts.neuron_plan.empty())
        throw RequestError({RequestField::kNeuronPlan, " restricts imatrix energies; it does not apply to ",
                            RequestField::kCriterion, " external"});
}

// deepseek4's hash-routed blocks: how many (token, slot) entries of each one's token → expert table
// name each expert (services/hash_routing.h).
void count_hash_entries(const ModelInfo& model, RankInput& in) {
    const MoeLayout& L = model.layout;
    for (const auto& b : L.blocks) {
        if (!b.hash_table) continue;
        const TensorRef& r = model.set->tensors()[*b.hash_table];
        std::vector<int32_t> ids(r.nbytes / 4);
        model.set->shards()[r.shard].file->read(r.abs_offset, ids.data(), 4 * ids.size());
        auto& count = in.hash_entries[b.block];
        count.assign(L.expert_count, 0);
        for (size_t i = 0; i < ids.size(); ++i) {
            if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= L.expert_count)
                throw InputError(model.set->shards()[r.shard].path, r.abs_offset + 4 * i,
                                 fmt::format("tensor '{}' entry {}", model.set->info(r).name, i),
                                 fmt::format("expert id {} is outside 0..{}", ids[i], L.expert_count - 1));
            ++count[static_cast<size_t>(ids[i])];
        }
    }
}

// --model: its MoE blocks, experts and identity, and each block's ffn_down_exps (the tensor whose
// imatrix entry rank reads; score files need none).
ModelInfo read_model(const RankOptions& opts, bool external, RankInput& in) {
    ModelInfo model;
    model.set.emplace(ShardSet::open(opts.model));
    model.layout = build_moe_layout(*model.set);
    const MoeLayout& L = model.layout;
    if (L.blocks.empty())
        throw UsageError(
            fmt::format("{}: the model has no MoE blocks (no {}.expert_count or no expert tensors): "
                        "there are no experts to rank",
                        opts.model, L.arch.empty() ? "<arch>" : L.arch));
    in.expert_count = static_cast<int64_t>(L.expert_count);
    in.expert_used_count = L.expert_used_count;
    in.block_count = L.block_count;
    if (const Kv* n = model.set->find_kv("general.name"))
        if (const auto s = n->as_string()) in.model_name = *s;
    in.expert_group_count = L.expert_group_count;
    for (const auto& b : L.blocks) {
        in.blocks.push_back(b.block);
        if (L.is_nextn_block(b.block)) in.nextn_blocks.push_back(b.block);
        for (const auto& t : b.tensors)
            if (t.kind == &down_projection_kind()) model.down[b.block] = &model.set->tensors()[t.tensor];
        if (!model.down.count(b.block) && !external)
            throw UsageError(
                fmt::format("{}: MoE block {} has no ffn_down_exps.weight, the tensor whose imatrix "
                            "entry rank reads",
                            opts.model, b.block));
    }
    count_hash_entries(model, in);
    in.source = keeplist_source_of(*model.set, L);
    return model;
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
                           const ImatrixEntry& e, const std::map<int, GgufShape>& gguf_shape, RankInput& in) {
    if (im.kind() != ImatrixKind::kLegacy) return e.n_mat;
    if (in.expert_count > 0) return in.expert_count;
    if (auto g = gguf_shape.find(b); g != gguf_shape.end()) {
        in.notes.push_back(
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
             RequestField::kModel, " (or a GGUF imatrix of the same model)"});
    if (bi == 0)
        in.notes.push_back(fmt::format("{}: expert count {} derived from {}", spec.name, *derived, how));
    return *derived;
}

// Per imatrix and block (in.blocks): the ffn_down_exps entry (null: none) and its expert width.
struct BlockEntries {
    std::vector<std::vector<const ImatrixEntry*>> entry;
    std::vector<std::vector<int64_t>> width;  // 0: no entry
};

// Each imatrix's ffn_down_exps entries (services/imatrix_domains.h) with the experts of every one, the
// same everywhere and as in the model; the blocks, when no model gave them.
BlockEntries match_entries(const RankOptions& opts, const std::vector<DomainSpec>& specs,
                           const std::vector<ImatrixFile>& ims, const ModelInfo& model, RankInput& in) {
    std::map<int, GgufShape> gguf_shape;  // block → shape in the first GGUF imatrix that has it
    ImatrixDomainChecks checks;
    checks.found = [&](size_t d, const std::map<int, const ImatrixEntry*>& down) {
        check_gguf_shapes(ims[d], d, down, specs, gguf_shape);
    };
    checks.entry = [&](size_t d, size_t bi, int b, const ImatrixEntry& e) {
        // A legacy .dat stores no shape: with the model, its values must be the model's experts × expert
        // width, else it was made for another model, said as for a GGUF imatrix.
        if (ims[d].kind() == ImatrixKind::kLegacy && model.set && opts.neuron_plan.empty())
            if (const auto it = model.down.find(b); it != model.down.end()) {
                const auto W = static_cast<uint64_t>(model.set->info(*it->second).ne[0]);
                const uint64_t want = model.layout.expert_count * W;
                if (static_cast<uint64_t>(e.nval) != want)
                    throw UsageError(fmt::format(
                        "{}: {} holds {} values, but {} has {} experts × {} channels = {}: the imatrix was "
                        "made for another model",
                        specs[d].path, e.name, e.nval, opts.model, model.layout.expert_count, W, want));
            }
        const int64_t E = entry_expert_count(ims[d], specs[d], bi, b, e, gguf_shape, in);
        if (E < 1 || e.nval % E != 0)
            throw InputError(ims[d].path(), e.entry_offset, fmt::format("entry '{}'", e.name),
                             fmt::format("{} values cannot be split among {} experts", e.nval, E));
        if (in.expert_count == 0) in.expert_count = E;
        if (E != in.expert_count)
            throw UsageError(fmt::format("{}: {} has {} experts, but {} has {}{}", specs[d].path, e.name, E,
                                         model.set ? opts.model : "the other entries", in.expert_count,
                                         model.set ? ": the imatrix was made for another model" : ""));
    };
    const std::vector<int> model_blocks = in.blocks;
    const ImatrixDomains found =
        match_imatrix_domains(ims, specs, model.set ? &model_blocks : nullptr, opts.model, in.notes, checks);
    in.blocks = found.blocks;
    // Every entry holds in.expert_count experts (checked above).
    BlockEntries x;
    x.entry.assign(ims.size(), std::vector<const ImatrixEntry*>(in.blocks.size(), nullptr));
    x.width.assign(ims.size(), std::vector<int64_t>(in.blocks.size(), 0));
    for (size_t d = 0; d < ims.size(); ++d)
        for (size_t bi = 0; bi < in.blocks.size(); ++bi)
            if (const auto it = found.down[d].find(in.blocks[bi]); it != found.down[d].end()) {
                x.entry[d][bi] = it->second;
                x.width[d][bi] = it->second->nval / in.expert_count;
            }
    return x;
}

// Each block's expert width: the same in every imatrix that has the block.
std::vector<int64_t> agree_widths(const std::vector<DomainSpec>& specs, const BlockEntries& x,
                                  RankInput& in) {
    std::vector<int64_t> block_width(in.blocks.size(), 0);
    for (size_t bi = 0; bi < in.blocks.size(); ++bi) {
        for (size_t d = 0; d < specs.size(); ++d) {
            if (!x.width[d][bi]) continue;
            if (block_width[bi] && block_width[bi] != x.width[d][bi])
                throw UsageError(
                    fmt::format("{}: blk.{}.ffn_down_exps has expert width {}, other imatrices have {}",
                                specs[d].path, in.blocks[bi], x.width[d][bi], block_width[bi]));
            block_width[bi] = x.width[d][bi];
        }
    }
    in.expert_width = block_width.front();
    return block_width;
}

// --neuron-plan: the channels each expert keeps, for the blocks and widths found.
std::optional<NeuronPlan> read_plan(const RankOptions& opts, const std::vector<int64_t>& block_width,
                                    RankInput& in) {
    if (opts.neuron_plan.empty()) return std::nullopt;
    const int64_t native = *std::max_element(block_width.begin(), block_width.end());
    NeuronPlan plan = read_neuron_plan(opts.neuron_plan, in.blocks, in.expert_count, native);
    in.plan_path = opts.neuron_plan;
    in.plan_k = plan.k;
    if (opts.hash_inputs) in.plan_sha256 = sha256_file(*InputFile::open(opts.neuron_plan));
    return plan;
}

// With --model: its ffn_down_exps widths match the imatrices' (or the plan's k), and weighted-energy
// can read its weights.
void check_model_widths(const RankOptions& opts, const ModelInfo& model,
                        const std::optional<NeuronPlan>& plan, const std::vector<DomainSpec>& specs,
                        const BlockEntries& x, const std::vector<int64_t>& block_width, const RankInput& in) {
    const CriterionSpec& criterion = criterion_spec(opts.criterion);
    for (size_t bi = 0; bi < in.blocks.size(); ++bi) {
        const TensorRef* r = model.down.at(in.blocks[bi]);
        const TensorInfo& t = model.set->info(*r);
        const int64_t want = plan ? plan->k : block_width[bi];
        if (t.ne[0] != want) {
            if (plan)
                throw UsageError(
                    fmt::format("{}: {} has width {} but the neuron plan keeps {} channels: the model "
                                "must be the width-pruned one made with this plan",
                                opts.model, t.name, t.ne[0], plan->k));
            size_t from = 0;  // the first domain with data for the block (all agree)
            while (from + 1 < specs.size() && !x.width[from][bi]) ++from;
            throw RequestError(
                Message{fmt::format("{}: {} has expert width {} but the imatrix entry in {} has {}",
                                    opts.model, t.name, t.ne[0], specs[from].path, block_width[bi])} +
                (t.ne[0] < block_width[bi]
                     ? Message{": a width-pruned model needs its ", RequestField::kNeuronPlan}
                     : Message{": the imatrix was made for another model"}));
        }
        if (criterion.needs.down_weights && !can_dequantize(t.type))
            throw RequestError({fmt::format("{}: {} is {}: {} reads the down-projection weights and handles "
                                            "F32, F16, BF16 and Q8_0 only; use ",
                                            opts.model, t.name, ggml_type_display(t.type), criterion.name),
                                RequestField::kCriterion,
                                " energy, or a model file with such a down projection"});
    }
}

// What gguf-reap calibrate recorded of each GGUF imatrix (gguf_reap/calibrate.h): its entry in the
// calibrate.json beside it, or in --calibration. A record whose imatrix sha256 is not the file's (the
// file was made again since) is left out, with a note.
void attach_calibration(const RankOptions& opts, RankInput& in) {
    bool any = false;
    for (DomainData& dom : in.domains) {
        if (dom.format != "gguf") continue;
        auto rec = find_calibration(dom.path, opts.calibration, dom.sha256);
        if (rec && !dom.sha256.empty() && rec->imatrix_sha256 != dom.sha256) {
            in.notes.push_back(
                fmt::format("{}: {} records another imatrix of this name (sha256 {}); its "
                            "calibration is not reported",
                            dom.path, rec->json_path, rec->imatrix_sha256.substr(0, 12)));
            rec.reset();
        }
        any = any || rec.has_value();
        dom.calibration = std::move(rec);
    }
    if (!opts.calibration.empty() && !any)
        throw RequestError({RequestField::kCalibration,
                            fmt::format(" {}: it records none of the imatrices given", opts.calibration)});
}

// Each imatrix's metadata: format, size, datasets, chunks and tokens.
void describe_domains(const std::vector<ImatrixFile>& ims, RankInput& in) {
    for (size_t d = 0; d < ims.size(); ++d) {
        DomainData& dom = in.domains[d];
        dom.format = imatrix_kind_name(ims[d].kind());
        dom.file_size = ims[d].file().size();
        dom.datasets = ims[d].datasets();
        dom.chunks = ims[d].chunk_count();
        dom.chunk_size = ims[d].chunk_size();
        if (dom.chunks && dom.chunk_size) dom.tokens = *dom.chunks * *dom.chunk_size;
        dom.blocks.resize(in.blocks.size());
        if (ims[d].kind() == ImatrixKind::kLegacy)
            in.notes.push_back(
                fmt::format("{}: legacy .dat: per-expert routing counts and total energies are not "
                            "stored (only per-token means), so token and energy shares are unknown",
                            dom.name));
    }
}

// What the counts and metadata contradict: warnings, or with --strict a refusal naming the first.
void check_sanity(const RankOptions& opts, RankInput& in) {
    in.sanity = check_imatrix_sanity(in);
    if (!opts.strict || in.sanity.empty()) return;
    const SanityProblem& p = in.sanity.front();
    const Message more =
        in.sanity.size() > 1
            ? Message{" (", RequestField::kStrict,
                      fmt::format("; {} input problems in all, listed without it)", in.sanity.size())}
            : Message{" (", RequestField::kStrict, ")"};
    if (!p.file.empty()) throw InputError(p.file, p.offset, p.field, Message{p.message} + more);
    throw RequestError(Message{p.message} + more);
}

// --criterion external: the score files (ops/rank/score_file.h), their sizes and hashes, and --from-plan.
void load_score_input(const RankOptions& opts, const ModelInfo& model, RankInput& in) {
    load_score_domains(opts, in, model.set.has_value());
    for (auto& dom : in.domains) {
        auto f = InputFile::open(dom.path);
        dom.file_size = f->size();
        if (opts.hash_inputs) dom.sha256 = sha256_file(*f);
    }
    import_plan(opts, model.set ? opts.model : std::string(), true, in);
}

// The imatrices: matched to the blocks, checked against each other, the plan and the model, then read
// in one pass per file (docs/perf/rank.md), and --from-plan.
void load_imatrix_input(const RankOptions& opts, const ModelInfo& model, RankInput& in) {
    const std::vector<DomainSpec>& specs = opts.imatrices;
    const int threads = resolve_threads(opts.threads);
    const std::vector<ImatrixFile> ims = open_imatrices(specs, threads);
    for (size_t d = 0; d < ims.size(); ++d) in.domains[d].format = imatrix_kind_name(ims[d].kind());
    check_criterion_inputs(in, opts);
    const BlockEntries entries = match_entries(opts, specs, ims, model, in);
    const std::vector<int64_t> block_width = agree_widths(specs, entries, in);
    const std::optional<NeuronPlan> plan = read_plan(opts, block_width, in);
    if (model.set) check_model_widths(opts, model, plan, specs, entries, block_width, in);
    describe_domains(ims, in);

    ImatrixScan scan;
    scan.ims = &ims;
    scan.entry = entries.entry;
    scan.block_width = block_width;
    scan.expert_count = in.expert_count;
    scan.plan = plan ? &*plan : nullptr;
    scan.hash = opts.hash_inputs;
    scan.threads = threads;
    if (criterion_spec(opts.criterion).needs.down_weights)
        scan.column_norms = [&](size_t bi) {
            return down_column_norms(*model.set, *model.down.at(in.blocks[bi]));
        };
    scan_imatrices(scan, in);
    attach_calibration(opts, in);

    import_plan(opts, model.set ? opts.model : std::string(), false, in);
}

}  // namespace

RankInput load_rank_input(const RankOptions& opts) {
    check_rank_options(opts);
    const bool external = criterion_spec(opts.criterion).needs.score_files;
    const auto& specs = external ? opts.score_files : opts.imatrices;
    check_domain_names(specs);
    RankInput in;
    const ModelInfo model = opts.model.empty() ? ModelInfo{} : read_model(opts, external, in);
    in.domains.resize(specs.size());
    for (size_t d = 0; d < specs.size(); ++d) {
        in.domains[d].name = specs[d].name;
        in.domains[d].path = specs[d].path;
    }
    if (external) {
        load_score_input(opts, model, in);
        return in;
    }
    load_imatrix_input(opts, model, in);
    check_sanity(opts, in);
    return in;
}

}  // namespace gguf_reap
