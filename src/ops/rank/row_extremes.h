// The per-row pass of rank's read: the sum (in double), largest and smallest of n little-endian
// floats, one imatrix row (an expert's channel energies). One portable vector pass (GCC/Clang vector
// extensions: SSE2 or AVX2 on x86-64, NEON elsewhere) in a fixed lane order with no fused multiply-add,
// so the result is the same bits on any CPU and build (row_extremes.cpp states the order).
#pragma once

#include <cstdint>

namespace gguf_reap {

struct RowExtremes {
    double sum = 0;
    float max = 0, min = 0;  // NaN values are skipped; -inf and +inf for n = 0
};

// `x` points at n floats, possibly unaligned.
RowExtremes row_extremes(const uint8_t* x, int64_t n);

}  // namespace gguf_reap
