// plan_imatrix_prune: the source imatrix with every routed-expert entry cut to the kept experts, so
// that llama-quantize, which demands ne[0] * n_expert values per expert tensor, accepts it for the
// pruned model. Router, shared-expert, attention and dense entries carry no per-expert rows and are
// copied unchanged, as are the imatrix KVs (datasets, chunk count and size). Under a width cut the
// ffn_down_exps entries also keep only each kept expert's kept channels; counts are per expert and stay.
#include <cstring>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gguf_reap/error.h"
#include "gguf_reap/splice.h"
#include "model/tensor_table.h"
#include "services/splice_plan.h"

namespace gguf_reap {

namespace {

// The model's expert weight an imatrix entry belongs to, with its kept ids; nullopt for entries that
// are not routed-expert weights. An "_exps" entry the model cannot account for is refused: the file
// was made for another model, and copying it unpruned would make llama-quantize abort later.
struct ExpertEntry {
    const TensorInfo* model_tensor = nullptr;
    const std::vector<int64_t>* keep = nullptr;
    const ExpertTensorKind* kind = nullptr;
    size_t block_index = 0;  // into MoeLayout::blocks
};

// With a width cut, an ffn_down_exps entry keeps per kept expert only the values of the kept channels:
// llama-quantize wants ne0 == the tensor's ne0, which becomes K.
const WidthCut* cuts_channels(const ExpertEntry& ee, const WidthCut* width) {
    return width && ee.kind->width_cuts_inside_rows() ? width : nullptr;
}

// Appends, per kept expert, the kept channels of its row of `ne0` f32 values at `at`.
void append_kept_channels(CopyJob& job, uint32_t src, uint64_t at, uint64_t ne0, const ExpertEntry& ee,
                          const WidthCut& w) {
    for (int64_t e : *ee.keep)
        job.append_gather(
            src, at + static_cast<uint64_t>(e) * ne0 * 4, 1,
            {ne0 * 4, 4,
             w.rows[ee.block_index * static_cast<size_t>(w.plan.expert_count) + static_cast<size_t>(e)]});
}
std::optional<ExpertEntry> expert_entry(const std::string& weight, const ShardSet& model,
                                        const MoeLayout& layout, const KeepList& kl, const std::string& path,
                                        uint64_t offset, const std::string& field) {
    if (!is_expert_entry_name(weight)) return std::nullopt;
    const auto split = split_block_name(weight);
    const TensorRef* ref = model.find_tensor(weight);
    const MoeBlock* mb = split ? layout.find_block(split->first) : nullptr;
    const KeepBlock* kb = split ? kl.find_block(split->first) : nullptr;
    if (!ref || !mb || !kb)
        throw InputError(
            path, offset, field,
            fmt::format("is an expert entry for '{}', which {} (was the imatrix made for another "
                        "model?)",
                        weight, ref ? "is not in an MoE block of the model" : "the model does not have"));
    const size_t index = static_cast<size_t>(ref - model.tensors().data());
    for (const ExpertTensor& et : mb->tensors)
        if (et.tensor == index && et.kind->is_weight())
            return ExpertEntry{&model.info(*ref), &kb->keep, et.kind,
                               static_cast<size_t>(mb - layout.blocks.data())};
    throw InputError(path, offset, field,
                     fmt::format("'{}' is not a stacked expert weight of the model", weight));
}

// GGUF imatrix: in_sum2 [ne0, E] and counts [1, E] lose the rows of pruned experts.
PlannedFile plan_gguf(const ImatrixFile& im, uint32_t src, const ShardSet& model, const MoeLayout& layout,
                      const KeepList& kl, const std::string& out_path, const WidthCut* width) {
    const std::string& path = im.path();
    const Header h = parse_gguf_header(im.file());
    const int64_t E = static_cast<int64_t>(layout.expert_count);
    PlannedFile f;
    f.version = h.version;
    f.alignment = h.alignment;
    f.kv_count = h.kvs.size();

    struct Row {
        uint64_t row_bytes = 0;
        const std::vector<int64_t>* keep = nullptr;
        std::optional<ExpertEntry> channels;  // in_sum2 of ffn_down_exps under a width cut
    };
    std::vector<Row> rows(h.tensors.size());
    std::vector<TensorInfo> infos = h.tensors;
    for (size_t i = 0; i < h.tensors.size(); ++i) {
        const TensorInfo& t = h.tensors[i];
        const bool sums = t.name.ends_with(".in_sum2");
        if (!sums && !t.name.ends_with(".counts")) continue;
        const std::string weight = t.name.substr(0, t.name.size() - (sums ? 8 : 7));
        const std::string field = fmt::format("tensor '{}'", t.name);
        auto ee = expert_entry(weight, model, layout, kl, path, t.info_offset, field);
        if (!ee) continue;
        if (t.ne[1] != E || t.ne[2] != 1 || t.ne[3] != 1)
            throw InputError(path, t.info_offset, field,
                             fmt::format("has {} rows, but the model has {} experts per block", t.ne[1], E));
        const int64_t want_ne0 = sums ? ee->model_tensor->ne[0] : 1;
        if (t.ne[0] != want_ne0)
            throw InputError(path, t.info_offset, field,
                             fmt::format("has {} values per expert, but '{}' has ne[0] = {} (was the imatrix "
                                         "made for another model?)",
                                         t.ne[0], weight, ee->model_tensor->ne[0]));
        rows[i] = {t.nbytes / static_cast<uint64_t>(E), ee->keep, std::nullopt};
        infos[i].ne[1] = static_cast<int64_t>(ee->keep->size());
        infos[i].nbytes = rows[i].row_bytes * ee->keep->size();
        if (sums && cuts_channels(*ee, width)) {
            if (t.type != 0)
                throw InputError(path, t.info_offset, field,
                                 fmt::format("is {}, but imatrix sums are F32", ggml_type_display(t.type)));
            rows[i].channels = *ee;
            infos[i].ne[0] = width->plan.k;
            infos[i].nbytes = static_cast<uint64_t>(width->plan.k) * 4 * ee->keep->size();
        }
    }
    assign_offsets(infos, f.alignment);
    std::vector<uint8_t> header = serialize_header(f.version, h.kvs, infos, f.alignment);
    f.header_bytes = header.size();
    f.job.path = out_path;
    f.job.append_literal(std::move(header));
    for (size_t i = 0; i < infos.size(); ++i) {
        PlannedTensor pt;
        pt.source_tensor = i;
        pt.info = infos[i];
        pt.data_offset = f.job.size;
        const uint64_t at = h.data_start + h.tensors[i].offset;
        if (rows[i].channels) {
            append_kept_channels(f.job, src, at, static_cast<uint64_t>(h.tensors[i].ne[0]), *rows[i].channels,
                                 *width);
            pt.expert_axis = 1;
            pt.slabs = rows[i].keep->size();
            ++f.sliced_tensors;
            f.slabs += pt.slabs;
        } else if (rows[i].keep) {
            for (int64_t e : *rows[i].keep)
                f.job.append_copy(src, at + static_cast<uint64_t>(e) * rows[i].row_bytes, rows[i].row_bytes);
            pt.expert_axis = 1;
            pt.slabs = rows[i].keep->size();
            ++f.sliced_tensors;
            f.slabs += pt.slabs;
        } else {
            f.job.append_copy(src, at, h.tensors[i].nbytes);
        }
        f.job.append_zeros(*pad_to(pt.info.nbytes, f.alignment) - pt.info.nbytes);
        f.tensors.push_back(std::move(pt));
    }
    return f;
}

template <typename T>
void put_le(std::vector<uint8_t>& out, T v) {
    const size_t at = out.size();
    out.resize(at + sizeof v);
    std::memcpy(out.data() + at, &v, sizeof v);
}

// Legacy .dat: i32 n_entries; per entry i32 len, name, i32 ncall, i32 nval, f32[nval]; trailer. An
// expert entry holds nval = ne0 * E values, expert-major; it keeps ne0 * N. ncall stays: values are
// means scaled by ncall, so dividing by it still gives each kept expert's own mean.
PlannedFile plan_legacy(const ImatrixFile& im, uint32_t src, const ShardSet& model, const MoeLayout& layout,
                        const KeepList& kl, const std::string& out_path, const WidthCut* width) {
    const std::string& path = im.path();
    const uint64_t E = layout.expert_count;
    PlannedFile f;
    f.job.path = out_path;
    f.job.append_copy(src, 0, 4);  // n_entries: unchanged
    f.header_bytes = 4;
    uint64_t end = 4;
    for (size_t i = 0; i < im.entries().size(); ++i) {
        const ImatrixEntry& e = im.entries()[i];
        const uint64_t values_bytes = static_cast<uint64_t>(e.nval) * 4;
        end = e.sums_offset + values_bytes;
        PlannedTensor pt;
        pt.source_tensor = i;
        pt.info.name = e.name;
        pt.info.type = 0;
        const std::string field = fmt::format("entry '{}'", e.name);
        auto ee = expert_entry(e.name, model, layout, kl, path, e.entry_offset, field);
        if (!ee) {
            pt.info.ne[0] = e.nval;
            pt.info.nbytes = values_bytes;
            f.job.append_copy(src, e.entry_offset, end - e.entry_offset);
            pt.data_offset = f.job.size - values_bytes;
            f.tensors.push_back(std::move(pt));
            continue;
        }
        const uint64_t ne0 = static_cast<uint64_t>(ee->model_tensor->ne[0]);
        if (static_cast<uint64_t>(e.nval) != ne0 * E)
            throw InputError(
                path, e.entry_offset, field,
                fmt::format("has {} values, but '{}' needs ne[0] × experts = {} × {} = {} (was the "
                            "imatrix made for another model?)",
                            e.nval, e.name, ne0, E, ne0 * E));
        const uint64_t n_keep = ee->keep->size();
        const WidthCut* w = cuts_channels(*ee, width);
        const uint64_t out_ne0 = w ? static_cast<uint64_t>(w->plan.k) : ne0;
        std::vector<uint8_t> head;
        put_le<int32_t>(head, static_cast<int32_t>(e.name.size()));
        head.insert(head.end(), e.name.begin(), e.name.end());
        put_le<int32_t>(head, e.ncall);
        put_le<int32_t>(head, static_cast<int32_t>(out_ne0 * n_keep));
        f.job.append_literal(std::move(head));
        pt.data_offset = f.job.size;
        if (w)
            append_kept_channels(f.job, src, e.sums_offset, ne0, *ee, *w);
        else
            for (int64_t x : *ee->keep)
                f.job.append_copy(src, e.sums_offset + static_cast<uint64_t>(x) * ne0 * 4, ne0 * 4);
        pt.info.ne[0] = static_cast<int64_t>(out_ne0 * n_keep);
        pt.info.nbytes = out_ne0 * n_keep * 4;
        pt.expert_axis = 0;
        pt.slabs = n_keep;
        ++f.sliced_tensors;
        f.slabs += n_keep;
        f.tensors.push_back(std::move(pt));
    }
    f.job.append_copy(src, end, im.file().size() - end);  // trailer: last chunk and dataset name
    return f;
}

}  // namespace

PlannedFile plan_imatrix_prune(const ImatrixFile& im, uint32_t source_index, const ShardSet& model,
                               const MoeLayout& layout, const KeepList& kl, const std::string& out_path,
                               const WidthCut* width) {
    if (out_path.empty())
        throw RequestError({ops::SpliceRequest::kImatrixIn, " needs ", SpliceOptions::kImatrixOut,
                            " (where the pruned imatrix goes)"});
    switch (im.kind()) {
        case ImatrixKind::kGguf:
            return plan_gguf(im, source_index, model, layout, kl, out_path, width);
        case ImatrixKind::kLegacy:
            return plan_legacy(im, source_index, model, layout, kl, out_path, width);
        case ImatrixKind::kNotImatrix:
            break;
    }
    throw InputError(im.path(), std::nullopt, "file", "is not an imatrix");
}

}  // namespace gguf_reap
