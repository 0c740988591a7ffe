// A model as a set of GGUF shards (or one unsplit file): opened from any shard's path, validated as
// llama.cpp's loader validates split files (reference §4.4), with one global tensor index.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "format/gguf.h"
#include "io/input_file.h"

namespace gguf_reap {

// The keys llama.cpp's gguf-split writes into every shard of a set (reference §4.4).
inline constexpr const char* kSplitNo = "split.no";                       // u16: this shard, from 0
inline constexpr const char* kSplitCount = "split.count";                 // u16: shards in the set
inline constexpr const char* kSplitTensorsCount = "split.tensors.count";  // i32: tensors in the set
inline constexpr std::array<const char*, 3> kSplitKeys = {kSplitNo, kSplitCount, kSplitTensorsCount};
// Whether `key` is one of them (splice writes them anew for each shard; audit checks them apart).
inline bool is_split_key(std::string_view key) {
    return key == kSplitNo || key == kSplitCount || key == kSplitTensorsCount;
}

struct Shard {
    std::string path;
    std::shared_ptr<InputFile> file;
    Header header;
};

// Where one tensor lives: shard index, index in that shard's header, absolute byte range.
struct TensorRef {
    size_t shard = 0;
    size_t index = 0;
    uint64_t abs_offset = 0;  // data_start + offset within that shard's file
    uint64_t nbytes = 0;
};

// PREFIX-NNNNN-of-MMMMM.gguf, parsed (1-based number as in the name).
struct SplitName {
    std::string prefix;
    int number = 0;
    int count = 0;
};
std::optional<SplitName> parse_split_name(std::string_view path);
std::string split_path(std::string_view prefix, int number, int count);  // number is 1-based

class ShardSet {
  public:
    // Opens the model that `path` belongs to: an unsplit file, or any shard of a split set (siblings
    // are found by name). Validates split.no / split.count / split.tensors.count (u16/u16/i32), missing
    // and extra shards, duplicate tensor names. Throws InputError / IoError.
    static ShardSet open(const std::string& path, const ParseOptions& opts = {});
    // An unsplit model from a header parsed elsewhere (from bytes: the fuzz targets, tests). Its shard
    // has no file; total_bytes() counts it as 0. Throws InputError for a shard of a split set.
    static ShardSet from_header(const std::string& name, Header header);
    // A model from the headers of all its shards, parsed elsewhere (a manifest's copy of a source),
    // validated as open() validates a split set, except for anything about file names and files. No
    // shard has a file. Throws InputError.
    static ShardSet from_headers(std::vector<std::pair<std::string, Header>> headers);

    const std::vector<Shard>& shards() const { return shards_; }
    bool is_split() const { return split_; }
    // Metadata of the model: shard 1's header (other shards carry only split.*).
    const Header& metadata() const { return shards_.front().header; }
    const Kv* find_kv(std::string_view key) const { return metadata().find(key); }
    // general.architecture, or "" when absent.
    std::string architecture() const;
    // "<arch>.<suffix>" as an unsigned integer, if present and an integer.
    std::optional<uint64_t> arch_uint(std::string_view suffix) const;

    // Tensors in global order (shard 1's tensors, then shard 2's ...).
    const std::vector<TensorRef>& tensors() const { return order_; }
    const TensorInfo& info(const TensorRef& r) const { return shards_[r.shard].header.tensors[r.index]; }
    const TensorRef* find_tensor(std::string_view name) const;
    uint64_t total_bytes() const;  // sum of the shard file sizes

  private:
    void index();
    void check_split() const;
    std::vector<Shard> shards_;
    bool split_ = false;
    std::vector<TensorRef> order_;
    std::unordered_map<std::string, size_t> by_name_;
};

}  // namespace gguf_reap
