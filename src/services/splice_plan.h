// The splice plan (include/gguf_reap/splice.h has the request and the result): every output file's exact
// bytes as a copy job, computed from headers alone, and the planner's functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/imatrix.h"
#include "gguf_reap/splice.h"
#include "io/copy_job.h"
#include "io/input_file.h"
#include "model/shard_set.h"

namespace gguf_reap {

// A tensor as it will be written: its bytes are [data_offset, data_offset + info.nbytes) of the file,
// followed by zero padding to the alignment.
struct PlannedTensor {
    size_t source_tensor = 0;  // index into ShardSet::tensors() (imatrix: into its file's entries)
    TensorInfo info;           // name, n_dims, ne, type as written; offset relative to the data section
    uint64_t data_offset = 0;  // absolute offset of the data in the output file
    int expert_axis = -1;      // the sliced axis, -1 for a tensor copied whole
    uint64_t slabs = 0;        // expert slabs copied (sliced tensors)
    size_t extents = 0;        // source ranges after merging adjacent kept slabs
};

// One output file: its exact bytes as a copy job, and what they mean.
struct PlannedFile {
    CopyJob job;  // job.path is the final name, job.size the exact file size
    uint32_t version = 3;
    uint32_t alignment = 0;  // 0 for a legacy .dat imatrix
    uint64_t header_bytes = 0;
    size_t kv_count = 0;  // the KVs themselves are in the header bytes (job.literals[0])
    std::vector<PlannedTensor> tensors;
    size_t sliced_tensors = 0;
    uint64_t slabs = 0;
    uint64_t bytes_read() const;  // bytes taken from sources
};

struct SplicePlan {
    // Sources the jobs' segments refer to: the model's shards in order, then the imatrix if any.
    // Borrowed: the ShardSet and ImatrixFile the plan was made from must outlive it.
    std::vector<const InputFile*> sources;
    std::vector<PlannedFile> shards;
    std::optional<PlannedFile> imatrix;
    std::string source_path;
    uint64_t source_expert_count = 0;
    uint64_t kept_expert_count = 0;
    size_t moe_blocks = 0;
    size_t tensor_count = 0;
    int64_t native_width = 0;  // width cut only: n_ff of the source ...
    int64_t width = 0;         // ... and K (0: no width cut)
    // deepseek4's hash-routed blocks: per block, the (token, slot) entries of its table and how many
    // named a pruned expert and now name a kept one (services/hash_routing.h).
    struct HashTableRewrite {
        int block = 0;
        uint64_t entries = 0;
        uint64_t redirected = 0;
    };
    std::vector<HashTableRewrite> hash_rewrites;
    uint64_t dropped_blocks = 0;  // --drop-mtp: nextn blocks left out

    size_t sliced_tensors() const;
    uint64_t slabs() const;
    size_t extents() const;          // source extents of the model shards after merging
    uint64_t bytes_read() const;     // from sources, all files
    uint64_t bytes_written() const;  // sum of exact file sizes
    std::vector<const CopyJob*> jobs() const;
};

// The whole output, computed without touching a disk. Preconditions: `keeplist` passed
// validate_keeplist against `layout`; `imatrix` (optional) is the source imatrix. Throws UsageError
// when the split options cannot be met (more shards than tensors, more than 65535 shards) and
// InputError when the imatrix does not fit the model.
SplicePlan plan_splice(const ShardSet& model, const MoeLayout& layout, const KeepList& keeplist,
                       const SpliceOptions& options, const ImatrixFile* imatrix = nullptr);

// The pruned imatrix, GGUF or legacy .dat as the input: every "_exps" entry keeps the rows (GGUF
// in_sum2 and counts) or values (.dat) of the kept experts in ascending order; everything else is
// copied unchanged. With a width cut, ffn_down_exps entries also keep only the kept channels' values
// of each kept expert (ne0 n_ff → K). `source_index` is the imatrix's index in SplicePlan::sources.
PlannedFile plan_imatrix_prune(const ImatrixFile& imatrix, uint32_t source_index, const ShardSet& model,
                               const MoeLayout& layout, const KeepList& keeplist, const std::string& out_path,
                               const WidthCut* width = nullptr);

// Reads the neuron plan at `plan_path` for `model` and checks, before anything is written, that the
// cut can be made byte-exact: the plan names every (MoE block, expert) pair of the model with channel
// ids below its expert width, K is a legal width (check_width: the legal list is in the message), and
// every tensor whose rows are cut element-wise (ffn_down_exps, gpt-oss gate/up biases) keeps whole
// blocks of its type: any plan for F32, F16 or BF16; for a quantized type only a plan whose every row
// is whole aligned groups of the block size B (`plan-width --granularity block`); another is refused
// (it would need requantisation). Throws InputError / UsageError.
WidthCut load_width_cut(const ShardSet& model, const MoeLayout& layout, const std::string& plan_path,
                        std::string plan_sha256);

}  // namespace gguf_reap
