// The ggml tensor type table (ggml.h enum + ggml.c type_traits), ids 0..42.
// Only what gguf-reap needs: name, block size, bytes per block. Removed ids have block size 0 and are
// refused by the reader exactly as ggml refuses them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gguf_reap {

inline constexpr int kGgmlTypeCount = 43;

// The ids gguf-reap names in code (ggml.h enum ggml_type).
inline constexpr int32_t kGgmlF32 = 0;
inline constexpr int32_t kGgmlF16 = 1;
inline constexpr int32_t kGgmlQ4_0 = 2;
inline constexpr int32_t kGgmlQ8_0 = 8;
inline constexpr int32_t kGgmlQ4_K = 12;
inline constexpr int32_t kGgmlQ6_K = 14;
inline constexpr int32_t kGgmlIQ2_XXS = 16;
inline constexpr int32_t kGgmlI32 = 26;
inline constexpr int32_t kGgmlF64 = 28;
inline constexpr int32_t kGgmlBF16 = 30;
inline constexpr int32_t kGgmlMXFP4 = 39;

// Whether elements of a row can be selected byte-exactly: one element per block (F32, F16, BF16).
inline bool is_float_type(int32_t id) {
    return id == kGgmlF32 || id == kGgmlF16 || id == kGgmlBF16;
}

struct GgmlType {
    std::string_view name;          // ggml's type_name ("q4_K"); empty for removed ids
    int64_t block_size;             // elements per block; 0 for removed ids
    int64_t type_size;              // bytes per block
    std::string_view removed_note;  // why a removed id is gone (for the error message)
};

// Traits of type id `id`, or nullptr when the id is outside 0..42.
const GgmlType* ggml_type(int32_t id);

// Upper-case name as people write it ("Q4_K", "IQ2_XXS", "BF16"), or "type<id>".
std::string ggml_type_display(int32_t id);

// Type id from a (case-insensitive) name, e.g. "q8_0" or "Q8_0".
std::optional<int32_t> ggml_type_from_name(std::string_view name);

// Bytes of one row of `ne0` elements; nullopt when ne0 is not a multiple of the block size or the
// result would overflow. Precondition: ggml_type(id) is non-null with block_size > 0.
std::optional<uint64_t> ggml_row_size(int32_t id, int64_t ne0);

// GGML_PAD(x, n) for a power-of-two n, overflow-checked.
std::optional<uint64_t> pad_to(uint64_t x, uint64_t alignment);

}  // namespace gguf_reap
