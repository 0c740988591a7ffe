// plan_splice: every byte of every output shard, decided before anything is written.
#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gguf_reap/error.h"
#include "gguf_reap/llama_args.h"
#include "gguf_reap/plan_width.h"
#include "gguf_reap/splice.h"
#include "model/provenance.h"
#include "model/width_rules.h"
#include "services/hash_routing.h"
#include "services/splice_kvs.h"
#include "services/splice_plan.h"

namespace gguf_reap {

namespace {

// split.count is a u16 in every llama.cpp reader.
constexpr size_t kMaxShards = 65535;

uint64_t padded(uint64_t n, uint32_t alignment) {
    auto p = pad_to(n, alignment);
    if (!p) throw std::overflow_error("tensor size overflows when padded");
    return *p;
}

// Encoded sizes, as serialize_header writes them.
uint64_t kv_bytes(const Kv& kv) {
    return 8 + kv.key.size() + 4 + kv.raw.size();
}
uint64_t info_bytes(const TensorInfo& t) {
    return 8 + t.name.size() + 4 + 8 * uint64_t{t.n_dims} + 4 + 8;
}
constexpr uint64_t kFixedHeader = 24;  // magic, version, n_tensors, n_kv

// ---- width cuts (--neuron-plan): how every expert tensor is cut to K channels (docs/splice.md,
// "Width pruning") --------------------------------------------------------------------------------
void cut_info(TensorInfo& t, const ExpertTensorKind& kind, int64_t k) {
    if (!kind.width_cut()) return;
    t.ne[static_cast<size_t>(kind.width_axis)] = kind.width_factor * k;
    const auto row = ggml_row_size(t.type, t.ne[0]);
    if (!row) throw std::logic_error(fmt::format("tensor '{}': no row size after the width cut", t.name));
    t.nbytes = *row * static_cast<uint64_t>(t.ne[1] * t.ne[2] * t.ne[3]);
}

size_t append_data(CopyJob& job, uint32_t src, uint64_t abs_offset, const TensorInfo& source,
                   const ExpertTensor& et, const std::vector<int64_t>& keep, const WidthCut& width,
                   size_t block_index) {
    const ExpertTensorKind& kind = *et.kind;
    const uint64_t slab = et.slab;
    const size_t before = job.segments.size();
    if (!kind.width_cut()) {
        for (int64_t e : keep) job.append_copy(src, abs_offset + static_cast<uint64_t>(e) * slab, slab);
        return job.segments.size() - before;
    }
    const auto n_ff = static_cast<uint64_t>(width.rules.native_width);
    const auto halves = static_cast<uint64_t>(kind.width_factor);  // fused gate_up: gate, then up
    for (int64_t e : keep) {
        const uint64_t base = abs_offset + static_cast<uint64_t>(e) * slab;
        const size_t row_index =
            block_index * static_cast<size_t>(width.plan.expert_count) + static_cast<size_t>(e);
        const std::vector<uint32_t>& row = *width.rows[row_index];
        if (kind.width_cuts_inside_rows()) {
            // Rows of halves × n_ff elements: the expert's n_embd rows of ffn_down_exps, or the one bias
            // row; a fused row keeps channel c of each half.
            // A quantized row's elements are its whole blocks (load_width_cut checked the plan).
            const GgmlType& type = *ggml_type(source.type);
            const auto bs = static_cast<uint64_t>(type.block_size);
            const auto elem = static_cast<uint32_t>(type.type_size);
            const uint64_t units = n_ff / bs;  // elements of one half of a row
            const uint64_t row_bytes = halves * units * elem;
            auto index = bs == 1 ? width.rows[row_index] : width.block_rows.at(type.block_size)[row_index];
            if (halves > 1) {
                auto both = std::make_shared<std::vector<uint32_t>>();
                for (uint64_t h = 0; h < halves; ++h)
                    for (uint32_t c : *index) both->push_back(static_cast<uint32_t>(h * units + c));
                index = std::move(both);
            }
            job.append_gather(src, base, slab / row_bytes, {row_bytes, elem, std::move(index)});
            continue;
        }
        // Whole rows of any type: adjacent kept channels merge into one extent.
        const uint64_t row_bytes = slab / static_cast<uint64_t>(source.ne[1]);
        for (uint64_t h = 0; h < halves; ++h)
            for (uint32_t c : row) job.append_copy(src, base + (h * n_ff + c) * row_bytes, row_bytes);
    }
    return job.segments.size() - before;
}

// How a source tensor becomes an output tensor: the expert tensor it is (if any) and its kept ids.
struct TensorSource {
    const ExpertTensor* expert = nullptr;
    const std::vector<int64_t>* keep = nullptr;
    const WidthCut* width = nullptr;  // with a width cut: expert tensors lose channels too
    size_t block_index = 0;           // into MoeLayout::blocks
};

TensorInfo output_info(const TensorInfo& src, const TensorSource& ts) {
    TensorInfo t = src;
    t.offset = 0;
    if (ts.expert) {
        t.ne[ts.expert->axis()] = static_cast<int64_t>(ts.keep->size());
        t.nbytes = ts.expert->slab * ts.keep->size();
        if (ts.width) cut_info(t, *ts.expert->kind, ts.width->plan.k);
    }
    return t;
}

// Appends a tensor's data extents to `job`; returns the number of extents (after merging).
size_t append_tensor_data(CopyJob& job, const TensorRef& ref, const TensorInfo& source,
                          const TensorSource& ts) {
    const auto src = static_cast<uint32_t>(ref.shard);
    if (!ts.expert) {
        job.append_copy(src, ref.abs_offset, ref.nbytes);
        return ref.nbytes > 0 ? 1 : 0;
    }
    if (ts.width)
        return append_data(job, src, ref.abs_offset, source, *ts.expert, *ts.keep, *ts.width, ts.block_index);
    const uint64_t slab = ts.expert->slab;
    size_t extents = 0;
    int64_t prev = -2;
    for (int64_t e : *ts.keep) {
        if (e != prev + 1) ++extents;
        job.append_copy(src, ref.abs_offset + static_cast<uint64_t>(e) * slab, slab);
        prev = e;
    }
    return extents;
}

// Shard boundaries: shard s holds tensors [cuts[s], cuts[s+1]).
using Cuts = std::vector<size_t>;

// Contiguous cuts whose byte sums come closest to equal shares (shard 1 also carries the metadata).
Cuts balanced_cuts(const std::vector<uint64_t>& weight, uint64_t first_extra, size_t k) {
    const size_t n = weight.size();
    if (k > n)
        throw UsageError(
            fmt::format("cannot write {} tensors into {} shards: every shard needs a tensor", n, k));
    long double total = first_extra;
    for (uint64_t w : weight) total += w;
    Cuts cuts{0};
    long double prefix = first_extra;
    size_t i = 0;
    for (size_t s = 1; s < k; ++s) {
        const long double target = total * s / k;
        // Take at least one tensor, and leave at least one for every later shard.
        const size_t lo = cuts.back() + 1, hi = n - (k - s);
        while (i < lo) prefix += weight[i++];
        while (i < hi && prefix + weight[i] / 2.0L <= target) prefix += weight[i++];
        cuts.push_back(i);
    }
    cuts.push_back(n);
    return cuts;
}

Cuts max_tensor_cuts(size_t n, uint64_t per_shard) {
    if (per_shard == 0) throw RequestError({SpliceOptions::kSplitMaxTensors, " must be at least 1"});
    Cuts cuts;
    for (size_t i = 0; i < n; i += per_shard) cuts.push_back(i);
    cuts.push_back(n);
    return cuts;
}

// Greedy, in order: a tensor starts a new shard when adding it would push the file (header, infos,
// padding, data) past `max_bytes`. A tensor larger than the limit gets a shard of its own, as in
// llama-gguf-split.
Cuts max_size_cuts(const std::vector<TensorInfo>& infos, uint64_t first_kv_bytes, uint32_t first_alignment,
                   uint64_t other_kv_bytes, uint64_t max_bytes) {
    if (max_bytes == 0) throw RequestError({SpliceOptions::kSplitMaxSize, " must be more than 0 bytes"});
    Cuts cuts{0};
    uint64_t head = kFixedHeader + first_kv_bytes, data = 0;
    uint32_t align = first_alignment;
    for (size_t i = 0; i < infos.size(); ++i) {
        const uint64_t h = head + info_bytes(infos[i]);
        const uint64_t d = data + padded(infos[i].nbytes, align);
        if (i > cuts.back() && padded(h, align) + d > max_bytes) {
            cuts.push_back(i);
            align = kGgufDefaultAlignment;
            head = kFixedHeader + other_kv_bytes + info_bytes(infos[i]);
            data = padded(infos[i].nbytes, align);
        } else {
            head = h;
            data = d;
        }
    }
    cuts.push_back(infos.size());
    return cuts;
}

// The output tensor sequence and how each tensor is made.
struct OutputTensors {
    std::vector<TensorSource> how;            // by source tensor: which are sliced, with which ids
    std::map<size_t, HashRewrite> rewritten;  // by source tensor: token → expert tables, rewritten
    std::vector<size_t> source;               // source tensor index of each output tensor
    std::vector<TensorInfo> infos;            // each output tensor's info (offsets not yet assigned)
};

// The plan's sources and the counts its summary reports.
SplicePlan start_plan(const ShardSet& model, const MoeLayout& layout, const KeepList& kl,
                      const SpliceOptions& o) {
    SplicePlan plan;
    for (const Shard& s : model.shards()) plan.sources.push_back(s.file.get());
    plan.source_path = model.shards().front().path;
    plan.source_expert_count = layout.expert_count;
    plan.kept_expert_count = kl.blocks.front().keep.size();
    plan.moe_blocks = layout.blocks.size();
    if (o.width) {
        plan.native_width = o.width->rules.native_width;
        plan.width = o.width->plan.k;
    }
    plan.tensor_count = model.tensors().size();
    if (model.tensors().empty())
        throw UsageError(fmt::format("{}: the model has no tensors", plan.source_path));
    return plan;
}

// The tensors written, in source order, with how each is made; records the hash rewrites and the
// dropped MTP blocks in `plan`.
OutputTensors output_tensors(const ShardSet& model, const MoeLayout& layout, const KeepList& kl,
                             const SpliceOptions& o, SplicePlan& plan) {
    const auto& refs = model.tensors();
    OutputTensors out;
    // Which tensors are sliced, and with which ids.
    out.how.resize(refs.size());
    for (size_t bi = 0; bi < layout.blocks.size(); ++bi) {
        const MoeBlock& b = layout.blocks[bi];
        const KeepBlock* kb = kl.find_block(b.block);
        if (!kb) throw std::logic_error(fmt::format("keeplist lacks block {}", b.block));
        for (const ExpertTensor& et : b.tensors) out.how[et.tensor] = {&et, &kb->keep, o.width, bi};
    }
    // Hash-routed blocks: their token → expert tables are written rewritten (services/hash_routing.h).
    for (const MoeBlock& b : layout.blocks)
        if (b.hash_table && !(o.drop_mtp && layout.is_nextn_block(b.block))) {
            HashRewrite h = rewrite_hash_table(model, b, kl.find_block(b.block)->keep);
            plan.hash_rewrites.push_back({h.block, h.entries, h.redirected});
            out.rewritten.emplace(*b.hash_table, std::move(h));
        }
    // The tensors written, in source order (--drop-mtp leaves out the nextn blocks').
    if (o.drop_mtp) {
        if (layout.nextn_predict_layers == 0)
            throw RequestError({SpliceOptions::kDropMtp,
                                fmt::format(": {} has no MTP blocks ({}.nextn_predict_layers is 0 or absent)",
                                            plan.source_path, layout.arch)});
        plan.dropped_blocks = layout.nextn_predict_layers;
    }
    for (size_t i = 0; i < refs.size(); ++i) {
        const auto split = split_block_name(model.info(refs[i]).name);
        if (o.drop_mtp && split && layout.is_nextn_block(split->first)) continue;
        out.source.push_back(i);
    }
    plan.tensor_count = out.source.size();
    out.infos.reserve(out.source.size());
    for (size_t i : out.source) out.infos.push_back(output_info(model.info(refs[i]), out.how[i]));
    return out;
}

// Cuts the tensor sequence into shards, as the split options ask. Shard 1's header is sized with
// split.* present; when the result is a single file they are dropped, which only makes it smaller.
Cuts shard_cuts(const ShardSet& model, const MoeLayout& layout, const KeepList& kl, const SpliceOptions& o,
                const std::vector<TensorInfo>& infos) {
    uint64_t first_kv_bytes = 0, other_kv_bytes = 0;
    uint32_t first_alignment = kGgufDefaultAlignment;
    {
        const std::vector<Kv> kvs_multi =
            first_shard_kvs(model, layout, kl, o, split_kvs(0, 2, infos.size()));
        for (const Kv& kv : kvs_multi) first_kv_bytes += kv_bytes(kv);
        first_alignment = header_alignment(kvs_multi);
    }
    for (const Kv& kv : split_kvs(1, 2, infos.size())) other_kv_bytes += kv_bytes(kv);
    std::vector<uint64_t> weight;
    for (const TensorInfo& t : infos)
        weight.push_back(info_bytes(t) + padded(t.nbytes, kGgufDefaultAlignment));
    Cuts cuts;
    switch (o.split_mode) {
        case SplitMode::kAsSource:
            cuts = balanced_cuts(weight, first_kv_bytes, model.shards().size());
            break;
        case SplitMode::kCount:
            if (o.split_value == 0) throw RequestError({SpliceOptions::kSplitCount, " must be at least 1"});
            if (o.split_value > kMaxShards)
                throw RequestError(
                    {SpliceOptions::kSplitCount,
                     fmt::format(" {} is more than the 65535 shards split.count can number", o.split_value)});
            cuts = balanced_cuts(weight, first_kv_bytes, o.split_value);
            break;
        case SplitMode::kMaxTensors:
            cuts = max_tensor_cuts(infos.size(), o.split_value);
            break;
        case SplitMode::kMaxSize:
            cuts = max_size_cuts(infos, first_kv_bytes, first_alignment, other_kv_bytes, o.split_value);
            break;
    }
    if (cuts.size() - 1 > kMaxShards)
        throw UsageError(fmt::format(
            "the split options ask for {} shards; split.count can number at most 65535", cuts.size() - 1));
    return cuts;
}

// One output shard at `path`: its header with `kvs`, then output tensors [begin, end), each padded to
// the shard's alignment.
PlannedFile plan_shard(const ShardSet& model, const std::vector<Kv>& kvs, size_t begin, size_t end,
                       const std::string& path, OutputTensors& out) {
    const auto& refs = model.tensors();
    PlannedFile f;
    f.version = model.metadata().version;
    f.kv_count = kvs.size();
    f.alignment = header_alignment(kvs);
    std::vector<TensorInfo> shard_infos(out.infos.begin() + static_cast<ptrdiff_t>(begin),
                                        out.infos.begin() + static_cast<ptrdiff_t>(end));
    assign_offsets(shard_infos, f.alignment);
    std::vector<uint8_t> header = serialize_header(f.version, kvs, shard_infos, f.alignment);
    f.header_bytes = header.size();
    f.job.path = path;
    f.job.append_literal(std::move(header));
    for (size_t w = begin; w < end; ++w) {
        const size_t i = out.source[w];
        const TensorSource& how = out.how[i];
        PlannedTensor pt;
        pt.source_tensor = i;
        pt.info = shard_infos[w - begin];
        pt.data_offset = f.job.size;
        if (pt.data_offset != f.header_bytes + pt.info.offset)
            throw std::logic_error(fmt::format("tensor '{}' lands at {}, its header says {}", pt.info.name,
                                               pt.data_offset, f.header_bytes + pt.info.offset));
        if (auto h = out.rewritten.find(i); h != out.rewritten.end())
            f.job.append_literal(std::move(h->second.bytes));
        else
            pt.extents = append_tensor_data(f.job, refs[i], model.info(refs[i]), how);
        f.job.append_zeros(padded(pt.info.nbytes, f.alignment) - pt.info.nbytes);
        if (how.expert) {
            pt.expert_axis = how.expert->axis();
            pt.slabs = how.keep->size();
            ++f.sliced_tensors;
            f.slabs += pt.slabs;
        }
        f.tensors.push_back(std::move(pt));
    }
    return f;
}

}  // namespace

uint64_t PlannedFile::bytes_read() const {
    uint64_t n = 0;
    for (const CopySegment& s : job.segments)
        if (s.src != kSegmentLiteral && s.src != kSegmentZeros) n += s.length;
    return n;
}

size_t SplicePlan::sliced_tensors() const {
    size_t n = 0;
    for (const auto& f : shards) n += f.sliced_tensors;
    return n;
}

uint64_t SplicePlan::slabs() const {
    uint64_t n = 0;
    for (const auto& f : shards) n += f.slabs;
    return n;
}

size_t SplicePlan::extents() const {
    size_t n = 0;
    for (const auto& f : shards)
        for (const auto& s : f.job.segments) n += s.src != kSegmentLiteral && s.src != kSegmentZeros;
    return n;
}

uint64_t SplicePlan::bytes_read() const {
    uint64_t n = imatrix ? imatrix->bytes_read() : 0;
    for (const auto& f : shards) n += f.bytes_read();
    return n;
}

uint64_t SplicePlan::bytes_written() const {
    uint64_t n = imatrix ? imatrix->job.size : 0;
    for (const auto& f : shards) n += f.job.size;
    return n;
}

std::vector<const CopyJob*> SplicePlan::jobs() const {
    std::vector<const CopyJob*> j;
    for (const auto& f : shards) j.push_back(&f.job);
    if (imatrix) j.push_back(&imatrix->job);
    return j;
}

std::vector<std::string> splice_output_paths(const std::string& out_prefix, size_t n) {
    std::string prefix = out_prefix;
    if (n == 1) return {prefix.ends_with(".gguf") ? prefix : prefix + ".gguf"};
    if (prefix.ends_with(".gguf")) prefix.resize(prefix.size() - 5);
    std::vector<std::string> paths;
    for (size_t i = 1; i <= n; ++i)
        paths.push_back(split_path(prefix, static_cast<int>(i), static_cast<int>(n)));
    return paths;
}

SplicePlan plan_splice(const ShardSet& model, const MoeLayout& layout, const KeepList& kl,
                       const SpliceOptions& o, const ImatrixFile* imatrix) {
    if (kl.blocks.empty() || layout.blocks.empty())
        throw std::logic_error("plan_splice needs a keeplist validated against an MoE layout");
    SplicePlan plan = start_plan(model, layout, kl, o);

    // The tensors written, each with how it is made: copied, sliced, or a rewritten table.
    OutputTensors out = output_tensors(model, layout, kl, o, plan);

    // Cut them into shards, then lay out each shard: header, then tensor data.
    const Cuts cuts = shard_cuts(model, layout, kl, o, out.infos);
    const size_t n_shards = cuts.size() - 1;
    const std::vector<std::string> paths = splice_output_paths(o.out_prefix, n_shards);
    for (size_t s = 0; s < n_shards; ++s) {
        const std::vector<Kv> kvs =
            s == 0
                ? first_shard_kvs(model, layout, kl, o,
                                  n_shards > 1 ? split_kvs(0, n_shards, out.infos.size()) : std::vector<Kv>{})
                : split_kvs(s, n_shards, out.infos.size());
        plan.shards.push_back(plan_shard(model, kvs, cuts[s], cuts[s + 1], paths[s], out));
    }

    // The pruned imatrix, when asked for.
    if (imatrix) {
        const auto index = static_cast<uint32_t>(plan.sources.size());
        plan.sources.push_back(&imatrix->file());
        plan.imatrix = plan_imatrix_prune(*imatrix, index, model, layout, kl, o.imatrix_out, o.width);
    }
    return plan;
}

WidthCut load_width_cut(const ShardSet& model, const MoeLayout& layout, const std::string& plan_path,
                        std::string plan_sha256) {
    const std::string& model_path = model.shards().front().path;
    WidthCut w;
    w.rules = width_rules(model, layout);
    std::vector<int> blocks;
    for (const MoeBlock& b : layout.blocks) blocks.push_back(b.block);
    w.plan =
        read_neuron_plan(plan_path, blocks, static_cast<int64_t>(layout.expert_count), w.rules.native_width);
    check_width(w.rules, w.plan.k, model_path);
    // A quantized row loses columns byte-exactly only in whole blocks: every plan row must be whole
    // aligned groups of the type's block size B (channels gB .. gB + B - 1), else it needs requantising.
    auto in_blocks = plan_in_row_blocks(w.rules, w.plan);
    if (const auto* partial = std::get_if<PartialRowBlock>(&in_blocks)) {
        const PartialBlock& p = partial->at;
        const int64_t bs = partial->block_size;
        throw RequestError(
            {fmt::format(
                 "{}: tensor '{}' is {}, whose rows hold blocks of {} values: a width cut keeps whole "
                 "blocks only, but {} keeps {} of the {} channels {}..{} of block {} expert {}: make the "
                 "plan with `plan-width ",
                 model_path, partial->row_type->tensor, ggml_type_display(partial->row_type->type), bs,
                 plan_path, p.kept, bs, p.group * bs, p.group * bs + bs - 1, p.block, p.expert),
             PlanWidthRequest::kGranularity, " block ", PlanWidthRequest::kModel,
             fmt::format(" {}` (or width-splice a BF16/F16 copy and requantise it with {})", model_path,
                         llama_tool_name(LlamaTool::quantize))});
    }
    for (const auto& [bs, u] : std::get<std::map<int64_t, NeuronPlan>>(in_blocks)) {
        auto& out = w.block_rows[bs];
        for (size_t bi = 0; bi < blocks.size(); ++bi)
            for (int64_t e = 0; e < u.expert_count; ++e)
                out.push_back(
                    std::make_shared<const std::vector<uint32_t>>(u.row(bi, e), u.row(bi, e) + u.k));
    }
    w.plan_sha256 = std::move(plan_sha256);
    for (size_t b = 0; b < blocks.size(); ++b)
        for (int64_t e = 0; e < w.plan.expert_count; ++e) {
            const int32_t* r = w.plan.row(b, e);
            w.rows.push_back(std::make_shared<const std::vector<uint32_t>>(r, r + w.plan.k));
        }
    return w;
}

KeepList keep_all_experts(const MoeLayout& layout) {
    KeepList kl;
    kl.n_keep = layout.expert_count;
    for (const MoeBlock& b : layout.blocks) {
        KeepBlock kb;
        kb.block = b.block;
        for (uint64_t e = 0; e < layout.expert_count; ++e) kb.keep.push_back(static_cast<int64_t>(e));
        kl.blocks.push_back(std::move(kb));
    }
    return kl;
}

}  // namespace gguf_reap
