// The per-row pass of rank's read: the sum (in double), largest and smallest of n little-endian
// floats, one imatrix row (an expert's channel energies). Two implementations of the same arithmetic
// (every add in the same lane and order, no fused multiply-add), so that the result is the same bits
// on any CPU: four-lane vectors (built for AVX2 and for any x86-64; NEON elsewhere) and eight-lane
// vectors for AVX-512, where the doubles of eight lanes are one register (on the warm benchmark rank
// took 0.158-0.168 s with it against 0.174-0.188 s; docs/perf/rank.md).
#pragma once

#include <cstdint>

namespace gguf_reap {

struct RowExtremes {
    double sum = 0;
    float max = 0, min = 0;  // NaN values are skipped; -inf and +inf for n = 0
};

// `x` points at n floats, possibly unaligned. Picks the AVX-512 build where the CPU has it.
RowExtremes row_extremes(const uint8_t* x, int64_t n);

// The two builds, for tests: row_extremes_avx512 only where avx512_available().
RowExtremes row_extremes_4(const uint8_t* x, int64_t n);
RowExtremes row_extremes_avx512(const uint8_t* x, int64_t n);
bool avx512_available();

}  // namespace gguf_reap
