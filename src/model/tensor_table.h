// The one owner of tensor facts: what every expert-indexed tensor is, along which axis it holds its
// experts and its FFN channels, and what each architecture's loader reads about experts. Every command
// (splice, width pruning, estimate, imatrix pruning, rank, audit) and the fixture generator ask this
// table; nothing else in the tool parses tensor names (docs/architectures.md).
//
// Names follow llama.cpp's LLM_TENSOR_NAMES (src/llama-arch.cpp): block tensors are
// "blk.<N>.<base>.<suffix>", e.g. "blk.3.ffn_down_exps.weight". Shapes are ggml ne order (innermost
// first). In a contiguous tensor whose expert axis is the outermost non-trivial dimension (ne[a] = E and
// ne[j] = 1 for j > a), expert e occupies bytes [e*slab, (e+1)*slab) of its data whatever the
// quantisation, slab = nbytes / E: that is what makes expert removal a byte-range gather.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "gguf_reap/moe_layout.h"  // Projection, ExpertRole, ExpertTensorKind: the table's rows

namespace gguf_reap {

// The names of a role, from one table (tensor_table.cpp): "weight", "bias", "scale", "router", ...;
// and the region an audit finding about its data names: "kept slab", "expert bias", "router row", ...
const char* expert_role_name(ExpertRole r);
const char* expert_role_region(ExpertRole r);
const char* projection_name(Projection p);  // "gate", "up", "down", "gate_up", ""

// Every expert-indexed tensor kind gguf-reap knows, in the table's order.
std::span<const ExpertTensorKind> expert_tensor_kinds();
// The label inspect prints for a kind: "gate_exps", "up_exps", "down_exps", "gate_up_exps" (weights),
// "exps_bias", "exps_scale", "router", "router_bias", "exp_probs_b".
const char* expert_kind_label(const ExpertTensorKind& kind);
// The first kind with this role and projection (scales: ".scale", not ".input_scale"); the generator
// names its expert tensors with it. Throws std::logic_error when the table has none.
const ExpertTensorKind& expert_kind(ExpertRole role, Projection projection = Projection::kNone);

// ---- names -------------------------------------------------------------------------------------

// "blk.N.<rest>" → N and rest; nullopt for tensors outside the blocks.
std::optional<std::pair<int, std::string_view>> split_block_name(std::string_view name);
// "blk.N.<base>.<suffix>".
std::string block_tensor_name(int block, std::string_view base, std::string_view suffix = "weight");
std::string block_tensor_name(int block, const ExpertTensorKind& kind);

// How a tensor inside a block classifies.
struct BlockTensorClass {
    const ExpertTensorKind* expert = nullptr;  // an expert-indexed tensor
    // Set when the name suggests an expert axis ("_exps", a router) but matches no kind of the
    // architecture: such a tensor is refused rather than copied unsliced.
    bool unknown_expert_like = false;
};
// `rest` is the part after "blk.N." ("ffn_up_exps.weight"); `arch` is general.architecture, whose
// look-alikes (tensors named like expert tensors that are not, e.g. arctic's ffn_norm_exps) classify
// as ordinary tensors.
BlockTensorClass classify_block_tensor(std::string_view arch, std::string_view rest);

// The expert kind of a full tensor name ("blk.1.ffn_down_exps.weight"), nullptr for any other tensor.
const ExpertTensorKind* expert_kind_of(std::string_view arch, std::string_view tensor_name);

// The routed-expert down projection: its imatrix entry holds each expert's intermediate-activation
// energy per channel and its routed-token counts, the entry every rank criterion reads.
const ExpertTensorKind& down_projection_kind();
// N of an imatrix entry (or tensor) named "blk.N.ffn_down_exps.weight"; nullopt for any other name.
std::optional<int> down_projection_block(std::string_view name);
// Whether an imatrix entry name belongs to a routed-expert weight ("_exps" stacks): those entries hold
// one row per expert and lose the rows of pruned experts.
bool is_expert_entry_name(std::string_view weight_name);

// deepseek4's token-id → expert-id routing table ("blk.N.ffn_gate_tid2eid.weight"): its *values* are
// expert ids.
bool is_hash_routing_table(std::string_view tensor_name);
// grovemoe's chunk experts ("blk.N.ffn_{gate,up,down}_chexps.weight"), one per group of routed experts.
bool is_chunk_expert_tensor(std::string_view tensor_name);

// Non-expert tensors whose names carry meaning for the tools.
std::string shared_expert_down_name(int block);  // "blk.N.ffn_down_shexp.weight": W = ne[0]
// The axis of a shared-expert weight that holds its FFN width (`rest` after "blk.N."): 0 for
// ffn_down_shexp.weight, 1 for ffn_gate_shexp / ffn_up_shexp.weight; nullopt for any other tensor.
std::optional<int> shared_expert_width_axis(std::string_view rest);
inline constexpr std::string_view kTokenEmbeddingName = "token_embd.weight";
inline constexpr std::string_view kOutputProjectionName = "output.weight";  // absent: tied embeddings
bool is_token_embedding(std::string_view tensor_name);
bool is_norm(std::string_view tensor_name);  // a normalisation weight ("…_norm…")
// What inspect groups tensors by: "blk.3.ffn_down_exps.weight" → "ffn_down_exps",
// "output_norm.weight" → "output_norm", "blk.1.exp_probs_b.bias" → "exp_probs_b.bias".
std::string tensor_class(std::string_view name);

// ---- architectures -----------------------------------------------------------------------------

// What gguf-reap can do with an architecture's experts (docs/architectures.md).
enum class ArchStatus : uint8_t {
    kPrunable,       // the loader creates routed experts: they can be pruned and the result loads
    kNoExperts,      // the loader names expert tensors but can never load a file that has them
    kExpertsUnused,  // the loader loads experts but the graph never runs them (refact)
    kDraftOnly,      // a draft model that runs only beside its target (dflash)
};
const char* arch_status_name(ArchStatus s);  // "prunable", "no experts", ...

// Where llama.cpp's loader takes the routed-expert FFN width from.
enum class ExpertWidthKey : uint8_t {
    kUnknown,        // not known to gguf-reap, or the architecture has no experts: width cuts are refused
    kExpertKey,      // <arch>.expert_feed_forward_length
    kExpertKeyOrFf,  // that key, else feed_forward_length / expert_used_count (qwen*moe): a cut writes it
    kExpertKeyOrWholeFf,  // that key, else feed_forward_length itself (grok): a cut writes it
    kExpertKeyZeroIsFf,   // that key, required, but 0 means feed_forward_length / expert_used_count
                          // (glm4moe, grovemoe, hy_v3, mellum): a cut writes it
    kFfKey,               // <arch>.feed_forward_length, read for the experts only (llama for Mixtral, olmoe,
                          // granite*, minimax-01/m2, ...): a cut rewrites it
    kDenseKey,            // <arch>.feed_forward_length, shared with dense FFN blocks: cannot change alone
};

// How the loader sizes the shared experts.
enum class SharedWidthRule : uint8_t {
    kFromTensors,                // unrelated to the routed experts' width (or no shared experts)
    kOwnKey,                     // <arch>.expert_shared_feed_forward_length, no fallback
    kWidthTimesCount,            // expert_feed_forward_length × expert_shared_count (SharedCount)
    kEqualsWidth,                // expert_feed_forward_length itself, no count to absorb a change (llama4)
    kOwnKeyElseWidthTimesCount,  // the own key, else width × count (bailingmoe3, cohere2moe, laguna)
    kOwnKeyOrWidthTimesCount,    // (the own key, else the routed width) × count (bailingmoe2)
    kOwnKeyElseWidth,            // the own key, else the routed width (exaone-moe, hy_v3)
    kOwnKeyElseFf,               // the own key, else feed_forward_length (qwen2moe, qwen3next, hunyuan-moe)
};

// How the loader reads expert_shared_count where its shared-width rule multiplies by it.
enum class SharedCount : uint8_t {
    kAsRead,       // the key's value, 0 when absent
    kAtLeastOne,   // max(expert_shared_count, 1) (kimi-*, bailingmoe3)
    kDefaultOne,   // 1 when the key is absent (laguna)
    kGatesShared,  // no shared experts unless expert_shared_count > 0, whatever the own key says (cohere2moe)
};

// A key an architecture's loader requires beyond its width key (get_key without `false`); `positive`:
// and requires > 0 (a GGML_ASSERT). The suffix after "<arch>.", e.g. kExpertSharedCountKey.
struct RequiredKey {
    std::string_view suffix;
    bool positive = false;
};

// Which blocks the loader builds with routed experts; the others get a dense FFN (src/models/<arch>.cpp).
enum class MoeBlocks : uint8_t {
    kFromTensors,   // every block, or decided by the tensors themselves (a router present) or by a hybrid
                    // layer pattern: no key decides it
    kLeadingDense,  // block i is MoE when i >= leading_dense_block_count
    kEveryN,        // when moe_every_n_layers > 0 and i % moe_every_n_layers == 1 (nomic-bert-moe)
    kInterleave,    // when interleave_moe_layer_step > 0 and (i + 1) % step == 0 (llama4)
};

// Facts of an architecture beyond its widths.
struct ArchFlag {
    static constexpr uint8_t kNextn = 1;  // nextn_predict_layers MTP blocks after the trunk
    // (No flag for expert_group_count: llama-model.cpp reads it for every architecture.)
    static constexpr uint8_t kHashRouting = 4;   // ffn_gate_tid2eid token → expert tables (deepseek4)
    static constexpr uint8_t kChunkExperts = 8;  // grovemoe's ffn_*_chexps, one per group of experts
    // feed_forward_length[i] = 0 makes block i a Mamba block without FFN (nemotron_h, nemotron_h_moe)
    static constexpr uint8_t kFfLayerPattern = 16;
    // A nextn block that holds trunk tensors must hold MTP tensors (blk.N.nextn.*) too: the loader
    // does not take a trunk block as an MTP block, so a nextn_predict_layers that counts one is
    // refused. Where it is not set (the deepseek2 family, glm-dsa, hy_v3, mimo2, mistral4, step35) a
    // trunk block counted as nextn loads.
    // Measured with llama.cpp 34af94cd9 (tests/data/loader-verdicts.tsv, the --nextn 1 variants).
    static constexpr uint8_t kNextnHeadRequired = 32;
};

// The optional expert tensors a loader creates beside its routed experts' weights (with
// TENSOR_NOT_REQUIRED or always); a file with one it does not create has a tensor the loader never asks
// for. The fixture generator refuses the options that write the others (tools/gen/model.cpp).
struct ArchTakes {
    static constexpr uint8_t kRouterBias = 1;   // ffn_gate_inp.bias (--router-bias)
    static constexpr uint8_t kExpsBias = 2;     // ffn_{gate,up,down}_exps.bias (--exps-bias)
    static constexpr uint8_t kProbsBias = 4;    // exp_probs_b, the selection bias (--probs-bias)
    static constexpr uint8_t kFusedGateUp = 8;  // ffn_gate_up_exps in place of gate and up (--fused-gate-up)
};

struct ArchInfo {
    std::string_view name;    // general.architecture
    std::string_view loader;  // the llama.cpp file the facts were read from ("src/models/deepseek2.cpp")
    ArchStatus status = ArchStatus::kPrunable;
    ExpertWidthKey width_key = ExpertWidthKey::kUnknown;
    SharedWidthRule shared_width = SharedWidthRule::kFromTensors;
    SharedCount shared_count = SharedCount::kAsRead;
    uint8_t flags = 0;  // ArchFlag bits
    // Tensors named like expert tensors that are not: a base ("ffn_norm_exps", arctic's [n_embd] norm)
    // or a base.suffix ("ffn_gate_inp.scale", gemma4's router input scale).
    std::span<const std::string_view> look_alikes = {};
    MoeBlocks moe_blocks = MoeBlocks::kFromTensors;
    // The dense FFN tensors (ffn_gate/ffn_up [n_embd, n_ff], ffn_down [n_ff, n_embd]) are sized by
    // feed_forward_length, one value or one per block (model/loader_ffn.h).
    bool dense_ff = false;
    uint8_t takes = 0;  // ArchTakes bits (0 for an architecture that can never hold experts)
    // The keys the loader requires beyond the width key (model/loader_ffn.cpp reports them absent).
    std::span<const RequiredKey> required_keys = {};

