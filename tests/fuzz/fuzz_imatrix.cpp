// libFuzzer target: imatrix files in both formats (GGUF imatrix and legacy .dat; the magic decides).
// Any byte string either parses, and then every entry's values and counts lie inside it, or raises
// InputError; nothing else.
#include <cstdint>
#include <span>

#include "format/imatrix.h"
#include "gguf_reap/error.h"

using namespace gguf_reap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const ImatrixFile im = ImatrixFile::parse(std::span<const uint8_t>(data, size), "fuzz.imatrix");
        for (const ImatrixEntry& e : im.entries()) {
            // What read_values and read_counts would read must lie inside the bytes. (A GGUF entry may
            // hold no values at all: ne0 or n_mat 0 parses, and rank refuses it later.)
            if (e.nval < 0 || e.sums_offset > size ||
                static_cast<uint64_t>(e.nval) > (size - e.sums_offset) / 4)
                __builtin_trap();
            if (im.kind() == ImatrixKind::kGguf &&
                (e.n_mat < 0 || e.counts_offset > size ||
                 static_cast<uint64_t>(e.n_mat) > (size - e.counts_offset) / 4 || e.ne0 * e.n_mat != e.nval))
                __builtin_trap();
        }
    } catch (const InputError&) {
    }
    return 0;
}
