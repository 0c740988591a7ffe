// A model's figures from its tensor shapes: size, parameters, decode bytes, per-rank residency, fit and KV
// cache, before and after a pruning (include/gguf_reap/estimate.h). estimate prints them, the budget
// search sizes each K with them, and the card states them.
#include "gguf_reap/estimate.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "format/gguf.h"
#include "gguf_reap/error.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/splice.h"
#include "gguf_reap/width.h"
#include "io/checked.h"
#include "io/sha256.h"
#include "model/keeplist_file.h"
#include "model/moe_layout.h"
#include "model/provenance.h"
#include "model/shard_set.h"
#include "model/tensor_table.h"
#include "model/width_rules.h"
#include "services/llama_cpp/llama_recipes.h"
#include "services/model_figures.h"
#include "services/splice_plan.h"

namespace gguf_reap {

namespace {

// A tensor as a shape: the model's own, or the one a splice would write.
struct Shaped {
    const TensorInfo* src = nullptr;
    std::array<int64_t, 4> ne{1, 1, 1, 1};
    uint64_t nbytes = 0;
    const ExpertTensor* expert = nullptr;
    bool nextn = false;
    int block = -1;  // N of blk.N; -1 outside the blocks
    uint64_t elements() const {
        return static_cast<uint64_t>(ne[0]) * static_cast<uint64_t>(ne[1]) * static_cast<uint64_t>(ne[2]) *
               static_cast<uint64_t>(ne[3]);
    }
};

uint64_t nbytes_of(int32_t type, const std::array<int64_t, 4>& ne) {
    // The shapes are the model's own or narrower, and the parser has checked the model's sizes.
    return *ggml_row_size(type, ne[0]) * static_cast<uint64_t>(ne[1]) * static_cast<uint64_t>(ne[2]) *
           static_cast<uint64_t>(ne[3]);
}

std::vector<Shaped> model_shapes(const ShardSet& model, const MoeLayout& layout) {
    std::vector<const ExpertTensor*> expert_of(model.tensors().size(), nullptr);
    for (const auto& b : layout.blocks)
        for (const auto& et : b.tensors) expert_of[et.tensor] = &et;
    std::vector<Shaped> out;
    for (size_t i = 0; i < model.tensors().size(); ++i) {
        const TensorInfo& t = model.info(model.tensors()[i]);
        Shaped s;
        s.src = &t;
        s.ne = t.ne;
        s.nbytes = t.nbytes;
        s.expert = expert_of[i];
        const auto split = split_block_name(t.name);
        s.nextn = split && layout.is_nextn_block(split->first);
        if (split) s.block = split->first;
        out.push_back(s);
    }
    return out;
}

// The shapes a splice writes: expert axis → n_keep; with a width plan the expert FFN width → k.
std::vector<Shaped> pruned_shapes(std::vector<Shaped> shapes, uint64_t n_keep, int64_t k) {
    for (Shaped& s : shapes) {
        if (!s.expert) continue;
        s.ne[s.expert->axis()] = static_cast<int64_t>(n_keep);
        if (k > 0 && s.expert->kind->width_cut())
            s.ne[static_cast<size_t>(s.expert->kind->width_axis)] = s.expert->kind->width_factor * k;
        s.nbytes = nbytes_of(s.src->type, s.ne);
    }
    return shapes;
}

bool is_replicated(const Shaped& s) {
    if (s.expert && s.expert->kind->read_per_token()) return true;
    if (is_norm(s.src->name)) return true;
    return s.ne[1] == 1 && s.ne[2] == 1 && s.ne[3] == 1;
}

ModelFigures figures(const std::vector<Shaped>& shapes, uint64_t expert_count, uint64_t used, bool tied) {
    ModelFigures f;
    f.expert_count = expert_count;
    const uint64_t k_used = std::min(used, expert_count);
    f.tied = tied;
    for (const Shaped& s : shapes) {
        const uint64_t nel = s.elements();
        f.tensor_bytes += s.nbytes;
        if (s.expert && !s.expert->kind->read_per_token()) f.expert_bytes_by_block[s.block] += s.nbytes;
        if (is_token_embedding(s.src->name)) f.token_embd_bytes += s.nbytes;
        f.parameters += nel;
        if (is_replicated(s)) f.replicated_bytes += s.nbytes;
        if (s.expert && s.expert->kind == &down_projection_kind() && f.expert_width == 0)
            f.expert_width = static_cast<uint64_t>(s.ne[0]);
        if (s.nextn) {
            f.nextn_bytes += s.nbytes;
            continue;
        }
        if (s.expert && s.expert->kind->read_per_token()) {
            f.decode_router += s.nbytes;
            f.active_parameters += nel;
        } else if (s.expert) {
            // Slabs are equal along the expert axis: per expert nbytes / E, elements / E.
            const auto e = static_cast<uint64_t>(s.ne[s.expert->axis()]);
            f.decode_experts += s.nbytes / e * k_used;
            f.active_parameters += nel / e * k_used;
        } else if (is_token_embedding(s.src->name) && !tied) {
            // One embedding row per token (GET_ROWS), unless the matrix is also the output projection.
            f.decode_dense += *ggml_row_size(s.src->type, s.ne[0]);
            f.active_parameters += static_cast<uint64_t>(s.ne[0]);
        } else {
            f.decode_dense += s.nbytes;
            f.active_parameters += nel;
        }
    }
    return f;
}

uint64_t padded(uint64_t n, uint64_t alignment) {
    return *pad_to(n, alignment);
}

// Encoded size of a KV as serialize_header writes it.
uint64_t kv_bytes(const Kv& kv) {
    return 8 + kv.key.size() + 4 + kv.raw.size();
}

// File size after a width plan, from the size the same splice without the plan writes (`base`, with
// its tensors' padded sizes) plus the data each narrowed tensor loses and the KVs a width splice adds.
// The shard cuts and header padding may move by up to one alignment unit per shard.
void width_file_bytes(ModelFigures& f, uint64_t base_file, const std::vector<uint64_t>& base_nbytes,
                      const std::vector<uint32_t>& alignment, const std::vector<Shaped>& after,
                      uint64_t added_kv_bytes, uint64_t slack) {
    int64_t delta = 0;
    for (size_t i = 0; i < after.size(); ++i)
        if (alignment[i] != 0)  // 0: a tensor the splice does not write (--drop-mtp)
            delta += static_cast<int64_t>(padded(after[i].nbytes, alignment[i])) -
                     static_cast<int64_t>(padded(base_nbytes[i], alignment[i]));
    f.file_bytes = static_cast<uint64_t>(static_cast<int64_t>(base_file) + delta) + added_kv_bytes;
    f.file_bytes_exact = false;
    f.file_bytes_slack = slack;
}

// Whether splice can make `plan`'s cut byte-exactly: every tensor cut inside its rows keeps whole
// blocks of its type (any plan for float types; whole aligned groups of B channels for a quantized one).
bool element_cuts_exact(const WidthRules& rules, const NeuronPlan& plan) {
    for (const WidthRules::RowType& rt : rules.row_types) {
        const int64_t bs = ggml_type(rt.type)->block_size;
        if (bs > 1 && std::holds_alternative<PartialBlock>(plan_in_blocks(plan, bs))) return false;
    }
    return true;
}

std::vector<FitRow> fit_rows(const ModelFigures& f, const KvFigures& kv, const EstimateResult& e) {
    std::vector<FitRow> rows;
    for (uint64_t n : e.tp) rows.push_back(fit_row(f, kv, n, e.deployment.ctx, e.deployment.overhead));
    return rows;
}

}  // namespace

uint64_t ModelFigures::residency(uint64_t n) const {
    const uint64_t split = tensor_bytes - replicated_bytes;
    return (split + n - 1) / n + replicated_bytes;
}

HostSplit host_split(const ModelFigures& f, const KvFigures& kv, const Offload& offload, uint64_t ctx,
                     uint64_t overhead) {
    HostSplit h;
    for (const auto& [block, bytes] : f.expert_bytes_by_block)
        if (offload.offloads(block)) h.ram_experts += bytes;
    // llama.cpp's input layer (token_embd) lives in host memory; with tied embeddings the output layer
    // gets its own copy on the GPU.
    h.ram_weights = h.ram_experts + f.token_embd_bytes;
    h.gpu_weights = f.tensor_bytes - h.ram_weights + (f.tied ? f.token_embd_bytes : 0);
    const auto kv_bytes = checked_mul(ctx, kv.bytes_per_token);
    if (!kv_bytes)
        throw RequestError({Deployment::kCtx, fmt::format(" {} makes the KV cache overflow 64 bits", ctx)});
    h.gpu_kv = *kv_bytes;
    h.gpu_overhead = overhead;
    if (!checked_add(h.gpu_weights, h.gpu_kv) || !checked_add(h.gpu_weights + h.gpu_kv, h.gpu_overhead))
        throw RequestError({Deployment::kOverhead, " is too large: the total overflows 64 bits"});
    return h;
}

int64_t FitRow::headroom(uint64_t gpu_mem) const {
    return static_cast<int64_t>(gpu_mem) - static_cast<int64_t>(need());
}

std::string tp_list_text(const std::vector<uint64_t>& tp) {
    return fmt::format("{}", fmt::join(tp, ","));
}

std::vector<uint64_t> parse_tp_list(std::string_view text) {
    std::vector<uint64_t> out;
    size_t start = 0;
    while (true) {
        const size_t comma = text.find(',', start);
        const std::string_view item =
            text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        uint64_t v = 0;
        bool ok = !item.empty() && item.size() <= 6;
        for (char c : item) ok = ok && c >= '0' && c <= '9';
        if (ok) {
            for (char c : item) v = v * 10 + static_cast<uint64_t>(c - '0');
            ok = v >= 1 && v <= 65536;
        }
        if (!ok)
            throw RequestError(
                {Deployment::kTp,
                 fmt::format(": '{}' is not a tensor-parallel degree (a whole number from 1 to "
                             "65536; e.g. ",
                             item),
                 Deployment::kTp, " 2,4,8)"});
        out.push_back(v);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return out;
}

AfterPlan load_after_plan(const ShardSet& model, const MoeLayout& layout, const std::string& neuron_plan_path,
                          bool drop_mtp, std::string tool_version) {
    AfterPlan p;
    p.drop_mtp = drop_mtp;
    p.tool_version = std::move(tool_version);
    if (drop_mtp && layout.nextn_predict_layers == 0)
        throw RequestError({EstimateRequest::kDropMtp,
                            fmt::format(": {} has no MTP blocks ({}.nextn_predict_layers is 0 or absent)",
                                        model.shards().front().path, layout.arch)});
    if (neuron_plan_path.empty()) return p;
    p.rules = width_rules(model, layout);
    std::vector<int> blocks;
    for (const MoeBlock& b : layout.blocks) blocks.push_back(b.block);
    const NeuronPlan plan = read_neuron_plan(
        neuron_plan_path, blocks, static_cast<int64_t>(layout.expert_count), p.rules->native_width);
    check_width(*p.rules, plan.k, model.shards().front().path);
    p.k = plan.k;
    p.exact = element_cuts_exact(*p.rules, plan);
    if (p.exact) p.cut = load_width_cut(model, layout, neuron_plan_path, sha256_file(neuron_plan_path));
    return p;
}

ModelFigures after_figures(const ShardSet& model, const MoeLayout& layout, const KeepList& kl,
                           const std::string& keeplist_sha256, const AfterPlan& plan) {
    const bool tied = model.find_tensor(kOutputProjectionName) == nullptr;
    const std::vector<Shaped> before = model_shapes(model, layout);
    const uint64_t n_keep = kl.blocks.empty() ? layout.expert_count : kl.blocks.front().keep.size();
    std::vector<Shaped> after = pruned_shapes(before, n_keep, plan.k);
    if (plan.drop_mtp)  // --drop-mtp: the nextn blocks' tensors are not written at all
        for (Shaped& s : after)
            if (s.nextn) s.ne = {0, 1, 1, 1}, s.nbytes = 0;
    ModelFigures f = figures(after, n_keep, layout.expert_used_count, tied);

    // File size: splice's own plan with the options of a plain `splice` run, so the figure is exact
    // and equal to `splice --dry-run`. splice refuses to width-cut a quantized ffn_down_exps by a
    // plan that is not whole quant blocks (that needs requantisation): then the size is derived
    // from the keep-experts plan, within a slack.
    SpliceOptions o;
    o.out_prefix = "estimate";
    o.keeplist_sha256 = keeplist_sha256;
    o.tool_version = plan.tool_version;
    o.drop_mtp = plan.drop_mtp;
    if (plan.cut) o.width = &*plan.cut;
    const SplicePlan sp = plan_splice(model, layout, kl, o);
    f.file_bytes = sp.bytes_written();
    if (plan.requantised()) {
        std::vector<uint64_t> base_nbytes(before.size());
        std::vector<uint32_t> alignment(before.size());
        uint64_t slack = 0;
        for (const PlannedFile& pf : sp.shards) {
            slack += pf.alignment;
            for (const PlannedTensor& pt : pf.tensors) {
                base_nbytes[pt.source_tensor] = pt.info.nbytes;
                alignment[pt.source_tensor] = pf.alignment;
            }
        }
        // The two provenance keys of a width splice, and the width key when the source lacked it.
        uint64_t added = kv_bytes(Kv::make_string(kProvenanceNeuronPlanShaKey, std::string(64, '0'))) +
                         kv_bytes(Kv::make_u32(kProvenanceSourceExpertWidthKey, 0));
        for (const WidthKv& kv : width_kvs(*plan.rules, plan.rules->native_width))
            if (!model.find_kv(kv.key)) added += kv_bytes(Kv::make_u32(kv.key, 0));
        // general.name names the width cut too (docs/splice.md, "Name and base model").
        if (const Kv* name = model.find_kv(kGeneralNameKey); name && name->as_string()) {
            const auto w = static_cast<uint64_t>(plan.k),
                       native = static_cast<uint64_t>(plan.rules->native_width);
            added += pruned_model_name(*name->as_string(), n_keep, layout.expert_count, w, native).size() -
                     pruned_model_name(*name->as_string(), n_keep, layout.expert_count).size();
        }
        // The header grows by the added keys, rounded to the alignment (the padding may absorb less).
        added = padded(added, sp.shards.front().alignment);
        width_file_bytes(f, f.file_bytes, base_nbytes, alignment, after, added, slack);
    }
    return f;
}

FitRow fit_row(const ModelFigures& f, const KvFigures& kv, uint64_t tp, uint64_t ctx, uint64_t overhead) {
    FitRow r;
    r.tp = tp;
    r.weights = f.residency(tp);
    auto kv_bytes = checked_mul(ctx, kv.bytes_per_token_per_rank(tp));
    if (!kv_bytes)
        throw RequestError({Deployment::kCtx, fmt::format(" {} makes the KV cache overflow 64 bits", ctx)});
    r.kv_cache = *kv_bytes;
    r.overhead = overhead;
    if (!checked_add(r.weights, r.kv_cache) || !checked_add(r.weights + r.kv_cache, r.overhead))
        throw RequestError({Deployment::kOverhead, " is too large: the total overflows 64 bits"});
    return r;
}

EstimateResult estimate_model(const ShardSet& model, const EstimateRequest& in) {
    EstimateResult e;
    e.model_path = model.shards().front().path;
    e.arch = model.architecture();
    const MoeLayout layout = build_moe_layout(model);
    e.moe_blocks = layout.blocks.size();
    e.nextn_blocks = layout.nextn_predict_layers;
    e.expert_used_count = layout.expert_used_count;
    e.tied_embeddings = model.find_tensor(kOutputProjectionName) == nullptr;
    // Headroom is signed: keep the sizes where gpu_mem − need cannot wrap.
    if (in.deployment.gpu_mem > uint64_t{INT64_MAX} || in.deployment.overhead > uint64_t{INT64_MAX})
        throw RequestError({Deployment::kGpuMem, " and ", Deployment::kOverhead, " must be less than 8 EiB"});
    e.deployment = in.deployment;
    std::set<uint64_t> tp(in.deployment.tp.begin(), in.deployment.tp.end());
    tp.insert(1);
    e.tp.assign(tp.begin(), tp.end());

    const std::vector<Shaped> before = model_shapes(model, layout);
    e.before = figures(before, layout.expert_count, layout.expert_used_count, e.tied_embeddings);
    e.before.file_bytes = model.total_bytes();
    e.kv = kv_cache_figures(model, in.deployment.cache_types);

    const bool pruned = !in.keeplist_path.empty() || !in.neuron_plan_path.empty();
    if (pruned && layout.blocks.empty())
        throw UsageError(fmt::format("{}: the model has no routed experts to prune (architecture '{}')",
                                     e.model_path, e.arch));
    if (pruned) {
        // Read and check the inputs exactly as splice does, so that an estimate never describes an
        // output splice would refuse to write.
        std::optional<KeepList> kl;
        if (!in.keeplist_path.empty()) {
            kl = KeepList::load(in.keeplist_path);
            e.keeplist_note =
                keeplist_applies_to(*kl, in.keeplist_path, keeplist_source_of(model, layout), e.model_path);
            validate_keeplist(*kl, layout, in.keeplist_path);
        }
        const AfterPlan plan =
            load_after_plan(model, layout, in.neuron_plan_path, in.drop_mtp, in.tool_version);
        e.after_requantised = plan.requantised();
        // Without a keeplist splice records the sha256 of no bytes at all (docs/splice.md).
        e.after = after_figures(model, layout, kl ? *kl : keep_all_experts(layout),
                                kl ? sha256_file(in.keeplist_path) : sha256_hex("", 0), plan);
    }

    e.fits_before = fit_rows(e.before, e.kv, e);
    if (e.after) e.fits_after = fit_rows(*e.after, e.kv, e);
    e.split_before =
        host_split(e.before, e.kv, e.deployment.offload, e.deployment.ctx, e.deployment.overhead);
    if (e.after)
        e.split_after =
            host_split(*e.after, e.kv, e.deployment.offload, e.deployment.ctx, e.deployment.overhead);
    return e;
}

}  // namespace gguf_reap
