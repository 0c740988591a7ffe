// libFuzzer target: the GGUF header parser, then the shard-set and MoE-layout checks built on it.
// Contract under test: any byte string either parses or raises InputError; nothing else (no crash,
// no sanitizer report, no other exception, no huge allocation). A successful parse must also
// serialise back to the exact header bytes it was read from.
#include <cstdint>
#include <cstring>
#include <span>

#include "format/gguf.h"
#include "gguf_reap/error.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"

using namespace gguf_reap;

namespace {

void check_round_trip(const Header& h, const uint8_t* data, size_t size) {
    const std::vector<uint8_t> out = serialize_header(h.version, h.kvs, h.tensors, h.alignment);
    if (h.infos_end > size || h.infos_end > out.size() || std::memcmp(out.data(), data, h.infos_end) != 0)
        __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> bytes(data, size);
    // With and without the "data lies inside the file" check.
    for (const bool require_data : {true, false}) {
        try {
            ParseOptions opts;
            opts.require_data = require_data;
            check_round_trip(parse_gguf_header(bytes, "fuzz.gguf", opts), data, size);
        } catch (const InputError&) {
        }
    }
    try {
        ShardSet set = ShardSet::from_header("fuzz.gguf", parse_gguf_header(bytes, "fuzz.gguf"));
        MoeLayout layout = build_moe_layout(set);
        // Every slab must lie inside its tensor.
        for (const auto& b : layout.blocks)
            for (const auto& et : b.tensors)
                if (et.slab * layout.expert_count != set.tensors()[et.tensor].nbytes) __builtin_trap();
    } catch (const InputError&) {
    }
    return 0;
}
