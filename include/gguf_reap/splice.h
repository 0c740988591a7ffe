// splice: write the pruned model. Plan first, then move bytes. ops::splice (below) runs the steps
// (src/services/splice_plan.h):
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

#include "gguf_reap/copy_report.h"
#include "gguf_reap/events.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/moe_layout.h"
#include "gguf_reap/opened.h"
#include "gguf_reap/width.h"

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

// A keeplist that keeps every expert of every MoE block (a width cut without --keeplist).
KeepList keep_all_experts(const MoeLayout& layout);

enum class SplitMode {
    kAsSource,    // as many shards as the source, balanced by bytes
    kCount,       // --split-count N, balanced by bytes
    kMaxSize,     // --split-max-size BYTES: each file at most BYTES unless one tensor alone is larger
    kMaxTensors,  // --split-max-tensors N
};

struct SpliceOptions {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kOut{"out"}, kSplitCount{"split_count"}, kSplitMaxSize{"split_max_size"},
        kSplitMaxTensors{"split_max_tensors"}, kNoProvenance{"no_provenance"}, kImatrixOut{"imatrix_out"},
        kDropMtp{"drop_mtp"};
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

// Output file names for n shards: OUT_PREFIX-00001-of-0000n.gguf; for n == 1 the single file
// OUT_PREFIX.gguf (OUT_PREFIX itself when it already ends in .gguf). A trailing ".gguf" on the prefix
// is dropped before numbering.
std::vector<std::string> splice_output_paths(const std::string& out_prefix, size_t n);

namespace ops {

// One `gguf-reap splice`, as the CLI and the tests run it.
struct SpliceRequest {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kKeeplist{"keeplist"}, kNeuronPlan{"neuron_plan"}, kImatrixIn{"imatrix_in"},
        kDryRun{"dry_run"}, kForce{"force"}, kNoResume{"no_resume"};
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

// Everything a splice decided and did.
struct SpliceResult {
    // The source and the --imatrix-in file as opened, and the plan: every output file's exact bytes,
    // what was (or would be) written (opened.h).
    std::shared_ptr<const Opened> opened;
    MoeLayout layout;
    KeepList keeplist;
    // "ranked on A-f16.gguf, applied to A-Q8_0.gguf (...)" when the keeplist was ranked on another model
    // of the same layout (keeplist_applies_to); "" when it was ranked on this one.
    std::string keeplist_note;
    std::optional<WidthCut> width;
    std::vector<std::string> outputs;  // the plan's files, final names: the shards in order, then the imatrix
    uint64_t bytes_written = 0;        // their sizes summed (a dry run: what would be written)
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
        // Each source shard as it was pinned: its path (hf:// at the pinned commit), its size, and the
        // sha256 the Hub's listing gives it (lfs.oid) when the model was named as hf://ORG/REPO:QUANT,
        // else "". The source's identity for a release record; gguf-reap reads only ranges and does not
        // check that sha256 itself.
        struct SourceShard {
            std::string path;
            uint64_t bytes = 0;
            std::string sha256;
        };
        std::vector<SourceShard> shards;
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