    bool has(uint8_t flag) const { return (flags & flag) != 0; }
    bool takes_tensor(uint8_t bit) const { return (takes & bit) != 0; }
};

// Why a model of `arch` with `from` experts per block must not become one with `to`: llama.cpp would
// load it but compute a different function (llama4 turns its Q/K norm off only at exactly 128
// experts, Llama-4 Maverick: src/models/llama4.cpp:43). nullopt when nothing but the count changes.
std::optional<std::string> expert_count_change_refusal(std::string_view arch, uint64_t from, uint64_t to);

// The entry of `arch`, or nullptr for an architecture the table does not list (expert tensors are then
// found by the generic name patterns alone, and width cuts are refused).
const ArchInfo* arch_info(std::string_view arch);
// Every listed architecture, sorted by name.
std::span<const ArchInfo> architectures();
// Whether the loader of `arch` reads what the ArchFlag bit `flag` names (nextn_predict_layers MTP blocks,
// token → expert tables, chunk experts): its entry's flag; true for an architecture the table does not
// list, which the generic rules read for all of them.
bool loader_reads(std::string_view arch, uint8_t flag);

// The keys of `arch` that carry expert facts: "<arch>.expert_count" and so on.
std::string arch_key(std::string_view arch, std::string_view suffix);
inline constexpr std::string_view kExpertCountKey = "expert_count";
inline constexpr std::string_view kExpertUsedCountKey = "expert_used_count";
inline constexpr std::string_view kExpertSharedCountKey = "expert_shared_count";
inline constexpr std::string_view kExpertWidthKey = "expert_feed_forward_length";
inline constexpr std::string_view kDenseWidthKey = "feed_forward_length";
inline constexpr std::string_view kSharedWidthKey = "expert_shared_feed_forward_length";
inline constexpr std::string_view kExpertGroupCountKey = "expert_group_count";
inline constexpr std::string_view kExpertGroupUsedCountKey = "expert_group_used_count";
inline constexpr std::string_view kLeadingDenseBlockCountKey = "leading_dense_block_count";
inline constexpr std::string_view kBlockCountKey = "block_count";
inline constexpr std::string_view kNextnPredictLayersKey = "nextn_predict_layers";
inline constexpr std::string_view kMoeEveryNLayersKey = "moe_every_n_layers";
inline constexpr std::string_view kInterleaveMoeStepKey = "interleave_moe_layer_step";
inline constexpr std::string_view kChunkWidthKey = "expert_chunk_feed_forward_length";
inline constexpr std::string_view kExpertsPerGroupKey = "experts_per_group";
inline constexpr std::string_view kHashLayerCountKey = "hash_layer_count";
inline constexpr std::string_view kHeadKeyLengthKey = "attention.key_length";
inline constexpr std::string_view kHeadCountKey = "attention.head_count";
inline constexpr std::string_view kEmbeddingLengthKey = "embedding_length";

}  // namespace gguf_reap
