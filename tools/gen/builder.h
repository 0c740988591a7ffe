// Building a synthetic model of one llama.cpp architecture: what an architecture preset (archs.h) calls
// to add the keys and tensors that architecture's loader requires, at the shapes it checks. Expert
// tensors are named through gguf-reap's tensor table (model/tensor_table.h); everything else is named as
// llama.cpp's LLM_TENSOR_NAMES name it.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "gen/fill.h"
#include "gen/model.h"
#include "model/tensor_table.h"

namespace gguf_reap::gen {

// Which type option decides a tensor's type.
enum class TypeClass {
    kEmbd,    // --type-embd
    kOutput,  // --type-output
    kAttn,    // --type-attn: attention, SSM, and other per-block matrices
    kDense,   // --type-dense: dense FFN blocks
    kExps,    // --type-exps: gate/up expert weights
    kDown,    // --type-down: the down expert weights
    kShexp,   // --type-shexp: shared experts
    kRouter,  // --type-router
    kF32,     // always F32 (norms, biases, scales, small vectors)
    kI32,     // always I32 (token-id → expert-id tables)
};

class ModelBuilder {
  public:
    explicit ModelBuilder(const ModelSpec& spec);

    const ModelSpec& spec() const { return spec_; }
    const std::string& arch() const { return spec_.arch; }

    // ---- keys: "<arch>.<suffix>" (or `key` itself where it starts with "general." or "tokenizer.")
    void u32(const std::string& suffix, int64_t v);
    void i32(const std::string& suffix, int64_t v);
    void f32(const std::string& suffix, double v);
    void boolean(const std::string& suffix, bool v);
    void str(const std::string& suffix, const std::string& v);
    void u32_array(const std::string& suffix, const std::vector<int64_t>& v);
    void i32_array(const std::string& suffix, const std::vector<int64_t>& v);
    void f32_array(const std::string& suffix, const std::vector<double>& v);
    void bool_array(const std::string& suffix, const std::vector<bool>& v);
    void raw(Kv kv);  // any key, as given

    // The generic keys nearly every loader reads: context_length, embedding_length, block_count
    // (trunk + nextn), feed_forward_length (unless `ff` < 0), head_count, head_count_kv, the RMS (or
    // layer-norm) epsilon, rope.freq_base, vocab_size.
    struct Generic {
        int64_t ff = 0;           // 0: spec.ff; < 0: no feed_forward_length key
        int64_t heads_kv = -1;    // -1: spec.heads
        bool layer_norm = false;  // attention.layer_norm_epsilon instead of the RMS one
        bool rope = true;         // rope.freq_base
        bool vocab_size = true;
    };
    void generic_keys(const Generic& g);
    // The expert keys: expert_count, expert_used_count, and (when asked) shared count, expert width,
    // gating function, weights norm/scale, groups and leading dense blocks, from the spec.
    struct ExpertKeys {
        bool shared = false;  // expert_shared_count
        bool width = true;    // expert_feed_forward_length
        int gating = -1;      // expert_gating_func (1 softmax, 2 sigmoid), -1: not written
        bool weights_norm = false;
        bool weights_scale = false;
        bool groups = false;  // expert_group_count / expert_group_used_count when spec.groups > 1
        bool leading_dense = false;
    };
    void expert_keys(const ExpertKeys& k);

    // A GPT-2 byte-level BPE vocabulary of spec.vocab tokens: the 256 byte tokens, merges of common
    // letter pairs, "<|endoftext|>" (CONTROL) last as bos and eos.
    void gpt2_tokenizer();

    // ---- tensors (model order is the order they are added)
    // `dim_option` names the option that sets ne[0], for the message when a row is not whole blocks.
    void tensor(const std::string& name, std::array<int64_t, 4> ne, TypeClass cls,
                FillKind fill = FillKind::kSmall, const std::string& dim_option = "");
    void norm(const std::string& name, int64_t n) {
        tensor(name, {n, 1, 1, 1}, TypeClass::kF32, FillKind::kNearOne);
    }
    void bias(const std::string& name, int64_t n) {
        tensor(name, {n, 1, 1, 1}, TypeClass::kF32, FillKind::kZero);
    }
    // "blk.B.<rest>"
    static std::string blk(int64_t b, const std::string& rest);

    // The routed experts of block b as the tensor table names them: router [embd, E] (+ bias, + the
    // selection bias when asked), gate and up (or fused gate_up), down, and the spec's optional
    // per-expert biases and scales. `in` is the experts' input width (n_embd, or a latent width).
    struct Experts {
        int64_t in = 0;           // 0: spec.embd
        int64_t router_in = 0;    // 0: spec.embd
        bool gate = true;         // false: up and down only (ungated experts)
        bool allow_fused = true;  // the loader takes ffn_gate_up_exps
        bool probs_bias = false;  // write exp_probs_b even without --probs-bias
        std::string probs_bias_suffix = "bias";
        bool allow_exps_bias = false;  // the loader takes ffn_*_exps.bias (gpt-oss)
        bool scales = true;  // false: no per-expert scales even with --scales (a block whose experts the
                             // loader skips, e.g. a nextn block: it creates no scales there)
    };
    void experts(int64_t b, const Experts& e);
    // Shared experts: ffn_{gate,up,down}_shexp at width w.
    void shared_experts(int64_t b, int64_t w, bool gate = true);
    // A dense FFN: ffn_gate (when `gate`), ffn_up, ffn_down at width ff.
    void dense_ffn(int64_t b, int64_t ff, bool gate = true);
    // Standard attention: attn_q/k/v/output at head_dim × heads (kv heads for k, v), optional q/k norms.
    void attention(int64_t b, int64_t head_dim, int64_t heads, int64_t heads_kv, bool qk_norm = false);

    void moe_block(int64_t b) { moe_blocks_.push_back(b); }
    void nextn_block(int64_t b) { nextn_blocks_.push_back(b); }
    // An MTP block's head as llama.cpp's nextn loaders create it: nextn.eh_proj [2·embd, embd], and the
    // enorm, hnorm and shared_head_norm norms; marks b a nextn block.
    void nextn_head(int64_t b);

    ModelPlan finish();
    // The tensors added so far (the last one: to set its FillIds).
    PlannedTensor& last() { return plan_.tensors.back(); }

  private:
    int32_t type_of(TypeClass c) const;
    const ModelSpec& spec_;
    ModelPlan plan_;
    std::vector<int64_t> moe_blocks_, nextn_blocks_;
};

}  // namespace gguf_reap::gen
