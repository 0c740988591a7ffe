// Width (neuron) pruning, the model side: which expert FFN widths K a model can be cut to and which
// KVs change (WidthRules), and the plan file that says which channels each expert keeps (NeuronPlan).
// plan-width writes plans (ops/plan_width.h); splice cuts by them (ops/splice.h); audit, estimate and
// rank read them. Which tensors lose channels, along which axis, is the tensor table's (tensor_table.h).
//
// Cutting every routed expert from its native width n_ff to K channels keeps K rows of each expert's
// ffn_gate_exps / ffn_up_exps (both halves of a fused ffn_gate_up_exps), K elements of each expert's
// gpt-oss ffn_{gate,up}_exps.bias, and K columns (elements of every row) of ffn_down_exps. K is legal
// when (reference §5):
//   - 1 <= K <= n_ff;
//   - K is a multiple of the block size of every tensor whose row length becomes K (ffn_down_exps,
//     and the gate/up biases), since ggml rows hold whole blocks;
//   - where the loader derives the shared-expert width as expert_feed_forward_length ×
//     expert_shared_count (deepseek2, glm4moe, kimi-*, ...): K divides the shared experts' actual
//     width W (ffn_down_shexp ne0), because expert_shared_count must become W / K while the shared
//     tensors stay unchanged.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "gguf_reap/moe_layout.h"

namespace gguf_reap {

struct WidthRules {
    int64_t native_width = 0;    // n_ff: ffn_down_exps ne0 (the same in every MoE block)
    std::vector<int64_t> legal;  // every legal K, ascending (includes native_width)
    int64_t block_size = 1;      // lcm of the block sizes of the tensors whose rows become K
    // The types of the tensors whose rows become K (ffn_down_exps, gpt-oss gate/up biases), each once,
    // with the first such tensor: a block size above 1 needs a plan of whole blocks (plan_in_blocks).
    struct RowType {
        int32_t type = 0;
        std::string tensor;
    };
    std::vector<RowType> row_types;
    // KV that holds n_ff: "<arch>.expert_feed_forward_length", or "<arch>.feed_forward_length" where the
    // loader reads the experts' width from it (tensor_table.h, ExpertWidthKey::kFfKey).
    std::string width_key;
    bool width_key_present = false;  // false: the source relied on a loader fallback; it must be added
    bool shared_derived = false;     // the loader derives the shared width from width_key × shared count
    int64_t shared_width = 0;        // W: ffn_down_shexp ne0 (0 = no shared experts)
    std::string shared_count_key;    // "<arch>.expert_shared_count" when shared_derived
    // "<arch>.expert_shared_feed_forward_length" when the loader would otherwise derive the shared
    // width from the key a cut changes: the cut writes it as W so that the shared experts keep their
    // shape (bailingmoe3, cohere2moe, laguna, exaone-moe, hy_v3; hunyuan-moe). Empty otherwise.
    std::string shared_width_key;
    int64_t shared_width_value = 0;  // what it is written as: W, or W / count where the loader
                                     // multiplies the key by expert_shared_count (bailingmoe2)
    // "<arch>.expert_feed_forward_length" where the loader requires it but sizes the experts from
    // feed_forward_length (hunyuan-moe, minimax-m2): rewritten to K as well, so the two agree.
    std::string unused_width_key;
};

// A KV a width cut to K sets, with why (audit's finding text says it).
struct WidthKv {
    std::string key;
    uint64_t value;
    std::string why;
};
// Every KV a cut to `k` sets, in the order splice writes them when the source lacks them (right after
// expert_count): the width key = K, then expert_shared_count = W / K or the shared width key = W.
std::vector<WidthKv> width_kvs(const WidthRules& rules, int64_t k);

// Throws UsageError when `k` is not legal, with every legal value in the message:
//   "K = 1000 is not a legal expert width for <model>: <reason>; legal widths are {256, 512, ...}"
void check_width(const WidthRules& rules, int64_t k, const std::string& model_name);

// The first place where a plan keeps part of a quant block: block `block`, expert `expert` keeps `kept`
// of the channels group·B .. group·B + B − 1.
struct PartialBlock {
    int block = 0;
    int64_t expert = 0;
    int64_t kept = 0;
    int64_t group = 0;
};

// ---- the plan file ----------------------------------------------------------------------------
//
// A width-pruning ("neuron") plan: which FFN channels every (MoE block, expert) pair keeps.
//
// On disk (docs/formats.md): an .npz with
//   channels  [pairs, k] integer (uint16 when written by `plan-width`): channel ids of the native-width
//             expert, in rank order (best first) as `plan-width` writes them
//   block, expert  [pairs] integer (optional): which pair each row is; without them rows are block-major
//             over the MoE blocks in ascending order, experts 0..E-1
//   k         [1] integer (optional): must equal channels.shape[1] when present
// In memory every row is sorted ascending: that is the order in which a width splice writes the kept
// channels (rows of ffn_gate/up_exps, columns of ffn_down_exps, entries of the pruned imatrix), so
// column j of a width-pruned model is row(b, e)[j] of the native one.
struct NeuronPlan {
    int64_t k = 0;
    int64_t expert_count = 0;
    std::vector<int> blocks;        // MoE block ids, ascending
    std::vector<int32_t> channels;  // [block index][expert][k], each row ascending

    const int32_t* row(size_t block_index, int64_t expert) const {
        return channels.data() +
               (block_index * static_cast<size_t>(expert_count) + static_cast<size_t>(expert)) *
                   static_cast<size_t>(k);
    }
};

// Reads a plan for a model whose MoE blocks are `blocks` (ascending) with `expert_count` experts each.
// `width` is the native expert FFN width (channel ids must be below it; 0 = not checked). Every pair
// must have exactly one row; ids must be unique within a row. Throws InputError naming the file and
// the row or array at fault, or IoError.
NeuronPlan read_neuron_plan(const std::string& path, const std::vector<int>& blocks, int64_t expert_count,
                            int64_t width);
// The same over the .npz's bytes (named `name` in messages), and over its arrays once read.
NeuronPlan parse_neuron_plan(std::span<const uint8_t> bytes, const std::string& name,
                             const std::vector<int>& blocks, int64_t expert_count, int64_t width);
// `plan` in units of whole blocks of `bs` channels (plan.k a multiple of bs): k = plan.k / bs, each row
// the ids c / bs of the aligned groups it keeps, ascending; or, when a row keeps part of a group, the
// first such place (blocks, experts and groups in ascending order). This is what makes a width cut of
// a quantized row byte-exact: splice gathers those blocks, audit compares them, estimate asks whether.
std::variant<NeuronPlan, PartialBlock> plan_in_blocks(const NeuronPlan& plan, int64_t bs);

// The plan in units of blocks for each block size above 1 among rules.row_types (each size once, keyed
// by it); or, at the first row type (in the rules' order) whose blocks the plan keeps part of, that row
// type, its block size and the place. Splice gathers the blocks of these plans, audit compares them,
// and each refuses a partial block with its own message.
struct PartialRowBlock {
    const WidthRules::RowType* row_type = nullptr;
    int64_t block_size = 0;
    PartialBlock at;
};
std::variant<std::map<int64_t, NeuronPlan>, PartialRowBlock> plan_in_row_blocks(const WidthRules& rules,
                                                                                const NeuronPlan& plan);

}  // namespace gguf_reap
