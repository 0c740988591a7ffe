// splice: write the pruned model. Plan first, then move bytes. ops::splice (below) runs the steps:
//
//   plan_splice(model, layout, keeplist, options)   → SplicePlan   pure: headers, extents, exact sizes
//   check_outputs(outputs, inputs, force)           → OutputCheck  aliasing, existing outputs, free space
//                                                                  (io/preflight.h)
//   run_copy_jobs(plan.jobs(), plan.sources, opts)  → CopyReport   the copy engine, atomic per file set
//                                                                  (io/copy_engine.h)
//
// Every expert-indexed tensor of every MoE block (router rows and biases, exp_probs_b, stacked and
// fused expert weights, their biases and scales) keeps the slabs of the kept experts in ascending
// source order; expert e of a tensor is bytes [e*slab, (e+1)*slab) of its data (moe_layout.h), so a
// sliced tensor is a list of source extents and adjacent kept slabs merge into one. Every other tensor
// is one extent. Tensor order is the source order; output shards are cut from that order.
//
// With a neuron plan (WidthCut) every kept expert also keeps only K of its n_ff FFN channels: rows of
// ffn_gate/up_exps (row extents), elements of every ffn_down_exps row (gather segments), elements of
// gpt-oss gate/up biases; the exact contract is in docs/splice.md, "Width pruning (--neuron-plan)".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/imatrix.h"
#include "gguf_reap/events.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/width.h"
#include "io/copy_engine.h"
#include "model/moe_layout.h"
#include "model/provenance.h"
#include "model/shard_set.h"

