// GGUF: parse and build headers of GGUF v2/v3 files (little-endian).
//
// Byte grammar (reference §1; all integers little-endian, no alignment between header fields):
//   1  file        := magic version n_tensors n_kv kv{n_kv} tensor_info{n_tensors} pad data
//   2  magic       := "GGUF"                                  (4 bytes)
//   3  version     := u32                                     (2 or 3; 1 refused; byte-swapped refused)
//   4  n_tensors   := i64 >= 0          n_kv := i64 >= 0      (u32 in v1)
//   5  kv          := string(key) i32(value_type) value
//   6  value       := scalar | string | array
//   7  scalar      := u8 | i8 | u16 | i16 | u32 | i32 | f32 | bool(1 byte) | u64 | i64 | f64
//   8  string      := u64(len <= 1 GiB) byte{len}             (no NUL, UTF-8 not validated)
//   9  array       := i32(elem_type != ARRAY) u64(count <= 2^30) elem{count}
//  10  tensor_info := string(name, len < 64) u32(n_dims <= 4) i64(ne[i] >= 0){n_dims} i32(type) u64(offset)
//  11  pad         := zero bytes up to a multiple of ALIGNMENT (only when n_tensors > 0)
//  12  data        := per tensor in info order: bytes{nbytes} zero-pad to ALIGNMENT
//  13  ALIGNMENT   := general.alignment (must be u32, a non-zero power of two) or 32
//  14  offsets     := strictly cumulative: offset[0] = 0, offset[i+1] = offset[i] + PAD(nbytes[i])
//                     (ggml enforces this since PR #11030, 2025-01; a gap or reorder fails to load)
//
// The parser applies every validation ggml's gguf_init_from_file applies, plus "tensor data lies
// inside the file"; each failure is an InputError naming file, byte offset and field. It reads only
// header bytes. Values are kept as raw little-endian bytes so that a header read and written back
// is byte-identical.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/input_file.h"

namespace gguf_reap {

enum class GgufType : int32_t {
    kUint8 = 0,
    kInt8 = 1,
    kUint16 = 2,
    kInt16 = 3,
    kUint32 = 4,
    kInt32 = 5,
    kFloat32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kUint64 = 10,
    kInt64 = 11,
    kFloat64 = 12,
};
inline constexpr int32_t kGgufTypeCount = 13;

inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint64_t kGgufMaxStringLength = uint64_t{1} << 30;   // ggml GGUF_MAX_STRING_LENGTH
inline constexpr uint64_t kGgufMaxArrayElements = uint64_t{1} << 30;  // ggml GGUF_MAX_ARRAY_ELEMENTS
inline constexpr size_t kGgmlMaxName = 64;                            // names must be < 64 bytes
inline constexpr int kGgmlMaxDims = 4;

// "u32", "str", "arr[str]"...
std::string gguf_type_name(GgufType t);
// Size in bytes of a scalar type; 0 for STRING and ARRAY.
size_t gguf_scalar_size(GgufType t);

// One key/value pair. `raw` is the value's encoding exactly as on disk (after the type tag; for arrays
// it includes element type and count), so writing it back reproduces the source bytes.
struct Kv {
    std::string key;
    GgufType type = GgufType::kUint8;
    GgufType elem_type = GgufType::kUint8;  // arrays only
    uint64_t count = 0;                     // arrays only: number of elements
    std::vector<uint8_t> raw;
    uint64_t file_offset = 0;  // where the key starts in the file (for messages); 0 if built in memory

    // Typed access; nullopt when the type does not match (no silent conversion across kinds).
    std::optional<uint64_t> as_uint() const;  // any unsigned or non-negative signed integer scalar
    std::optional<int64_t> as_int() const;    // any integer scalar that fits in int64
    std::optional<double> as_float() const;   // f32/f64
    std::optional<bool> as_bool() const;
    std::optional<std::string> as_string() const;
    std::optional<std::vector<std::string>> as_string_array() const;
    // A short human rendering: scalars in full, strings quoted (truncated), arrays as "[str × 4096]".
    std::string display(size_t max_len = 60) const;

    static Kv make_u16(std::string key, uint16_t v);
    static Kv make_u32(std::string key, uint32_t v);
    static Kv make_i32(std::string key, int32_t v);
    static Kv make_u64(std::string key, uint64_t v);
    static Kv make_f32(std::string key, float v);
    static Kv make_bool(std::string key, bool v);
    static Kv make_string(std::string key, std::string_view v);
    static Kv make_string_array(std::string key, const std::vector<std::string>& v);
    // Arrays of numbers (each value converted to the element type).
    static Kv make_u32_array(std::string key, const std::vector<int64_t>& v);
    static Kv make_i32_array(std::string key, const std::vector<int64_t>& v);
    static Kv make_f32_array(std::string key, const std::vector<double>& v);
    static Kv make_bool_array(std::string key, const std::vector<bool>& v);
    // Same type as `like` (any integer type), value v; nullopt when v does not fit that type.
    static std::optional<Kv> make_int_like(const Kv& like, uint64_t v);
};

struct TensorInfo {
    std::string name;
    uint32_t n_dims = 1;  // as stored (ggml writes trailing 1-dims away; sources may not)
    std::array<int64_t, 4> ne{1, 1, 1, 1};
    int32_t type = 0;
    uint64_t offset = 0;  // relative to the data section
    uint64_t nbytes = 0;
    uint64_t info_offset = 0;  // where this tensor's info starts in the file (for messages)

    uint64_t n_elements() const;  // product of ne (validated not to overflow by the parser)
};

struct Header {
    uint32_t version = 3;
    std::vector<Kv> kvs;
    std::vector<TensorInfo> tensors;
    uint32_t alignment = kGgufDefaultAlignment;
    uint64_t infos_end = 0;   // first byte after the tensor infos
    uint64_t data_start = 0;  // absolute offset of the data section
    uint64_t data_size = 0;   // sum of padded tensor sizes (ggml's ctx->size)

    const Kv* find(std::string_view key) const;
};

struct ParseOptions {
    // Refuse files whose data section does not hold every tensor (llama.cpp's loader check). Always
    // on for models; a header-only parse of a partial download may turn it off.
    bool require_data = true;
};

// Parses the header of `file` (through a FileSource). Throws InputError (bad content) or IoError
// (read failure).
Header parse_gguf_header(const InputFile& file, const ParseOptions& opts = {});
// The same parser over bytes: `bytes` is the whole file (or as much of it as exists), named `name` in
// messages. Throws InputError.
Header parse_gguf_header(std::span<const uint8_t> bytes, const std::string& name,
                         const ParseOptions& opts = {});
class ByteSource;
Header parse_gguf_header(ByteSource& src, const ParseOptions& opts = {});

// Tensor infos with offsets assigned cumulatively, each padded to `alignment` (reference §1.6).
// Returns the data-section size. Throws std::overflow_error on overflow (impossible for valid input).
uint64_t assign_offsets(std::vector<TensorInfo>& tensors, uint32_t alignment);

// Serialises magic, version, counts, kvs and tensor infos, followed by zero padding up to the data
// start (a multiple of `alignment`). Offsets in `tensors` are written as given.
std::vector<uint8_t> serialize_header(uint32_t version, const std::vector<Kv>& kvs,
                                      const std::vector<TensorInfo>& tensors, uint32_t alignment);

// The alignment a header declares: general.alignment or 32 (validated by the parser).
uint32_t header_alignment(const std::vector<Kv>& kvs);

}  // namespace gguf_reap
