// Structural audit, part two: the conditions under which llama.cpp's loader refuses a model with
// experts (src/llama-model.cpp load_hparams, and the shape checks of create_tensor), read from the
// output's own headers. Each finding names the key or the tensor. The facts about which tensors are
// expert-indexed and where each architecture reads its widths come from the tensor table; the reading
// and comparing is audit's own.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/loader_ffn.h"
#include "model/tensor_table.h"
#include "ops/audit/audit_internal.h"

namespace gguf_reap::audit_detail {

namespace {

// LLAMA_MAX_EXPERTS (src/llama-hparams.h).
constexpr uint64_t kMaxExperts = 1024;

struct Located {
    const OutShard* shard;
    const TensorInfo* info;
};

class LoadRules {
  public:
    LoadRules(const OutputSet& out, std::vector<Finding>& findings) : findings_(findings) {
        meta_ = &out.meta();
        for (const OutShard& s : out.shards)
            if (s.header)
                for (const TensorInfo& t : s.header->tensors) tensors_.push_back(Located{&s, &t});
        if (const Kv* a = meta_->header->find("general.architecture"))
            if (auto v = a->as_string()) arch_ = *v;
    }

    void run() {
        if (arch_.empty()) return;
        const auto E = key_uint(kExpertCountKey);
        const auto used = key_uint(kExpertUsedCountKey);
        const auto groups = key_uint(kExpertGroupCountKey);
        const auto group_used = key_uint(kExpertGroupUsedCountKey);
        const uint64_t e = E.value_or(0), u = used.value_or(0), g = groups.value_or(0),
                       gu = group_used.value_or(0);
        if (e > kMaxExperts)
            key_finding(kExpertCountKey,
                        fmt::format("is {}, more than llama.cpp's LLAMA_MAX_EXPERTS = {}", e, kMaxExperts));
        if (u > e)
            key_finding(kExpertUsedCountKey,
                        fmt::format("is {}, more than {} = {}: llama.cpp requires expert_used_count <= "
                                    "expert_count",
                                    u, arch_key(arch_, kExpertCountKey), e));
        if (e > 0) {
            if (u == 0)
                key_finding(kExpertUsedCountKey,
                            fmt::format("is 0 (or absent) in a model with {} experts: llama.cpp requires at "
                                        "least one expert per token",
                                        e));
            if (g >= e)
                key_finding(kExpertGroupCountKey, fmt::format("is {}, not fewer than the {} experts", g, e));
            if (g > 1) {
                if (e % g != 0)
                    key_finding(kExpertGroupCountKey,
                                fmt::format("is {}: {} experts do not split into {} equal groups", g, e, g));
                if (gu == 0 || gu >= g)
                    key_finding(kExpertGroupUsedCountKey,
                                fmt::format("is {}: llama.cpp requires 0 < expert_group_used_count < "
                                            "expert_group_count = {}",
                                            gu, g));
            }
        } else if (u != 0) {
            key_finding(kExpertUsedCountKey,
                        fmt::format("is {} in a model without experts: llama.cpp requires 0", u));
        }
        check_tensors(e);
        check_nextn_blocks();
    }

  private:
    std::optional<uint64_t> key_uint(std::string_view suffix) const {
        const Kv* kv = meta_->header->find(arch_key(arch_, suffix));
        return kv ? kv->as_uint() : std::nullopt;
    }

    void key_finding(std::string_view suffix, std::string message) {
        const std::string key = arch_key(arch_, suffix);
        const Kv* kv = meta_->header->find(key);
        Finding f;
        f.kind = FindingKind::kLoadRule;
        f.file = meta_->path;
        f.subject = fmt::format("kv '{}'", key);
        if (kv) f.offset = kv_value_offset(*kv);
        f.message = std::move(message);
        findings_.push_back(std::move(f));
    }

    void tensor_finding(const Located& t, std::string message, const char* region = "shape") {
        Finding f;
        f.kind = FindingKind::kLoadRule;
        f.file = t.shard->path;
        f.subject = fmt::format("tensor '{}'", t.info->name);
        f.offset = t.info->info_offset;
        f.tensor = t.info->name;
        f.region = region;
        f.message = std::move(message);
        findings_.push_back(std::move(f));
    }

