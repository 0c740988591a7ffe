// llama.cpp importance-matrix files, both formats (reference §3), detected by magic:
//  - GGUF imatrix ("GGUF" magic, general.type = "imatrix"): per weight `<name>.in_sum2` F32 [ne0, n_mat]
//    (raw Σ x² over the tokens routed to each matrix) and `<name>.counts` F32 [1, n_mat] (raw tokens).
//  - legacy .dat (no magic): i32 n_entries; per entry i32 name_len, name, i32 ncall, i32 nval,
//    f32[nval]; optional trailer i32 last_chunk, i32 len, dataset. Values are per-matrix *means* of x²
//    scaled by ncall; per-expert counts are not stored.
// Entry data is read on demand straight from the file; opening reads only the directory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/byte_source.h"
#include "io/input_file.h"

namespace gguf_reap {

enum class ImatrixKind { kNotImatrix, kGguf, kLegacy };

// GGUF magic → a GGUF imatrix when general.type is "imatrix" (or, for files from tools that omit it,
// when it has no general.architecture and every tensor ends in .in_sum2/.counts), else kNotImatrix
// (a model). No GGUF magic → kLegacy when the name ends in ".dat", else kNotImatrix.
ImatrixKind detect_imatrix(const std::string& path);

struct ImatrixEntry {
    std::string name;            // the weight's name, e.g. "blk.1.ffn_down_exps.weight"
    int64_t ne0 = 0;             // values per matrix (GGUF); legacy: 0 (unknown without the model)
    int64_t n_mat = 0;           // matrices (experts) (GGUF); legacy: 0 (unknown without the model)
    int64_t nval = 0;            // ne0 * n_mat
    uint64_t sums_offset = 0;    // absolute file offset of the nval float32 values
    uint64_t counts_offset = 0;  // GGUF: absolute offset of n_mat float32 counts
    int32_t ncall = 0;           // legacy only
    uint64_t entry_offset = 0;   // where the entry's description starts (for messages)
};

class ImatrixFile {
  public:
    // Opens and validates the directory. Throws InputError (bad content, naming offset and field)
    // or IoError.
    static ImatrixFile open(const std::string& path);
    // The same parser over bytes (the whole file, named `name` in messages): the directory only, with
    // no file to read values from (read_* must not be called). Throws InputError.
    static ImatrixFile parse(std::span<const uint8_t> bytes, const std::string& name);
    static ImatrixFile parse(ByteSource& src);

    ImatrixKind kind() const { return kind_; }
    const std::string& path() const { return path_; }
    const InputFile& file() const { return *file_; }
    const std::vector<std::string>& datasets() const { return datasets_; }
    std::optional<uint64_t> chunk_count() const { return chunk_count_; }
    std::optional<uint64_t> chunk_size() const { return chunk_size_; }
    const std::vector<ImatrixEntry>& entries() const { return entries_; }
    const ImatrixEntry* find(const std::string& name) const;

    // The nval stored values (GGUF: raw in_sum2; legacy: mean × ncall, possibly NaN).
    std::vector<float> read_values(const ImatrixEntry& e) const;
    // GGUF: the n_mat raw counts. Legacy: one element, ncall (what llama.cpp's loader reports).
    std::vector<float> read_counts(const ImatrixEntry& e) const;
    // Values [first, first + n) of the entry into dst, straight from the file: a caller streams a
    // large entry through a bounded buffer instead of holding all nval values. Throws UsageError
    // when the range is outside the entry (a caller bug, not bad input).
    void read_values_range(const ImatrixEntry& e, uint64_t first, size_t n, float* dst) const;

  private:
    ImatrixKind kind_ = ImatrixKind::kNotImatrix;
    std::string path_;
    std::shared_ptr<InputFile> file_;  // null for a directory parsed from bytes
    std::vector<std::string> datasets_;
    std::optional<uint64_t> chunk_count_;
    std::optional<uint64_t> chunk_size_;
    std::vector<ImatrixEntry> entries_;
};

const char* imatrix_kind_name(ImatrixKind k);  // "gguf", "dat"

}  // namespace gguf_reap
