#include "format/dequant.h"

#include <cmath>
#include <cstring>

#include "format/ggml_types.h"

namespace gguf_reap {

float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h >> 15) << 31;
    const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    if (exp == 0) {
        const float v = std::ldexp(static_cast<float>(mant), -24);
        return sign ? -v : v;
    }
    const uint32_t bits =
        exp == 31 ? (sign | 0x7F800000u | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

float bf16_to_float(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

bool can_dequantize(int32_t type) {
    return type == kGgmlF32 || type == kGgmlF16 || type == kGgmlBF16 || type == kGgmlQ8_0;
}

void dequantize_row(int32_t type, const uint8_t* src, int64_t ne0, float* dst) {
    uint16_t h;
    switch (type) {
        case kGgmlF32:
            std::memcpy(dst, src, static_cast<size_t>(ne0) * 4);
            break;
        case kGgmlF16:
            for (int64_t i = 0; i < ne0; ++i) {
                std::memcpy(&h, src + 2 * i, 2);
                dst[i] = half_to_float(h);
            }
            break;
        case kGgmlBF16:
            for (int64_t i = 0; i < ne0; ++i) {
                std::memcpy(&h, src + 2 * i, 2);
                dst[i] = bf16_to_float(h);
            }
            break;
        case kGgmlQ8_0:
            // block_q8_0: f16 scale d, then 32 int8 quants; x = d * q.
            for (int64_t blk = 0; blk < ne0 / 32; ++blk) {
                const uint8_t* b = src + blk * 34;
                std::memcpy(&h, b, 2);
                const float d = half_to_float(h);
                for (int j = 0; j < 32; ++j)
                    dst[blk * 32 + j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
            }
            break;
        default:
            break;
    }
}

}  // namespace gguf_reap
