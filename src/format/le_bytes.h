// Little-endian loads and appends of GGUF's scalars and strings, for the header parser and writer
// (gguf.cpp) and the key/value pairs (gguf_kv.cpp). GGUF bytes are little-endian and so is every
// machine gguf-reap builds for (format/cursor.h asserts it).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace gguf_reap::le {

template <typename T>
inline T load_le(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <typename T>
inline void append_le(std::vector<uint8_t>& out, T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof v);
}

inline void append_string(std::vector<uint8_t>& out, std::string_view s) {
    append_le<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

}  // namespace gguf_reap::le
