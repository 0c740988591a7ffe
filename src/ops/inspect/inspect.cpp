#include "gguf_reap/inspect.h"

#include <algorithm>
#include <map>
#include <memory>

#include "format/ggml_types.h"
#include "format/gguf.h"
#include "format/imatrix.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "ops/inspect/inspect_model.h"
#include "services/opened.h"

namespace gguf_reap {

ModelSummary summarize_model(const ShardSet& model) {
    ModelSummary s;
    s.arch = model.architecture();
    s.file_bytes = model.total_bytes();
    s.moe = build_moe_layout(model);
    s.tied_embeddings = model.find_tensor(kOutputProjectionName) == nullptr;

    std::vector<const ExpertTensor*> expert_of(model.tensors().size(), nullptr);
    for (const auto& b : s.moe.blocks)
        for (const auto& et : b.tensors) expert_of[et.tensor] = &et;

    std::map<std::pair<std::string, int32_t>, ClassTypeRow> rows;
    const auto& refs = model.tensors();
    for (size_t i = 0; i < refs.size(); ++i) {
        const TensorInfo& t = model.info(refs[i]);
        const uint64_t nel = t.n_elements();
        s.tensor_bytes += t.nbytes;
        s.parameters += nel;
        ++s.tensor_count;
        ClassTypeRow& row = rows[{tensor_class(t.name), t.type}];
        row.tensor_class = tensor_class(t.name);
        row.type = t.type;
        row.tensors += 1;
        row.elements += nel;
        row.bytes += t.nbytes;

        const ExpertTensor* et = expert_of[i];
        if (et) s.expert_bytes += t.nbytes;
        // MTP (nextn) blocks draft extra tokens; plain decoding never reads them (llama.cpp loads them
        // and skips them at run time).
        const auto split = split_block_name(t.name);
        if (split && s.moe.is_nextn_block(split->first)) {
            s.decode.nextn_bytes += t.nbytes;
            continue;
        }
        if (et) {
            if (et->kind->read_per_token())
                s.decode.router_bytes += t.nbytes;
            else
                s.decode.expert_bytes += std::min(s.moe.expert_used_count, s.moe.expert_count) * et->slab;
        } else if (is_token_embedding(t.name) && !s.tied_embeddings) {
            // A token reads one embedding row (GET_ROWS), unless the matrix is also the output projection.
            s.decode.dense_bytes += ggml_row_size(t.type, t.ne[0]).value_or(0);
        } else {
            s.decode.dense_bytes += t.nbytes;
        }
    }
    for (auto& [k, row] : rows) s.rows.push_back(row);
    std::stable_sort(s.rows.begin(), s.rows.end(),
                     [](const ClassTypeRow& a, const ClassTypeRow& b) { return a.bytes > b.bytes; });
    return s;
}

namespace ops {

InspectResult inspect(const std::string& path) {
    InspectResult r;
    auto opened = std::make_shared<Opened>();
    if (detect_imatrix(path) != ImatrixKind::kNotImatrix) {
        opened->imatrix.emplace(ImatrixFile::open(path));
    } else {
        opened->model.emplace(ShardSet::open(path));
        r.summary = summarize_model(*opened->model);
    }
    r.opened = std::move(opened);
    return r;
}

}  // namespace ops

}  // namespace gguf_reap
