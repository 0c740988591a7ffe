// Synthetic MoE models: a ModelSpec (shape, types, optional tensors) → a ModelPlan (KVs and tensor
// infos in llama.cpp's names and ggml ne order) → shards on disk. Planning is pure and validates every
// argument (UsageError naming the option); writing streams seeded data through one bounded buffer.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "gen/fill.h"

namespace gguf_reap::gen {

struct ModelSpec {
    std::string preset = "tiny";
    std::string arch = "deepseek2";
    bool skeleton = false;     // gguf-reap's test layout (archs/skeleton.cpp) instead of arch's llama.cpp one
    std::string name;          // general.name; "" → "gguf-reap synthetic <preset>"
    int64_t blocks = 4;        // block_count without the nextn blocks
    int64_t dense_blocks = 1;  // leading_dense_block_count
    int64_t experts = 16;      // 0 → a dense model (every block dense, no expert keys)
    int64_t used = 4;
    int64_t shared = 1;  // shared experts; 0 → no shexp tensors
    int64_t groups = 1;
    int64_t group_used = 1;
    int64_t nextn = 0;
    int64_t embd = 128;
    int64_t ff = 256;
    int64_t expert_ff = 64;
    int64_t vocab = 512;
    int64_t heads = 4;
    bool probs_bias = false;
    bool router_bias = false;
    bool exps_bias = false;
    bool scales = false;
    bool fused_gate_up = false;
    bool tied = false;
    float weights_scale = 2.5f;  // <arch>.expert_weights_scale (Kimi-K2 uses 2.827)
    std::string type_exps = "Q8_0";
    std::string type_down;  // "" → type_exps
    std::string type_attn = "Q8_0";
    std::string type_embd = "Q8_0";
    std::string type_output = "Q8_0";
    std::string type_shexp = "Q8_0";
    std::string type_dense = "Q8_0";
    std::string type_router = "F32";
    std::optional<uint32_t> alignment;
    uint64_t seed = 42;
    int64_t filler = 0;  // extra 1-element F32 tensors "filler.N.weight", to reach large tensor counts
    std::set<std::string> given;  // the options given on the command line (architecture presets refuse
                                  // those they cannot honour, and adapt the preset's defaults otherwise)
};

// The defaults of a preset: "tiny", "demo" or "kimi-k3". Throws UsageError for any other name.
ModelSpec preset_spec(const std::string& preset);

struct PlannedTensor {
    TensorInfo info;  // name, n_dims, ne, type, nbytes (offsets are assigned per shard)
    FillKind fill = FillKind::kSmall;
    FillIds ids;  // kExpertIds only
};

struct ModelPlan {
    ModelSpec spec;
    std::vector<Kv> kvs;  // the model KVs (no split.*)
    std::vector<PlannedTensor> tensors;
    std::vector<int64_t> moe_blocks;    // ids of blocks with routed experts (incl. nextn)
    std::vector<int64_t> nextn_blocks;  // ids of the nextn (MTP) blocks
    uint64_t tensor_bytes = 0;          // sum of nbytes
};

// --set-key: "KEY=V" changes the integer key KEY (or "<arch>.KEY") to V in its own type, "KEY=V1,V2"
// an integer array, "KEY=" removes it; a key the plan lacks is added as u32 (arrays: u32 elements).
// Throws UsageError naming the assignment.
void set_key(std::vector<Kv>& kvs, const std::string& arch, const std::string& assignment);

// Validates the spec and lays the model out. Throws UsageError naming the offending option.
ModelPlan plan_model(const ModelSpec& spec);

struct ShardPlan {
    std::string path;
    std::vector<Kv> kvs;
    std::vector<size_t> tensors;    // indices into ModelPlan::tensors
    std::vector<TensorInfo> infos;  // with offsets
    uint32_t alignment = kGgufDefaultAlignment;
    std::vector<uint8_t> header;  // serialised header incl. the padding up to the data start
    uint64_t file_size = 0;
};

// Cuts the tensors, in order, into `shards` files balanced by bytes. shards == 1: OUT itself, no
// split.* keys. shards > 1: OUT-0000i-of-0000N.gguf, split.no/count/tensors.count appended last to
// each shard's KVs; only the first shard carries the model KVs. Throws UsageError.
std::vector<ShardPlan> plan_shards(const ModelPlan& plan, const std::string& out, int64_t shards);

// Writes every shard under a temporary name, then renames them all. Throws IoError / Interrupted.
void write_model(const ModelPlan& plan, const std::vector<ShardPlan>& shards);

// The --truth document: shape, blocks, files and every tensor.
nlohmann::ordered_json model_truth(const ModelPlan& plan, const std::vector<ShardPlan>& shards);

}  // namespace gguf_reap::gen
