// Overflow-checked size arithmetic. Every size or offset computed from file contents goes through
// these, so a hostile header can never wrap an addition into a small, "valid" number.
#pragma once

#include <cstdint>
#include <optional>

namespace gguf_reap {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
    return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
    return r;
}

// True when [off, off+len) lies inside [0, size): compares integers, never computed pointers.
inline bool range_inside(uint64_t off, uint64_t len, uint64_t size) {
    return off <= size && len <= size - off;
}

}  // namespace gguf_reap
