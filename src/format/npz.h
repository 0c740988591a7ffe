// NumPy .npy arrays inside a .npz (a zip archive, one "<name>.npy" member per array), written and read
// with libzip. Only what gguf-reap exchanges: little-endian integers, floats, booleans and fixed-width
// unicode strings, C order.
//
// .npy layout (numpy.lib.format, version 1.0):
//   1  magic    := "\x93NUMPY" u8(1) u8(0)
//   2  hlen     := u16 little-endian: length of the header text
//   3  header   := "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }" padded with spaces and
//                  ending in "\n" so that 10 + hlen is a multiple of 64
//   4  data     := product(shape) × itemsize bytes, C order
// (versions 2.0/3.0 differ only in a u32 hlen; both are read.)
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace gguf_reap {

class OutputFile;

struct NpyArray {
    std::string descr;           // numpy dtype string: "<f8", "<i4", "<u2", "|b1", "<U12", ...
    std::vector<int64_t> shape;  // C order; {} is a scalar
    std::vector<uint8_t> data;   // raw little-endian element bytes

    int64_t element_count() const;
    int64_t item_size() const;  // bytes per element, from descr; 0 when descr is not understood

    static NpyArray f64(std::vector<int64_t> shape, const std::vector<double>& v);
    static NpyArray i32(std::vector<int64_t> shape, const std::vector<int32_t>& v);
    static NpyArray i64(std::vector<int64_t> shape, const std::vector<int64_t>& v);
    static NpyArray u16(std::vector<int64_t> shape, const std::vector<uint16_t>& v);
    static NpyArray boolean(std::vector<int64_t> shape, const std::vector<uint8_t>& v);
    // A 1-D array of UTF-8 strings stored as numpy's fixed-width UTF-32 "<Un" (loads without pickle).
    static NpyArray strings(const std::vector<std::string>& v);

    // Integer elements as int64 (any <i1..<i8, <u1..<u8, |b1); throws UsageError for other dtypes.
    std::vector<int64_t> to_int64() const;
};

// The bytes of one .npy member, and of its header alone (magic, version, length, header text).
std::vector<uint8_t> npy_bytes(const NpyArray& a);
std::vector<uint8_t> npy_header_bytes(const NpyArray& a);

// Writes an .npz holding `arrays` into `out` from offset 0, without committing it (what write_npz
// does); errors name `out`'s final path.
void write_npz_to(OutputFile& out, const std::vector<std::pair<std::string, NpyArray>>& arrays);

// Writes an .npz holding `arrays` (member names get ".npy") under a temporary name, then renames it
// into place (OutputFile). Member order is the map's order; timestamps are fixed so that the same
// arrays always give the same bytes.
void write_npz(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>& arrays);

// Reads every array of an .npz. Throws InputError naming the file, the member and what is wrong (not
// a zip, not an .npy, unsupported dtype, Fortran order, data size disagreeing with the shape), or
// IoError. Arrays larger than `max_bytes` in total are refused before they are read.
std::map<std::string, NpyArray> read_npz(const std::string& path, uint64_t max_bytes = uint64_t{1} << 32);
// The same reader over the archive's bytes in memory, named `path` in messages.
std::map<std::string, NpyArray> read_npz(std::span<const uint8_t> bytes, const std::string& path,
                                         uint64_t max_bytes = uint64_t{1} << 32);

}  // namespace gguf_reap
