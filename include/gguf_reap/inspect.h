// inspect: what a model holds and what it costs to run (the figures `inspect` prints), or what an
// imatrix file holds.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf_reap/moe_layout.h"
#include "gguf_reap/opened.h"

namespace gguf_reap {

// Tensors grouped as a model card groups them: class = name without "blk.N." and without ".weight"
// (e.g. "ffn_down_exps", "token_embd", "exp_probs_b.bias"), per ggml type.
struct ClassTypeRow {
    std::string tensor_class;
    int32_t type = 0;
    uint64_t tensors = 0;
    uint64_t elements = 0;
    uint64_t bytes = 0;
    double bpw() const {
        return elements ? 8.0 * static_cast<double>(bytes) / static_cast<double>(elements) : 0.0;
    }
};

struct DecodeCost {
    uint64_t dense_bytes = 0;   // non-expert tensors read once per token (token_embd: one row if untied)
    uint64_t router_bytes = 0;  // router weights and biases, read whole
    uint64_t expert_bytes = 0;  // expert_used_count slabs per MoE block
    uint64_t nextn_bytes = 0;   // MTP (nextn) blocks: not read by plain decoding, not in total()
    uint64_t total() const { return dense_bytes + router_bytes + expert_bytes; }
};

struct ModelSummary {
    std::string arch;
    uint64_t file_bytes = 0;    // sum of shard file sizes
    uint64_t tensor_bytes = 0;  // sum of tensor nbytes
    uint64_t parameters = 0;    // sum of tensor elements
    uint64_t tensor_count = 0;
    std::vector<ClassTypeRow> rows;  // by bytes, descending
    MoeLayout moe;
    uint64_t expert_bytes = 0;     // all expert-indexed tensors (incl. router)
    bool tied_embeddings = false;  // no output.weight: token_embd doubles as the output projection
    DecodeCost decode;
};

namespace ops {

// One `gguf-reap inspect PATH`: an imatrix (GGUF or legacy .dat) or a model (any shard).
struct InspectResult {
    std::shared_ptr<const Opened> opened;  // the imatrix or the model, as opened (opened.h)
    ModelSummary summary;                  // models only
};
InspectResult inspect(const std::string& path);

}  // namespace ops

}  // namespace gguf_reap
