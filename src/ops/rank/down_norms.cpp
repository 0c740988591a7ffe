#include "ops/rank/down_norms.h"

#include <algorithm>

#include "format/dequant.h"
#include "format/ggml_types.h"
#include "io/signals.h"

namespace gguf_reap {

std::vector<float> down_column_norms(const ShardSet& model, const TensorRef& down) {
    const TensorInfo& t = model.info(down);
    const InputFile& f = *model.shards()[down.shard].file;
    const int64_t ne0 = t.ne[0], ne1 = t.ne[1], E = t.ne[2];
    const uint64_t row_bytes = *ggml_row_size(t.type, ne0);
    std::vector<float> out(static_cast<size_t>(E * ne0), 0.0f);
    std::vector<uint8_t> raw;
    std::vector<float> row(static_cast<size_t>(ne0));
    const int64_t rows_per_read = std::max<int64_t>(1, static_cast<int64_t>((size_t{4} << 20) / row_bytes));
    for (int64_t e = 0; e < E; ++e) {
        check_interrupted();
        std::vector<double> acc(static_cast<size_t>(ne0), 0.0);
        for (int64_t r0 = 0; r0 < ne1; r0 += rows_per_read) {
            const int64_t n = std::min(rows_per_read, ne1 - r0);
            raw.resize(static_cast<size_t>(n) * row_bytes);
            f.read(down.abs_offset +
                       (static_cast<uint64_t>(e) * static_cast<uint64_t>(ne1) + static_cast<uint64_t>(r0)) *
                           row_bytes,
                   raw.data(), raw.size());
            for (int64_t i = 0; i < n; ++i) {
                dequantize_row(t.type, raw.data() + static_cast<size_t>(i) * row_bytes, ne0, row.data());
                for (int64_t c = 0; c < ne0; ++c)
                    acc[static_cast<size_t>(c)] +=
                        static_cast<double>(row[static_cast<size_t>(c)]) * row[static_cast<size_t>(c)];
            }
        }
        for (int64_t c = 0; c < ne0; ++c)
            out[static_cast<size_t>(e * ne0 + c)] = static_cast<float>(acc[static_cast<size_t>(c)]);
    }
    return out;
}

}  // namespace gguf_reap