    static std::string shape(const TensorInfo& t) {
        std::string s;
        for (uint32_t d = 0; d < t.n_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", t.ne[d]);
        return "{" + s + "}";
    }

    void check_tensors(uint64_t e) {
        const ArchInfo* info = arch_info(arch_);
        const KvLookup kv = [this](const std::string& key) { return meta_->header->find(key); };
        std::map<int, std::optional<Derived>> widths;  // per block: feed_forward_length may be an array
        auto width_of = [&](const TensorInfo& t) -> const std::optional<Derived>& {
            const auto split = split_block_name(t.name);
            const int b = split ? split->first : -1;
            auto it = widths.find(b);
            if (it == widths.end())
                it = widths.emplace(b, info ? routed_width(*info, kv, b) : std::nullopt).first;
            return it->second;
        };
        // When every expert-indexed tensor agrees on one count and the key says another, the key is
        // what is wrong: one finding, not one per tensor.
        std::optional<int64_t> common;
        bool agree = true;
        const Located* first = nullptr;
        for (const Located& t : tensors_)
            if (const ExpertTensorKind* kind = expert_kind_of(arch_, t.info->name)) {
                const int64_t have = t.info->ne[static_cast<size_t>(kind->expert_axis)];
                if (!common) common = have, first = &t;
                agree = agree && have == *common;
            }
        if (common && agree && static_cast<uint64_t>(*common) != e) {
            key_finding(kExpertCountKey,
                        fmt::format("is {}, but every expert-indexed tensor holds {} experts (e.g. '{}' has "
                                    "shape {})",
                                    e, *common, first->info->name, shape(*first->info)));
            return;
        }
        for (const Located& t : tensors_) {
            const ExpertTensorKind* kind = expert_kind_of(arch_, t.info->name);
            if (!kind) continue;
            const int64_t have = t.info->ne[static_cast<size_t>(kind->expert_axis)];
            if (static_cast<uint64_t>(have) != e) {
                tensor_finding(
                    t, fmt::format("has shape {}: its expert axis ne[{}] is {}, but {} = {}", shape(*t.info),
                                   kind->expert_axis, have, arch_key(arch_, kExpertCountKey), e));
                continue;
            }
            const auto& width = width_of(*t.info);
            if (width && kind->width_cut()) {
                const int64_t want = kind->width_factor * static_cast<int64_t>(width->value);
                const int64_t got = t.info->ne[static_cast<size_t>(kind->width_axis)];
                if (got != want)
                    tensor_finding(t, fmt::format("has shape {}: ne[{}] is {}, but {} makes it {}",
                                                  shape(*t.info), kind->width_axis, got, width->why, want));
            }
        }
        if (info) check_ffn(*info, kv);
    }

    // MTP (nextn) blocks. Every loader that has them reads nextn_predict_layers and creates
    // blk.N.nextn.* only in the last nextn_predict_layers blocks (N >= n_layer() = block_count -
    // nextn_predict_layers); one in another block is a tensor llama.cpp never loads, and it refuses the
    // file ("wrong number of tensors"). An architecture whose loader has no MTP blocks reads no such
    // key: every nextn tensor is then one it never loads. And where the table says the loader takes
    // no trunk block as an MTP block (ArchFlag::kNextnHeadRequired), each nextn block must hold MTP
    // tensors: a block with trunk tensors and no MTP tensor is refused. Measured on every generator preset
    // with MTP blocks (tests/data/loader-verdicts.tsv).
    void check_nextn_blocks() {
        const ArchInfo* info = arch_info(arch_);
        const bool reads_key = !info || (info->flags & ArchFlag::kNextn);
        const uint64_t blocks = key_uint(kBlockCountKey).value_or(0);
        const uint64_t nextn = reads_key ? key_uint(kNextnPredictLayersKey).value_or(0) : 0;
        const uint64_t first = nextn <= blocks ? blocks - nextn : 0;
        const std::string range = nextn == 0   ? std::string("none")
                                  : nextn == 1 ? fmt::format("block {}", first)
                                               : fmt::format("blocks {}..{}", first, blocks - 1);
        const std::string why = reads_key ? fmt::format("{} = {} and {} = {} make the nextn blocks {}",
                                                        arch_key(arch_, kBlockCountKey), blocks,
                                                        arch_key(arch_, kNextnPredictLayersKey), nextn, range)
                                          : fmt::format("{}'s loader has no MTP blocks", arch_);
        std::vector<bool> has_mtp(blocks, false), has_other(blocks, false);
        for (const Located& t : tensors_) {
            const auto split = split_block_name(t.info->name);
            if (!split || split->first < 0) continue;
            const auto b = static_cast<uint64_t>(split->first);
            if (!split->second.starts_with("nextn.")) {
                if (b < blocks) has_other[b] = true;
                continue;
            }
            if (b >= first && b < blocks) {
                has_mtp[b] = true;
                continue;
            }
            tensor_finding(
                t,
                fmt::format("is an MTP (nextn) tensor in block {}, but {}: llama.cpp never loads it, "
                            "and refuses the file",
                            b, why),
                "block");
        }
        if (!info || !(info->flags & ArchFlag::kNextnHeadRequired)) return;
        // A nextn block with no tensors at all is a trunk-only file (its MTP tensors shipped apart),
        // which several of these loaders accept: only a trunk block counted as nextn is refused.
        for (uint64_t b = first; b < blocks; ++b)
            if (!has_mtp[b] && has_other[b])
                key_finding(
                    kNextnPredictLayersKey,
                    fmt::format("is {}, which makes block {} a nextn block, but it holds no MTP tensor "
                                "(blk.{}.nextn.*): {}'s loader does not take a trunk block as an MTP "
                                "block, and refuses the file",
                                nextn, b, b, arch_));
    }

    // The dense FFN, shared and chunk experts, hash tables and which blocks are MoE, as the keys make
    // the loader expect them (model/loader_ffn.h).
    void check_ffn(const ArchInfo& info, const KvLookup& kv) {
        std::vector<const TensorInfo*> infos;
        infos.reserve(tensors_.size());
        for (const Located& t : tensors_) infos.push_back(t.info);
        for (const FfnMismatch& m : check_loader_ffn(info, kv, infos)) {
            if (!m.key.empty()) {
                key_finding(std::string_view(m.key).substr(arch_.size() + 1), m.message);
                continue;
            }
            const auto it = std::find_if(tensors_.begin(), tensors_.end(),
                                         [&](const Located& t) { return t.info->name == m.tensor; });
            if (it != tensors_.end()) tensor_finding(*it, m.message);
        }
    }

    std::vector<Finding>& findings_;
    const OutShard* meta_ = nullptr;
    std::string arch_;
    std::vector<Located> tensors_;  // in file order
};

}  // namespace

void check_load_rules(const OutputSet& out, std::vector<Finding>& findings) {
    if (!out.meta().header) return;
    LoadRules(out, findings).run();
}

}  // namespace gguf_reap::audit_detail