namespace gguf_reap {

// A width cut (--neuron-plan): every routed expert keeps K of its n_ff FFN channels.
struct WidthCut {
    NeuronPlan plan;
    WidthRules rules;
    std::string plan_sha256;  // hex sha256 of the plan file's bytes (provenance)
    // Kept channels of plan row (block index, expert), ascending: the gather index of ffn_down_exps.
    std::vector<std::shared_ptr<const std::vector<uint32_t>>> rows;
    const std::vector<uint32_t>& row(size_t block_index, int64_t expert) const {
        return *rows[block_index * static_cast<size_t>(plan.expert_count) + static_cast<size_t>(expert)];
    }
    // For each quant block size B > 1 of a tensor whose rows lose channels: row r's kept channels as
    // the ids of the whole B-blocks they make up (channel c·B .. c·B + B − 1 ↦ c), ascending: the
    // gather index of a quantized ffn_down_exps, whose elements are whole blocks.
    std::map<int64_t, std::vector<std::shared_ptr<const std::vector<uint32_t>>>> block_rows;
};

// Reads the neuron plan at `plan_path` for `model` and checks, before anything is written, that the
// cut can be made byte-exact: the plan names every (MoE block, expert) pair of the model with channel
// ids below its expert width, K is a legal width (check_width: the legal list is in the message), and
// every tensor whose rows are cut element-wise (ffn_down_exps, gpt-oss gate/up biases) keeps whole
// blocks of its type: any plan for F32, F16 or BF16; for a quantized type only a plan whose every row
// is whole aligned groups of the block size B (`plan-width --granularity block`); another is refused
// (it would need requantisation). Throws InputError / UsageError.
WidthCut load_width_cut(const ShardSet& model, const MoeLayout& layout, const std::string& plan_path,
                        std::string plan_sha256);

// A keeplist that keeps every expert of every MoE block (a width cut without --keeplist).
KeepList keep_all_experts(const MoeLayout& layout);

enum class SplitMode {
    kAsSource,    // as many shards as the source, balanced by bytes
    kCount,       // --split-count N, balanced by bytes
    kMaxSize,     // --split-max-size BYTES: each file at most BYTES unless one tensor alone is larger
    kMaxTensors,  // --split-max-tensors N
};

struct SpliceOptions {
    std::string out_prefix;  // OUT_PREFIX: shards are OUT_PREFIX-00001-of-0000N.gguf
    SplitMode split_mode = SplitMode::kAsSource;
    uint64_t split_value = 0;
    bool provenance = true;
    std::string keeplist_sha256;      // hex sha256 of the keeplist file's bytes (provenance)
    std::string tool_version;         // "gguf-reap 0.1.0" (provenance)
    std::string imatrix_out;          // with a source imatrix: where its pruned copy goes
    const WidthCut* width = nullptr;  // --neuron-plan: also cut every expert to K channels
    // --drop-mtp: leave out the nextn (MTP) blocks' tensors, block_count and nextn_predict_layers
    // shrink, and every per-layer array key of block_count elements loses the nextn elements.
    bool drop_mtp = false;
};

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
    // named a pruned expert and now name a kept one (ops/hash_routing.h).
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

// Output file names for n shards: OUT_PREFIX-00001-of-0000n.gguf; for n == 1 the single file
// OUT_PREFIX.gguf (OUT_PREFIX itself when it already ends in .gguf). A trailing ".gguf" on the prefix
// is dropped before numbering.
std::vector<std::string> splice_output_paths(const std::string& out_prefix, size_t n);

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

namespace ops {

// One `gguf-reap splice`, as the CLI and the tests run it.
struct SpliceRequest {
    std::string model;        // any shard of the source
    std::string keeplist;     // "" with a neuron plan only: every expert is kept
    std::string neuron_plan;  // "" = no width cut
    std::string imatrix_in;   // with imatrix_out: also prune this imatrix
    SpliceOptions options;  // output prefix, split, provenance, imatrix_out (keeplist/plan hashes: set here)
    bool dry_run = false;   // plan and preflight only
    bool force = false;     // replace existing outputs (never an input)
    bool durable = true;    // fsync before and after the rename (--no-fsync: false)
    CopyMethod method = CopyMethod::kAuto;
    unsigned threads = 0;  // 0: one per output file, at most 4 and the cores
    // From a URL: continue an interrupted run into the same prefix (docs/splice.md "Resume"); false
    // (--no-resume) starts over.
    bool resume = true;
};

// Everything a splice decided and did. It owns what the plan borrows.
struct SpliceResult {
    explicit SpliceResult(ShardSet m) : model(std::move(m)) {}
    ShardSet model;
    MoeLayout layout;
    KeepList keeplist;
    // "ranked on A-f16.gguf, applied to A-Q8_0.gguf (...)" when the keeplist was ranked on another model
    // of the same layout (keeplist_applies_to); "" when it was ranked on this one.
    std::string keeplist_note;
    std::optional<WidthCut> width;
    std::optional<ImatrixFile> imatrix;
    SplicePlan plan;
    std::vector<std::string> replaced;             // existing outputs that were (or would be) replaced
    std::vector<std::string> stale_siblings;       // shards of another set under the prefix, removed
    std::vector<std::string> removed_temporaries;  // left by an interrupted run, removed
    unsigned threads = 0;
    std::optional<CopyReport> copy;  // absent for a dry run
    // A source read over HTTP (docs/remote.md): body bytes received and requests sent by this splice,
    // headers included. Absent for a local source.
    struct Fetched {
        uint64_t bytes = 0;
        uint64_t requests = 0;
        uint64_t retries = 0;
        // hf:// only: "ORG/REPO@COMMIT", the revision pinned when the source was read (the output's bytes
        // do not record it: they are a local splice's).
        std::string revision;
    };
    std::optional<Fetched> fetched;
    uint64_t resumed_bytes = 0;  // output bytes an interrupted run had written, not written again
};

// open → validate → plan → lock → preflight → (dry run stops here) → copy → read back. Throws
// UsageError / InputError / IoError / Interrupted; an output set is complete under its final names or
// not there at all.
std::unique_ptr<SpliceResult> splice(const SpliceRequest& request, const Events& events = {});

}  // namespace ops

}  // namespace gguf_reap
