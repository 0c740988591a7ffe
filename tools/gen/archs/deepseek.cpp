// The DeepSeek-V3 family: MLA attention, leading dense blocks, shared experts, sigmoid routing with an
// optional selection bias, expert groups, MTP (nextn) blocks. Loaders: src/models/deepseek2.cpp.
#include <fmt/format.h>

#include "gen/archs.h"
#include "gen/archs/mla.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

void build_deepseek2(ModelBuilder& b) {
    const ModelSpec& s = b.spec();
    if (s.experts > 0 && s.shared < 1)
        throw UsageError(
            "--shared 0: deepseek2's loader always creates the shared experts (use --shared 1 or more)");
    const Mla m = mla_of(s);
    b.gpt2_tokenizer();
    ModelBuilder::Generic g;
    g.heads_kv = 1;  // MLA served as MQA
    b.generic_keys(g);
    mla_keys(b, m);
    if (s.experts > 0) {
        ModelBuilder::ExpertKeys k;
        k.shared = k.leading_dense = k.weights_norm = k.weights_scale = k.groups = true;
        k.gating = 2;  // sigmoid
        b.expert_keys(k);
    }
    b.tensor("token_embd.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kEmbd);
    const int64_t total = s.blocks + s.nextn;
    for (int64_t i = 0; i < total; ++i) {
        mla_tensors(b, i, m);
        b.norm(ModelBuilder::blk(i, "ffn_norm.weight"), s.embd);
        if (s.experts == 0 || i < s.dense_blocks) {
            b.dense_ffn(i, s.ff);
        } else {
            b.experts(i, {});
            b.shared_experts(i, s.expert_ff * s.shared);
        }
        if (i >= s.blocks) {  // the MTP head's own tensors (loaded with the block, skipped at run time)
            b.nextn_head(i);
        }
    }
    b.norm("output_norm.weight", s.embd);
    if (!s.tied) b.tensor("output.weight", {s.embd, s.vocab, 1, 1}, TypeClass::kOutput);
}

}  // namespace gguf_reap::gen
