// The rewrite of deepseek4's token → expert tables (services/hash_routing.h).
#include "services/hash_routing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "format/dequant.h"
#include "format/ggml_types.h"
#include "gguf_reap/error.h"
#include "model/tensor_table.h"

namespace gguf_reap {

namespace {

std::vector<uint8_t> read_tensor(const ShardSet& model, size_t index) {
    const TensorRef& r = model.tensors()[index];
    std::vector<uint8_t> bytes(r.nbytes);
    model.shards()[r.shard].file->read(r.abs_offset, bytes.data(), bytes.size());
    return bytes;
}

// Router rows (one per source expert) as floats, normalised to unit length (a zero row stays zero).
std::vector<std::vector<double>> router_rows(const ShardSet& model, const MoeBlock& b) {
    for (const ExpertTensor& et : b.tensors) {
        if (et.role() != ExpertRole::kRouter) continue;
        const TensorRef& r = model.tensors()[et.tensor];
        const TensorInfo& t = model.info(r);
        if (!can_dequantize(t.type))
            throw UsageError(fmt::format(
                "{}: tensor '{}' is {}: redirecting the pruned experts of a hash-routed block compares "
                "router rows, which gguf-reap reads from F32, F16, BF16 or Q8_0 only",
                model.shards()[r.shard].path, t.name, ggml_type_display(t.type)));
        const std::vector<uint8_t> bytes = read_tensor(model, et.tensor);
        const int64_t n = t.ne[0];
        const uint64_t row_bytes = *ggml_row_size(t.type, n);
        std::vector<std::vector<double>> rows(static_cast<size_t>(t.ne[1]));
        std::vector<float> f(static_cast<size_t>(n));
        for (size_t e = 0; e < rows.size(); ++e) {
            dequantize_row(t.type, bytes.data() + e * row_bytes, n, f.data());
            double norm = 0;
            for (float x : f) norm += static_cast<double>(x) * x;
            norm = std::sqrt(norm);
            rows[e].resize(f.size());
            for (size_t c = 0; c < f.size(); ++c) rows[e][c] = norm > 0 ? f[c] / norm : 0.0;
        }
        return rows;
    }
    throw std::logic_error(fmt::format("block {} has no router", b.block));
}

}  // namespace

HashRewrite rewrite_hash_table(const ShardSet& model, const MoeBlock& b, const std::vector<int64_t>& keep) {
    const size_t index = *b.hash_table;
    const TensorRef& ref = model.tensors()[index];
    const TensorInfo& t = model.info(ref);
    HashRewrite h;
    h.block = b.block;
    h.bytes = read_tensor(model, index);
    const auto row = static_cast<size_t>(t.ne[0]);
    const size_t n = h.bytes.size() / 4;
    h.entries = n;

    // new index of every source id (-1: pruned), and for each pruned id the kept ids by similarity.
    const std::vector<std::vector<double>> rows = router_rows(model, b);
    const auto n_source = static_cast<int64_t>(rows.size());
    std::vector<int32_t> new_index(rows.size(), -1);
    for (size_t k = 0; k < keep.size(); ++k)
        new_index[static_cast<size_t>(keep[k])] = static_cast<int32_t>(k);
    std::vector<std::vector<int32_t>> candidates(rows.size());
    auto ranked = [&](int64_t p) {
        std::vector<std::pair<double, int64_t>> by;
        for (int64_t k : keep) {
            double dot = 0;
            for (size_t c = 0; c < rows[0].size(); ++c)
                dot += rows[static_cast<size_t>(p)][c] * rows[static_cast<size_t>(k)][c];
            by.emplace_back(dot, k);
        }
        std::sort(by.begin(), by.end(), [](const auto& a, const auto& z) {
            return a.first != z.first ? a.first > z.first : a.second < z.second;
        });
        std::vector<int32_t> out;
        for (const auto& [s, k] : by) out.push_back(new_index[static_cast<size_t>(k)]);
        return out;
    };

    std::vector<int32_t> ids(row);
    std::vector<char> used(keep.size());
    for (size_t base = 0; base + row <= n; base += row) {
        std::memcpy(ids.data(), h.bytes.data() + 4 * base, 4 * row);
        std::fill(used.begin(), used.end(), 0);
        std::vector<int32_t> out(row, -1);
        for (size_t j = 0; j < row; ++j) {
            const int32_t id = ids[j];
            if (id < 0 || id >= n_source)
                throw InputError(model.shards()[ref.shard].path, ref.abs_offset + 4 * (base + j),
                                 fmt::format("tensor '{}' token {} slot {}", t.name, base / row, j),
                                 fmt::format("expert id {} is outside 0..{}", id, n_source - 1));
            const int32_t k = new_index[static_cast<size_t>(id)];
            if (k >= 0 && !used[static_cast<size_t>(k)]) {
                out[j] = k;
                used[static_cast<size_t>(k)] = 1;
            }
        }
        for (size_t j = 0; j < row; ++j) {
            if (out[j] >= 0) continue;
            auto& cand = candidates[static_cast<size_t>(ids[j])];
            if (cand.empty()) cand = ranked(ids[j]);
            for (int32_t k : cand)
                if (!used[static_cast<size_t>(k)]) {
                    out[j] = k;
                    used[static_cast<size_t>(k)] = 1;
                    break;
                }
            ++h.redirected;
        }
        std::memcpy(h.bytes.data() + 4 * base, out.data(), 4 * row);
    }
    return h;
}

}  // namespace gguf_reap
