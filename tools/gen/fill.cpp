#include "gen/fill.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "format/ggml_types.h"
#include "gen/random.h"

namespace gguf_reap::gen {

static_assert(std::endian::native == std::endian::little, "GGUF bytes are built as little-endian words");

namespace {

// ggml type ids used here (ggml.h).

// Bytes of a block whose bit 6 (the exponent MSB of an f16, of an f32's top byte, of an E4M3 byte) or
// bit 7 (E8M0's NaN pattern 0xFF) must be cleared so the block's scale is finite (ggml-common.h).
// `format` says what the byte is, for kBounded.
enum class ScaleFormat : uint8_t { kF16High, kF32High, kE8M0, kUE4M3 };
struct ScaleBytes {
    uint8_t mask = 0xFF;
    uint8_t count = 0;
    std::array<uint8_t, 4> bytes{};
    ScaleFormat format = ScaleFormat::kF16High;
};

// kBounded: keep the sign and the low bits, force a small exponent.
uint8_t bounded_scale(uint8_t b, ScaleFormat f) {
    switch (f) {
        case ScaleFormat::kF16High:  // s eeeee mm: exponent 3..6, 2^-12 .. 2^-9
            return static_cast<uint8_t>((b & 0x83) | ((3 + ((b >> 2) & 3)) << 2));
        case ScaleFormat::kF32High:  // s eeeeeee (the top seven exponent bits): 2^-9 .. 2^-8
            return static_cast<uint8_t>((b & 0x80) | 0x3B);
        case ScaleFormat::kE8M0:  // 2^(b - 127): 2^-9 .. 2^-6
            return static_cast<uint8_t>(118 + (b & 3));
        case ScaleFormat::kUE4M3:  // 0 eeee mmm, bias 7: exponent 1..4, 2^-6 .. 2^-3
            return static_cast<uint8_t>((b & 0x07) | ((1 + ((b >> 3) & 3)) << 3));
    }
    return b;
}

ScaleBytes scale_bytes(int32_t type) {
    constexpr uint8_t kExpMsb = 0xBF;
    switch (type) {
        case 2:   // q4_0: d
        case 6:   // q5_0: d
        case 8:   // q8_0: d
        case 16:  // iq2_xxs: d
        case 17:  // iq2_xs
        case 18:  // iq3_xxs
        case 19:  // iq1_s
        case 20:  // iq4_nl
        case 21:  // iq3_s
        case 22:  // iq2_s
        case 23:  // iq4_xs
        case 41:  // q1_0
        case 42:  // q2_0
            return {kExpMsb, 1, {1}};
        case 3:   // q4_1: d, m
        case 7:   // q5_1: d, m
        case 9:   // q8_1: d, s
        case 12:  // q4_K: d, dmin
        case 13:  // q5_K: d, dmin
            return {kExpMsb, 2, {1, 3}};
        case 10:
            return {kExpMsb, 2, {81, 83}};  // q2_K: scales[16] qs[64] d dmin
        case 11:
            return {kExpMsb, 1, {109}};  // q3_K: hmask[32] qs[64] scales[12] d
        case 14:
            return {kExpMsb, 1, {209}};  // q6_K: ql[128] qh[64] scales[16] d
        case 15:
            return {kExpMsb, 1, {3}, ScaleFormat::kF32High};  // q8_K: f32 d first
        case 34:
            return {kExpMsb, 1, {53}};  // tq1_0: qs[48] qh[4] d
        case 35:
            return {kExpMsb, 1, {65}};  // tq2_0: qs[64] d
        case 39:
            return {0x7F, 1, {0}, ScaleFormat::kE8M0};  // mxfp4: E8M0 exponent byte (0xFF is NaN)
        case 40:
            return {kExpMsb, 4, {0, 1, 2, 3}, ScaleFormat::kUE4M3};  // nvfp4: four UE4M3 sub-block scales
        default:
            return {};  // iq1_m (no plain scale field), integers
    }
}

// f16: s eeeee mmmmmmmmmm. Small: exponent 5..12 (2^-10 .. 2^-2), random sign. Near one: 14..15, positive.
uint64_t f16_word(uint64_t r, FillKind kind) {
    constexpr uint64_t kLanes = 0x0001000100010001ULL;
    const uint64_t e3 = (r >> 10) & (7 * kLanes);
    if (kind != FillKind::kNearOne) return (r & (0x83FF * kLanes)) | ((e3 + 5 * kLanes) << 10);
    return (r & (0x03FF * kLanes)) | (((e3 & kLanes) + 14 * kLanes) << 10);
}

// bf16: s eeeeeeee mmmmmmm. Small: exponent 117..124; near one: 126..127.
uint64_t bf16_word(uint64_t r, FillKind kind) {
    constexpr uint64_t kLanes = 0x0001000100010001ULL;
    const uint64_t e3 = (r >> 7) & (7 * kLanes);
    if (kind != FillKind::kNearOne) return (r & (0x807F * kLanes)) | ((e3 + 117 * kLanes) << 7);
    return (r & (0x007F * kLanes)) | (((e3 & kLanes) + 126 * kLanes) << 7);
}

// f32: s e(8) m(23). Same exponent ranges as bf16.
uint64_t f32_word(uint64_t r, FillKind kind) {
    constexpr uint64_t kLanes = 0x0000000100000001ULL;
    const uint64_t e3 = (r >> 23) & (7 * kLanes);
    if (kind != FillKind::kNearOne) return (r & (0x807FFFFFULL * kLanes)) | ((e3 + 117 * kLanes) << 23);
    return (r & (0x007FFFFFULL * kLanes)) | (((e3 & kLanes) + 126 * kLanes) << 23);
}

// f64: s e(11) m(52). Small: exponent 1013..1020; near one: 1022..1023.
uint64_t f64_word(uint64_t r, FillKind kind) {
    const uint64_t e3 = (r >> 52) & 7;
    if (kind != FillKind::kNearOne) return (r & 0x800FFFFFFFFFFFFFULL) | ((e3 + 1013) << 52);
    return (r & 0x000FFFFFFFFFFFFFULL) | (((e3 & 1) + 1022) << 52);
}

}  // namespace

TensorFill::TensorFill(uint64_t key, int32_t type, uint64_t nbytes, FillKind kind, FillIds ids)
    : key_(key), type_(type), nbytes_(nbytes), kind_(kind), ids_(ids) {
    const GgmlType* t = ggml_type(type);
    block_bytes_ = t && t->type_size > 0 ? static_cast<uint64_t>(t->type_size) : 1;
    chunk_bytes_ = std::max<uint64_t>(1, kMaxChunkBytes / block_bytes_) * block_bytes_;
}

size_t TensorFill::chunk_size(uint64_t c) const {
    const uint64_t start = c * chunk_bytes_;
    return static_cast<size_t>(std::min(chunk_bytes_, nbytes_ - start));
}

void TensorFill::fill(uint64_t c, uint8_t* out) const {
    const size_t n = chunk_size(c);
    if (kind_ == FillKind::kZero) {
        std::memset(out, 0, n);
        return;
    }
    if (kind_ == FillKind::kExpertIds) {  // I32: chunks hold whole elements (chunk_bytes_ is a multiple of 4)
        const uint64_t first = c * chunk_bytes_ / 4;
        for (size_t k = 0; k < n / 4; ++k) {
            const uint64_t i = first + k;
            const auto row = static_cast<uint64_t>(ids_.row), mod = static_cast<uint64_t>(ids_.modulus);
            const auto v = static_cast<int32_t>((i / row + i % row) % mod);
            std::memcpy(out + 4 * k, &v, 4);
        }
        return;
    }
    Rng rng(derive(key_, c));
    uint64_t (*word)(uint64_t, FillKind) = nullptr;
    switch (type_) {
        case kGgmlF32:
            word = f32_word;
            break;
        case kGgmlF16:
            word = f16_word;
            break;
        case kGgmlBF16:
            word = bf16_word;
            break;
        case kGgmlF64:
            word = f64_word;
            break;
        default:
            break;
    }
    size_t i = 0;
    if (word) {
        for (; i + 8 <= n; i += 8) {
            const uint64_t w = word(rng.next(), kind_);
            std::memcpy(out + i, &w, 8);
        }
        if (i < n) {
            const uint64_t w = word(rng.next(), kind_);
            std::memcpy(out + i, &w, n - i);  // n is a whole number of elements, so lanes are whole
        }
        return;
    }
    for (; i + 8 <= n; i += 8) {
        const uint64_t w = rng.next();
        std::memcpy(out + i, &w, 8);
    }
    if (i < n) {
        const uint64_t w = rng.next();
        std::memcpy(out + i, &w, n - i);
    }
    // Chunks hold whole blocks, so block boundaries inside the chunk are multiples of block_bytes_.
    const ScaleBytes s = scale_bytes(type_);
    if (s.count == 0) return;
    for (size_t b = 0; b + block_bytes_ <= n; b += block_bytes_)
        for (uint8_t k = 0; k < s.count; ++k) {
            uint8_t& byte = out[b + s.bytes[k]];
            byte = kind_ == FillKind::kBounded ? bounded_scale(byte, s.format) : byte & s.mask;
        }
}

}  // namespace gguf_reap::gen
