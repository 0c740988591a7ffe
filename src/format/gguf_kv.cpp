// The key/value pairs of a GGUF header (format/gguf.h): typed reads of a value, its display, and the
// makers the writer and the tools use.
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "format/gguf.h"
#include "format/le_bytes.h"

namespace gguf_reap {

using le::append_le;
using le::append_string;
using le::load_le;

// ---- Kv -------------------------------------------------------------------------------------------

std::optional<int64_t> Kv::as_int() const {
    const uint8_t* p = raw.data();
    switch (type) {
        case GgufType::kUint8:
            return load_le<uint8_t>(p);
        case GgufType::kInt8:
            return load_le<int8_t>(p);
        case GgufType::kUint16:
            return load_le<uint16_t>(p);
        case GgufType::kInt16:
            return load_le<int16_t>(p);
        case GgufType::kUint32:
            return load_le<uint32_t>(p);
        case GgufType::kInt32:
            return load_le<int32_t>(p);
        case GgufType::kInt64:
            return load_le<int64_t>(p);
        case GgufType::kUint64: {
            uint64_t v = load_le<uint64_t>(p);
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
            return static_cast<int64_t>(v);
        }
        default:
            return std::nullopt;
    }
}

std::optional<uint64_t> Kv::as_uint() const {
    if (type == GgufType::kUint64) return load_le<uint64_t>(raw.data());
    auto v = as_int();
    if (!v || *v < 0) return std::nullopt;
    return static_cast<uint64_t>(*v);
}

std::optional<double> Kv::as_float() const {
    if (type == GgufType::kFloat32) return load_le<float>(raw.data());
    if (type == GgufType::kFloat64) return load_le<double>(raw.data());
    return std::nullopt;
}

std::optional<bool> Kv::as_bool() const {
    if (type != GgufType::kBool) return std::nullopt;
    return raw[0] != 0;
}

std::optional<std::string> Kv::as_string() const {
    if (type != GgufType::kString) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(raw.data()) + 8, raw.size() - 8);
}

std::optional<std::vector<std::string>> Kv::as_string_array() const {
    if (type != GgufType::kArray || elem_type != GgufType::kString) return std::nullopt;
    std::vector<std::string> out;
    out.reserve(count);
    size_t pos = 12;
    for (uint64_t i = 0; i < count; ++i) {
        uint64_t len = load_le<uint64_t>(raw.data() + pos);
        pos += 8;
        out.emplace_back(reinterpret_cast<const char*>(raw.data()) + pos, len);
        pos += len;
    }
    return out;
}

std::string Kv::display(size_t max_len) const {
    if (type == GgufType::kArray) return fmt::format("[{} × {}]", gguf_type_name(elem_type), count);
    if (type == GgufType::kString) {
        std::string s = *as_string();
        std::string out;
        for (char ch : s) {
            if (out.size() >= max_len) {
                out += "…";
                break;
            }
            if (ch == '\n')
                out += "\\n";
            else if (static_cast<unsigned char>(ch) < 0x20)
                out += fmt::format("\\x{:02x}", static_cast<unsigned char>(ch));
            else
                out += ch;
        }
        return "\"" + out + "\"";
    }
    if (type == GgufType::kBool) return *as_bool() ? "true" : "false";
    if (auto f = as_float()) return fmt::format("{}", *f);
    if (type == GgufType::kUint64) return fmt::format("{}", load_le<uint64_t>(raw.data()));
    if (auto i = as_int()) return fmt::format("{}", *i);
    return "?";
}

namespace {
template <typename T>
Kv make_scalar(std::string key, GgufType type, T v) {
    Kv kv;
    kv.key = std::move(key);
    kv.type = type;
    append_le<T>(kv.raw, v);
    return kv;
}
}  // namespace

Kv Kv::make_u16(std::string key, uint16_t v) {
    return make_scalar(std::move(key), GgufType::kUint16, v);
}
Kv Kv::make_u32(std::string key, uint32_t v) {
    return make_scalar(std::move(key), GgufType::kUint32, v);
}
Kv Kv::make_i32(std::string key, int32_t v) {
    return make_scalar(std::move(key), GgufType::kInt32, v);
}
Kv Kv::make_u64(std::string key, uint64_t v) {
    return make_scalar(std::move(key), GgufType::kUint64, v);
}
Kv Kv::make_f32(std::string key, float v) {
    return make_scalar(std::move(key), GgufType::kFloat32, v);
}
Kv Kv::make_bool(std::string key, bool v) {
    return make_scalar(std::move(key), GgufType::kBool, static_cast<uint8_t>(v ? 1 : 0));
}
Kv Kv::make_string(std::string key, std::string_view v) {
    Kv kv;
    kv.key = std::move(key);
    kv.type = GgufType::kString;
    append_string(kv.raw, v);
    return kv;
}
Kv Kv::make_string_array(std::string key, const std::vector<std::string>& v) {
    Kv kv;
    kv.key = std::move(key);
    kv.type = GgufType::kArray;
    kv.elem_type = GgufType::kString;
    kv.count = v.size();
    append_le<int32_t>(kv.raw, static_cast<int32_t>(GgufType::kString));
    append_le<uint64_t>(kv.raw, v.size());
    for (const auto& s : v) append_string(kv.raw, s);
    return kv;
}

namespace {
template <class T, class V>
Kv numeric_array(std::string key, GgufType et, const std::vector<V>& v) {
    Kv kv;
    kv.key = std::move(key);
    kv.type = GgufType::kArray;
    kv.elem_type = et;
    kv.count = v.size();
    append_le<int32_t>(kv.raw, static_cast<int32_t>(et));
    append_le<uint64_t>(kv.raw, v.size());
    for (const auto x : v) append_le<T>(kv.raw, static_cast<T>(x));
    return kv;
}
}  // namespace

Kv Kv::make_u32_array(std::string key, const std::vector<int64_t>& v) {
    return numeric_array<uint32_t>(std::move(key), GgufType::kUint32, v);
}
Kv Kv::make_i32_array(std::string key, const std::vector<int64_t>& v) {
    return numeric_array<int32_t>(std::move(key), GgufType::kInt32, v);
}
Kv Kv::make_f32_array(std::string key, const std::vector<double>& v) {
    return numeric_array<float>(std::move(key), GgufType::kFloat32, v);
}
Kv Kv::make_bool_array(std::string key, const std::vector<bool>& v) {
    return numeric_array<uint8_t>(std::move(key), GgufType::kBool, v);
}

std::optional<Kv> Kv::make_int_like(const Kv& like, uint64_t v) {
    Kv kv;
    kv.key = like.key;
    kv.type = like.type;
    auto put = [&](auto typed) -> std::optional<Kv> {
        using T = decltype(typed);
        if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
        append_le<T>(kv.raw, static_cast<T>(v));
        return kv;
    };
    switch (like.type) {
        case GgufType::kUint8:
            return put(uint8_t{});
        case GgufType::kInt8:
            return put(int8_t{});
        case GgufType::kUint16:
            return put(uint16_t{});
        case GgufType::kInt16:
            return put(int16_t{});
        case GgufType::kUint32:
            return put(uint32_t{});
        case GgufType::kInt32:
            return put(int32_t{});
        case GgufType::kUint64:
            return put(uint64_t{});
        case GgufType::kInt64:
            return put(int64_t{});
        default:
            return std::nullopt;
    }
}

}  // namespace gguf_reap
