// Dequantising rows of the ggml types gguf-reap reads values from (weighted-energy's column norms):
// F32, F16, BF16 and Q8_0, as ggml's reference dequantize_row_* computes them.
#pragma once

#include <cstdint>

namespace gguf_reap {

float half_to_float(uint16_t h);  // IEEE binary16 → binary32, exact (subnormals and NaN included)
float bf16_to_float(uint16_t h);

// Whether dequantize_row handles the type.
bool can_dequantize(int32_t type);
// One row of ne0 elements of `type` at `src` (a whole number of blocks) into dst. Precondition:
// can_dequantize(type).
void dequantize_row(int32_t type, const uint8_t* src, int64_t ne0, float* dst);

}  // namespace gguf_reap
