// libFuzzer target: sha256 manifests (audit --manifest, --source-manifest). Any text either parses or
// raises InputError; a manifest that parses must survive to_json → parse unchanged (that is how
// `audit --manifest-out` hands it to a later audit); the model its headers describe (version 2) is
// either built, with its expert layout, or refused with InputError.
#include <cstdint>
#include <string>

#include "gguf_reap/error.h"
#include "gguf_reap/manifest.h"
#include "model/moe_layout.h"
#include "services/manifest_file.h"

using namespace gguf_reap;

namespace {

bool same(const Manifest& a, const Manifest& b) {
    if (a.tool != b.tool || a.shards.size() != b.shards.size()) return false;
    for (size_t i = 0; i < a.shards.size(); ++i) {
        const ManifestShard &x = a.shards[i], &y = b.shards[i];
        if (x.name != y.name || x.size != y.size || x.sha256 != y.sha256 || x.header != y.header ||
            x.tensors.size() != y.tensors.size())
            return false;
        for (size_t k = 0; k < x.tensors.size(); ++k) {
            const ManifestTensor &s = x.tensors[k], &t = y.tensors[k];
            if (s.name != t.name || s.offset != t.offset || s.nbytes != t.nbytes || s.sha256 != t.sha256 ||
                s.slab_bytes != t.slab_bytes || s.slabs != t.slabs)
                return false;
        }
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    Manifest m;
    try {
        m = Manifest::parse(text, "fuzz.json");
    } catch (const InputError&) {
        return 0;
    }
    std::string again;
    try {
        again = m.to_json().dump();
    } catch (...) {
        __builtin_trap();  // a parsed manifest always serialises (strings were valid UTF-8 on the way in)
    }
    if (!same(m, Manifest::parse(again, "roundtrip.json"))) __builtin_trap();
    if (m.sha256sum_text().size() < m.shards.size()) __builtin_trap();
    try {
        const ShardSet model = manifest_model(m, "fuzz.json");
        build_moe_layout(model);
    } catch (const InputError&) {
    }
    return 0;
}
