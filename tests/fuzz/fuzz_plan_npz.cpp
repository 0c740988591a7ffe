// libFuzzer target: width-pruning plans (.npz, a zip of .npy arrays). Any byte string either reads as
// a plan for a fixed small model or raises InputError; nothing else. The archive reader is fuzzed on
// its own too (read_npz), and a plan that reads must hold what read_neuron_plan promises: one row per
// (block, expert) pair, every row ascending, ids unique and below the expert width.
#include <cstdint>
#include <span>
#include <vector>

#include "format/npz.h"
#include "gguf_reap/error.h"
#include "gguf_reap/width.h"

using namespace gguf_reap;

namespace {

// MoE blocks 1..3 with 4 experts of width 64: small enough that a plan fits in a few hundred bytes.
const std::vector<int> kBlocks = {1, 2, 3};
constexpr int64_t kExperts = 4;
constexpr int64_t kWidth = 64;

void check_plan(const NeuronPlan& p) {
    if (p.k < 1 || p.k > kWidth || p.expert_count != kExperts || p.blocks != kBlocks) __builtin_trap();
    if (p.channels.size() != kBlocks.size() * static_cast<size_t>(kExperts) * static_cast<size_t>(p.k))
        __builtin_trap();
    for (size_t b = 0; b < kBlocks.size(); ++b)
        for (int64_t e = 0; e < kExperts; ++e) {
            const int32_t* row = p.row(b, e);
            for (int64_t j = 0; j < p.k; ++j) {
                if (row[j] < 0 || row[j] >= kWidth) __builtin_trap();
                if (j > 0 && row[j] <= row[j - 1]) __builtin_trap();
            }
        }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> bytes(data, size);
    try {
        // 1 MiB of arrays at most: a bigger member is refused before it is inflated.
        for (const auto& [name, a] : read_npz(bytes, "fuzz.npz", uint64_t{1} << 20))
            if (a.item_size() <= 0 || a.data.size() != static_cast<size_t>(a.element_count() * a.item_size()))
                __builtin_trap();
    } catch (const InputError&) {
    }
    try {
        check_plan(parse_neuron_plan(bytes, "fuzz.npz", kBlocks, kExperts, kWidth));
    } catch (const InputError&) {
    }
    return 0;
}
