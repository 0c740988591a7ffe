// libFuzzer target: imatrix files in both formats (GGUF imatrix and legacy .dat; the magic decides).
// Any byte string either opens, and then every entry's values and counts can be read, or raises
// InputError; nothing else.
#include <cstdint>

#include "format/imatrix.h"
#include "fuzz_util.h"
#include "io/error.h"

using namespace gguf_reap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz::MemFile mem(data, size);
    try {
        (void)detect_imatrix(mem.path());
    } catch (const InputError&) {
    }
    try {
        ImatrixFile im = ImatrixFile::open(mem.path());
        for (const ImatrixEntry& e : im.entries()) {
            if (im.read_values(e).size() != static_cast<size_t>(e.nval)) __builtin_trap();
            (void)im.read_counts(e);
        }
    } catch (const InputError&) {
    }
    return 0;
}
