// estimate: what a model costs to store and run, before and after pruning (docs/estimate.md).
//
//   estimate_model(model, inputs) → EstimateResult    pure figures; the keeplist and plan files are read
//
// Every figure comes from tensor shapes, not from file contents, so "after" is computed without
// writing anything: each expert-indexed tensor gets ne[axis] = N kept experts, and with a width plan
// ffn_gate_exps/ffn_up_exps ne1 = K (2K for ffn_gate_up_exps), ffn_down_exps ne0 = K and the gate/up
// expert biases ne0 = K; nbytes is recomputed with ggml_row_size. Decode figures leave out the MTP
// (nextn) blocks, which llama.cpp loads but never runs to decode a token.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf_reap/moe_layout.h"
#include "gguf_reap/splice.h"
#include "gguf_reap/width.h"

namespace gguf_reap {

// Where llama.cpp puts the weights when one GPU runs the model with the host's RAM beside it
// (docs/estimate.md, "One GPU and RAM"): everything on the GPU (-ngl 99), or the routed experts in RAM,
// every block's (--cpu-moe, which is -ot exps=CPU) or the first N blocks' (--n-cpu-moe N).
struct Offload {
    bool all_experts = false;   // --cpu-moe / -ot exps=CPU
    uint64_t first_layers = 0;  // --n-cpu-moe N; 0 = none
    bool any() const { return all_experts || first_layers > 0; }
    bool offloads(int block) const {
        return all_experts || (block >= 0 && static_cast<uint64_t>(block) < first_layers);
    }
    std::string flag()
        const;  // "" | "--cpu-moe" | "--n-cpu-moe N": as llama.cpp spells it (services/llama_cpp)
};

// llama.cpp's KV cache types (-ctk, -ctv): ggml type ids. F16 is llama.cpp's default.
struct KvCacheTypes {
    int32_t k = 1, v = 1;  // GGML_TYPE_F16
    bool default_types() const { return k == 1 && v == 1; }
};
// "f16", "q8_0", ... → the ggml type id, for the types llama.cpp's -ctk/-ctv accept (f32, f16, bf16,
// q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1); nullopt otherwise.
std::optional<int32_t> parse_kv_cache_type(std::string_view name);
const char* kv_cache_type_name(int32_t type);  // "q8_0"
std::string kv_cache_type_choices();           // "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1"

// Where the model is meant to run: the settings that estimate's tables, `estimate --fit` and `--sweep`,
// and card's hardware table share (docs/estimate.md). Their defaults are said here and nowhere else: the
// CLI's options start from them and its help shows them.
struct Deployment {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kTp{"tp"}, kGpuMem{"gpu_mem"}, kOverhead{"overhead"}, kCtx{"ctx"};
    std::vector<uint64_t> tp{2, 4, 8};  // tensor-parallel degrees; N = 1 is always added first
    uint64_t gpu_mem = 0;               // bytes per GPU; 0 = no fit verdict
    uint64_t overhead = 0;              // bytes per GPU besides weights and KV cache (activations, buffers)
    uint64_t ctx = 0;                   // tokens of KV cache to budget per GPU (all sequences); 0 = none
    KvCacheTypes cache_types;           // -ctk / -ctv
    Offload offload;                    // --cpu-moe / --n-cpu-moe N: the one-GPU figures
};
// {2, 4, 8} → "2,4,8", as parse_tp_list reads it.
std::string tp_list_text(const std::vector<uint64_t>& tp);

struct EstimateRequest {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kDropMtp{"drop_mtp"};
    std::string model;             // any shard (ops::estimate opens it)
    std::string keeplist_path;     // "" = keep every expert
    std::string neuron_plan_path;  // "" = native expert width
    bool drop_mtp = false;         // the after figures of `splice --drop-mtp`
    Deployment deployment;
    std::string tool_version;  // for the keeplist-only exact file size (splice's provenance key)
};

// Weight bytes and elements of one version of the model (before or after).
struct ModelFigures {
    uint64_t expert_count = 0;     // routed experts per MoE block
    uint64_t expert_width = 0;     // expert FFN width (ffn_down_exps ne0); 0 without experts
    uint64_t tensor_bytes = 0;     // Σ nbytes, exact
    uint64_t file_bytes = 0;       // every shard's file size, headers and padding included
    bool file_bytes_exact = true;  // false: within `file_bytes_slack` bytes (see docs/estimate.md)
    uint64_t file_bytes_slack = 0;
    uint64_t parameters = 0;         // Σ elements
    uint64_t active_parameters = 0;  // elements read to decode one token (same rule as decode bytes)
    uint64_t decode_dense = 0;       // non-expert tensors (token_embd: one row unless tied)
    uint64_t decode_router = 0;      // routers, router biases, exp_probs_b: read whole
    uint64_t decode_experts = 0;     // expert_used_count slabs of every per-expert tensor per block
    uint64_t decode_total() const { return decode_dense + decode_router + decode_experts; }
    uint64_t replicated_bytes = 0;  // routers, norms and 1-D tensors: every TP rank holds them whole
    uint64_t nextn_bytes = 0;       // tensors of MTP blocks (loaded, not used in decode)
    uint64_t token_embd_bytes = 0;  // llama.cpp keeps the input embedding in host RAM
    bool tied = false;              // token_embd is also the output projection (a copy goes to the GPU)
    // The routed-expert tensors of each block (weights, biases, scales; not routers): what --cpu-moe and
    // --n-cpu-moe move to RAM.
    std::map<int, uint64_t> expert_bytes_by_block;
    // Weight bytes one rank holds at tensor parallel N: ceil((tensor_bytes − replicated)/N) + replicated.
    uint64_t residency(uint64_t n) const;
};

enum class KvKind { kNone, kMla, kStandard };
const char* kv_kind_name(KvKind k);

// Per-token KV cache in llama.cpp's cache types (F16 by default; -ctk/-ctv), over the decode blocks
// (nextn excluded).
struct KvFigures {
    KvCacheTypes types;
    KvKind kind = KvKind::kNone;
    uint64_t attention_layers = 0;  // decode blocks with a KV cache
    uint64_t stateful_layers = 0;   // decode blocks without one (head_count_kv 0, recurrent layers)
    uint64_t bytes_per_token = 0;   // one device
    // MLA: row(type_k, kv_lora_rank + rope dims) × layers; standard: Σ row(type_k, heads_kv × key length)
    // + row(type_v, heads_kv × value length), with ggml's row size (F16: 2 bytes an element).
    uint64_t kv_lora_rank = 0, rope_dims = 0;                 // MLA
    uint64_t heads_kv = 0, key_length = 0, value_length = 0;  // standard (first attention layer)
    // One TP rank: MLA's latent has no head axis, so every rank caches all of it; standard attention
    // splits by KV head, ceil(heads_kv / N) heads per rank (a rank keeps whole heads).
    uint64_t bytes_per_token_per_rank(uint64_t n) const;
    std::vector<uint64_t> heads_kv_per_layer;  // standard: per decode block (0 = no KV cache)
};

// One GPU and the host's RAM, as llama.cpp places the model (-ngl 99 with the Offload): the GPU holds
// every weight not in RAM, the KV cache and the overhead; RAM holds token_embd and the offloaded experts.
struct HostSplit {
    uint64_t gpu_weights = 0, gpu_kv = 0, gpu_overhead = 0;
    uint64_t ram_weights = 0;  // token_embd + ram_experts
    uint64_t ram_experts = 0;  // routed experts the Offload moves to RAM
    uint64_t gpu_total() const { return gpu_weights + gpu_kv + gpu_overhead; }
};
// Throws UsageError on a 64-bit overflow of ctx × the KV bytes per token.
HostSplit host_split(const ModelFigures& f, const KvFigures& kv, const Offload& offload, uint64_t ctx,
                     uint64_t overhead);

struct FitRow {
    uint64_t tp = 1;
    uint64_t weights = 0;   // residency per rank
    uint64_t kv_cache = 0;  // ctx × per-rank bytes per token
    uint64_t overhead = 0;
    uint64_t need() const { return weights + kv_cache + overhead; }
    bool fits(uint64_t gpu_mem) const { return need() <= gpu_mem; }
    int64_t headroom(uint64_t gpu_mem) const;  // gpu_mem − need(), negative when it does not fit
};

struct EstimateResult {
    std::string model_path;
    std::string arch;
    uint64_t moe_blocks = 0;
    uint64_t nextn_blocks = 0;
    uint64_t expert_used_count = 0;
    bool tied_embeddings = false;
    ModelFigures before;
    std::optional<ModelFigures> after;  // with --keeplist and/or --neuron-plan
    // The keeplist was ranked on another model of the same layout: "ranked on A, applied to B (...)".
    std::string keeplist_note;
    // The width plan cuts a quantized ffn_down_exps in other than whole quant blocks, which splice
    // refuses (requantisation needed): the after figures assume the same types, as after
    // width-splicing a BF16/F16 copy and llama-quantize.
    bool after_requantised = false;
    KvFigures kv;              // pruning experts or widths leaves attention unchanged
    std::vector<uint64_t> tp;  // 1, then the requested degrees (deduplicated, ascending)
    std::vector<FitRow> fits_before, fits_after;
    Deployment deployment;                 // as requested
    HostSplit split_before;                // one GPU and RAM, the first case
    std::optional<HostSplit> split_after;  // with after
};

// What the after figures need besides the keeplist: the width plan, read and checked once as
// `splice --neuron-plan` checks it, and the options of the splice described.
struct AfterPlan {
    int64_t k = 0;      // width K; 0 = native width
    bool exact = true;  // splice can make the width cut (whole quant blocks of every cut row)
    std::optional<WidthRules> rules;
    std::optional<WidthCut> cut;  // with a plan that splice can cut
    bool drop_mtp = false;
    std::string tool_version;
    bool requantised() const { return k > 0 && !exact; }
};
// weights per rank at tensor parallel `tp` + ctx tokens of KV cache + overhead. Throws UsageError on
// a 64-bit overflow.
FitRow fit_row(const ModelFigures& f, const KvFigures& kv, uint64_t tp, uint64_t ctx, uint64_t overhead);

namespace ops {
// One `gguf-reap estimate`: opens inputs.model, then estimate_model.
EstimateResult estimate(const EstimateRequest& inputs);
}  // namespace ops

// "2,4,8" → {2, 4, 8}. Throws UsageError naming the bad item: "--tp: '0' is not a positive integer ...".
std::vector<uint64_t> parse_tp_list(std::string_view text);

}  // namespace gguf_reap
