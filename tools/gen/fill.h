// Tensor contents for synthetic models: seeded, streamable in fixed chunks, fast (bit patterns built
// from 64-bit random words; no per-element float conversion).
//
//  - F32 / F16 / BF16 / F64: valid, finite, small values: random sign, |v| in [2^-10, 2^-2)
//    (FillKind::kSmall), or positive values in [0.5, 2) for norms and per-expert scales
//    (FillKind::kNearOne). Consumers that read weights as floats (rank's W_down energy) see sane numbers.
//  - Every other type: random bytes, except that each block's scale fields (the f16 `d`/`dmin` of
//    Q4_0…Q8_1, the K- and IQ-quants, TQ*, Q1_0/Q2_0; the E8M0/UE4M3 exponents of MXFP4/NVFP4) get
//    their top exponent bit cleared, so a dequantiser never meets Inf or NaN.
//
// A tensor is cut into chunks of ~1 MiB (a whole number of blocks); chunk c is a pure function of
// (key, type, c), so a writer may fill chunks in any order, on any thread, with any buffer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gguf_reap::gen {

enum class FillKind {
    kSmall,
    // As kSmall for float types; for quantized types every block scale is also small (2^-12..2^-9 for
    // f16 scales, 2^-9..2^-6 for E8M0, 2^-6..2^-3 for UE4M3), so that a forward pass over random
    // weights stays finite: with kSmall's scales of up to 2, Q8_0 weights reach ±250 and llama.cpp's
    // activations overflow f16 after two projections (NaN logits). The architecture presets use it;
    // --skeleton keeps kSmall, byte for byte.
    kBounded,
    kNearOne,
    kZero,       // all bytes zero (biases, selection biases)
    kExpertIds,  // I32 rows of `row` distinct ids below `modulus` (a token → expert table), see FillIds
};
// The layout of a kExpertIds tensor: element i of row t (t = i / row, j = i % row) is (t + j) % modulus.
struct FillIds {
    int64_t row = 1;
    int64_t modulus = 1;
};

class TensorFill {
  public:
    // `key`: the tensor's stream key (derive(seed, name)); `nbytes` a whole number of blocks of `type`.
    TensorFill(uint64_t key, int32_t type, uint64_t nbytes, FillKind kind, FillIds ids = {});

    uint64_t chunk_bytes() const { return chunk_bytes_; }
    uint64_t chunk_count() const { return (nbytes_ + chunk_bytes_ - 1) / chunk_bytes_; }
    size_t chunk_size(uint64_t c) const;  // chunk_bytes() except for the last chunk

    // Writes chunk c (chunk_size(c) bytes) to out.
    void fill(uint64_t c, uint8_t* out) const;

    // Upper bound of chunk_bytes() for any type: the buffer size a writer needs.
    static constexpr size_t kMaxChunkBytes = size_t{1} << 20;

  private:
    uint64_t key_;
    int32_t type_;
    uint64_t nbytes_;
    FillKind kind_;
    FillIds ids_;
    uint64_t block_bytes_;
    uint64_t chunk_bytes_;
};

}  // namespace gguf_reap::gen
