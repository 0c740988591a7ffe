// A model's identity (model/model_identity.h).
#include "model/model_identity.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "io/sha256.h"

namespace gguf_reap {

std::string source_identity(const ShardSet& s) {
    Sha256 h;
    std::vector<uint8_t> buf;
    for (const Shard& sh : s.shards()) {
        const uint64_t n = sh.header.data_start;
        for (uint64_t at = 0; at < n;) {
            const size_t step = static_cast<size_t>(std::min<uint64_t>(n - at, uint64_t{1} << 20));
            buf.resize(step);
            sh.file->read(at, buf.data(), step);
            h.update(buf.data(), step);
            at += step;
        }
    }
    return h.finish_hex();
}

}  // namespace gguf_reap
