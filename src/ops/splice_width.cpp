// Width pruning for splice (--neuron-plan): the checks before any byte, and how every expert tensor is
// cut to K channels (docs/splice.md, "Width pruning").
#include "ops/splice_width.h"

#include <stdexcept>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "io/error.h"

namespace gguf_reap {

namespace splice_width {

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
            const auto elem = static_cast<uint32_t>(ggml_type(source.type)->type_size);
            const uint64_t row_bytes = halves * n_ff * elem;
            auto index = width.rows[row_index];
            if (halves > 1) {
                auto both = std::make_shared<std::vector<uint32_t>>();
                for (uint64_t h = 0; h < halves; ++h)
                    for (uint32_t c : row) both->push_back(static_cast<uint32_t>(h * n_ff + c));
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

}  // namespace splice_width

WidthCut load_width_cut(const ShardSet& model, const MoeLayout& layout, const std::string& plan_path,
                        std::string plan_sha256) {
    const std::string& model_path = model.shards().front().path;
    WidthCut w;
    w.rules = width_rules(model, layout);
    // A quantized row cannot lose columns without requantisation: refuse before anything else, as no
    // K can help.
    for (const MoeBlock& b : layout.blocks)
        for (const ExpertTensor& et : b.tensors) {
            const TensorInfo& t = model.info(model.tensors()[et.tensor]);
            if (!et.kind->width_cuts_inside_rows()) continue;
            if (is_float_type(t.type)) continue;
            throw UsageError(fmt::format(
                "{}: tensor '{}' is {}; width pruning keeps columns of every expert's ffn_down_exps rows, "
                "which is byte-exact only for F32, F16 or BF16: a quantized row cannot lose columns without "
                "requantisation, which gguf-reap never does. Width-splice a BF16 or F16 copy of the model "
                "instead, then quantize the result with llama-quantize, giving it the imatrix pruned by the "
                "same splice (--imatrix-in/--imatrix-out)",
                model_path, t.name, ggml_type_display(t.type)));
        }
    std::vector<int> blocks;
    for (const MoeBlock& b : layout.blocks) blocks.push_back(b.block);
    w.plan =
        read_neuron_plan(plan_path, blocks, static_cast<int64_t>(layout.expert_count), w.rules.native_width);
    check_width(w.rules, w.plan.k, model_path);
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
