// Internals of the audit, shared by src/ops/audit*.cpp. Not a public interface.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "gguf_reap/audit.h"
#include "gguf_reap/width.h"
#include "io/input_file.h"
#include "io/preflight.h"
#include "io/sha256.h"
#include "model/moe_layout.h"
#include "model/provenance.h"
#include "model/shard_set.h"

namespace gguf_reap::audit_detail {

// ---- the output set (audit_shards.cpp) ------------------------------------------------------------

struct OutShard {
    std::string path;
    int number = 1;                   // 1-based position in the set
    std::shared_ptr<InputFile> file;  // null when the file is missing
    std::optional<Header> header;     // null when missing or unreadable
};

struct OutputSet {
    int count = 1;                 // shards the file names promise (1 for an unsplit file)
    std::vector<OutShard> shards;  // positions 1..count
    bool multi() const { return count > 1; }
    bool complete() const;  // every shard present with a readable header
    // The shard that carries the model's metadata: the one whose header says split.no = 0 (so that two
    // swapped shards are named once, by the structure check, and not again key by key), else shard 1.
    size_t meta_index() const;
    const OutShard& meta() const { return shards[meta_index()]; }
};

// Finds the set OUTPUT belongs to by its file name, drops each file's pages from the page cache and
// parses every header (data not required: truncation is a finding, not an error). Missing, extra and
// unreadable shards become findings. Throws only when OUTPUT itself cannot be opened (IoError) or is not
// a GGUF file at all (InputError on its magic).
OutputSet open_output_set(const std::string& path, bool drop_cache, std::vector<Finding>& findings);

// split.no sequence, split.count, split.tensors.count, duplicate names, tensors inside their files,
// file sizes.
void check_structure(const OutputSet& out, std::vector<Finding>& findings);

// The loader's rules for models with experts (audit_load_rules.cpp): expert_count ≤ LLAMA_MAX_EXPERTS,
// 0 < expert_used_count ≤ expert_count, groups that divide it, every expert-indexed tensor's expert
// axis equal to expert_count and its width axis to the width key, the shared experts' width where the
// loader derives it.
void check_load_rules(const OutputSet& out, std::vector<Finding>& findings);

// Absolute offset of a KV's value (after key and type tag) in its file.
uint64_t kv_value_offset(const Kv& kv);

// ---- expectations from the source (audit_source.cpp) ----------------------------------------------

// A width cut (--neuron-plan): every kept expert keeps the plan's K channels of its n_ff, in ascending
// channel order (docs/audit.md, "Width-spliced outputs").
struct WidthAudit {
    NeuronPlan plan;           // rows ascending, for the source's (block, expert) pairs
    int64_t native_width = 0;  // n_ff of the source
    std::string sha256;        // of the plan file
    std::vector<WidthKv> kvs;  // what the cut sets: the width key = K and the shared-width keys
    // A quantized row loses whole blocks: for each block size B > 1 of a tensor cut inside its rows,
    // the plan in units of B-blocks (k = K / B, row ids c / B of the aligned groups it keeps).
    std::map<int64_t, NeuronPlan> block_plans;
};

// Reads and checks the plan against the source; names a plan sha the output records differently. An
// output that records a plan without --neuron-plan is refused (UsageError). nullptr without a plan.
std::shared_ptr<const WidthAudit> derive_width(const ShardSet& src, const MoeLayout& layout,
                                               const OutputSet& out,
                                               const std::optional<std::string>& plan_path,
                                               AuditReport& report);

// Kept source expert ids per MoE block (output expert k = source expert kept[k]).
struct KeptExperts {
    bool valid = false;  // false: expert tensors cannot be verified (findings or notes say why)
    uint64_t n = 0;      // experts per block in the output
    std::map<int, std::vector<int64_t>> blocks;
    std::vector<int> moe_blocks;  // the source's MoE blocks (known even when the kept ids are not)
    std::string from;             // "keeplist", "provenance", "unchanged"
    bool provenance = false;      // the output carries gguf_reap.* keys
    std::shared_ptr<const WidthAudit> width;  // --neuron-plan
    // --drop-mtp: nextn blocks the output leaves out (from gguf_reap.dropped_nextn_blocks, or, without
    // provenance, from a block_count that is the source's minus its nextn_predict_layers).
    uint64_t dropped_nextn = 0;
};

// `source` and `source_name` (the path the user gave, --source or --source-manifest) say, in a note,
// when the keeplist was ranked on another model of the same layout (keeplist_applies_to).
KeptExperts derive_kept(const ShardSet& source, const std::string& source_name, const MoeLayout& layout,
                        const OutputSet& out, const std::optional<std::string>& keeplist_path,
                        AuditReport& report);

inline Finding make_finding(FindingKind kind, const std::string& file, std::string subject,
                            std::optional<uint64_t> offset, std::string message) {
    Finding f;
    f.kind = kind;
    f.file = file;
    f.subject = std::move(subject);
    f.offset = offset;
    f.message = std::move(message);
    return f;
}

// Key/value pairs of every shard against the source plus the documented changes (audit_metadata.cpp).
void check_metadata(const ShardSet& src, const KeptExperts& kept, const OutputSet& out, AuditReport& report);

// How one kept expert's bytes of a width-cut tensor are gathered from its source slab: whole rows
// (ffn_gate/up_exps; ffn_gate_up_exps: gate rows then up rows) or elements of every row
// (ffn_down_exps, gpt-oss gate/up biases; a fused gate_up bias: gate elements then up elements).
// A quantized row's elements are its blocks: n_ff, k and the channel ids then count blocks of
// `values` channels (WidthAudit::block_plans).
struct WidthGather {
    bool elements = false;
    int64_t factor = 1;  // fused gate_up: 2 halves of n_ff channels, kept c, then n_ff + c
    uint64_t unit = 0;   // bytes of one row (rows) or of one element (elements)
    int64_t rows = 1;    // elements: rows per expert slab
    int64_t n_ff = 0, k = 0;
    int64_t values = 1;      // channels per element: the quant block size
    size_t block_index = 0;  // into plan.blocks
    std::shared_ptr<const WidthAudit> width;
    const NeuronPlan* plan = nullptr;  // width->plan, or width->block_plans[values]
    const int32_t* channels(int64_t source_expert) const { return plan->row(block_index, source_expert); }
};

// One run of source bytes an output tensor must reproduce, in output order.
struct SourceRun {
    size_t src_shard = 0;
    uint64_t src_offset = 0;  // absolute in the source shard file
    uint64_t length = 0;
    int64_t expert = -1;         // output expert k (expert tensors only)
    int64_t source_expert = -1;  // kept[k]
    const char* region = "tensor data";
    const WidthGather* gather =
        nullptr;  // width cut: `length` output bytes gathered from the slab at src_offset
    // --source-manifest: the sha256 the manifest records for exactly these source bytes (a tensor or
    // one expert's slab). The byte pass then hashes the output bytes instead of reading the source.
    const Sha256::Digest* sha256 = nullptr;
};

struct TensorExpect {
    std::vector<SourceRun> runs;  // empty: nothing to compare (no source, or the info already differs)
    std::shared_ptr<const WidthGather> gather;  // what runs[i].gather points at
};

// [shard][tensor index in that shard's header]
using Expectations = std::vector<std::vector<TensorExpect>>;

// Tensor infos against the source (names, order, types, shapes); returns what each output tensor's
// bytes must equal.
Expectations check_tensor_infos(const ShardSet& src, const MoeLayout& layout, const KeptExperts& kept,
                                const OutputSet& out, AuditReport& report);

// ---- the byte pass (audit_bytes.cpp) --------------------------------------------------------------

struct BytePassOptions {
    bool read_all = false;  // every byte (compare and/or hash); else only padding is read
    bool hash = false;      // sha256 of each file and each tensor payload (and slab, below)
    // With hash: [shard][tensor] bytes per expert slab of an expert-indexed tensor (0: not one); each
    // slab is hashed too, for a manifest that can later verify pruned outputs (--source-manifest).
    const std::vector<std::vector<uint64_t>>* slab_bytes = nullptr;
    int threads = 0;
    size_t buffer_bytes = 8u << 20;
    const Events* events = nullptr;  // progress: output bytes passed, all shards together
};

struct ShardBytes {
    std::vector<Finding> findings;
    AuditSummary counts;                                // only the byte counters are filled
    std::string sha256;                                 // when hash
    std::vector<std::string> tensor_sha256;             // when hash and the header is readable
    std::vector<std::vector<std::string>> slab_sha256;  // when hash: [tensor][expert] per slab_bytes
    std::vector<uint8_t> header;                        // when hash: bytes [0, infos_end) as read
};

// Verifies every present shard; `expect` may be empty (no source). `source_paths` are the source
// shard files (opened again for reading). Shards run in parallel.
std::vector<ShardBytes> verify_bytes(const OutputSet& out, const Expectations& expect,
                                     const std::vector<std::string>& source_paths,
                                     const BytePassOptions& opts);

// ---- manifests (audit_manifest.cpp) ---------------------------------------------------------------

Manifest build_manifest(const OutputSet& out, const std::vector<ShardBytes>& bytes);

// The bytes of one expert's slab for every expert-indexed tensor of the output itself ([shard][tensor],
// 0 for other tensors), from its own layout, so that a manifest of it records slab hashes. Empty, with a
// note, when the set is incomplete or its layout cannot be built (the findings say why).
std::vector<std::vector<uint64_t>> output_slab_bytes(const OutputSet& out, AuditReport& report);

// Points every run of `expect` at the sha256 the manifest records for exactly its source bytes: the
// tensor's for an untouched tensor, slab kept[k]'s for an expert's. The runs point into the returned
// copies (only the hashes the output needs, often half the slabs), which must outlive the byte pass; the
// manifest need not. Throws InputError when the manifest has no such hash (no slab hashes for an
// expert-indexed tensor).
std::vector<Sha256::Digest> attach_source_hashes(Expectations& expect, const ShardSet& src, const Manifest& m,
                                                 const std::string& path);
void check_manifest(const Manifest& m, const OutputSet& out, const std::vector<ShardBytes>& bytes,
                    std::vector<Finding>& findings);

// ---- helpers ----------------------------------------------------------------------------------------

std::string shape_string(const TensorInfo& t);

}  // namespace gguf_reap::audit_detail
