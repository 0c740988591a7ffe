// The output's metadata: shard 1's KVs and the split.* keys (services/splice_kvs.h).
#include <stdexcept>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "model/provenance.h"
#include "services/splice_kvs.h"
#include "services/splice_plan.h"

namespace gguf_reap {

namespace {

// --drop-mtp: a per-layer array of `<arch>.` (as long as block_count, numeric elements) without its last
// `dropped` elements, the nextn blocks'; nullopt for any other key.
std::optional<Kv> truncated_layer_array(const Kv& kv, const std::string& arch, uint64_t block_count,
                                        uint64_t dropped) {
    if (kv.type != GgufType::kArray || kv.count != block_count || !kv.key.starts_with(arch + "."))
        return std::nullopt;
    const size_t elem = gguf_scalar_size(kv.elem_type);
    if (elem == 0 || kv.elem_type == GgufType::kString) return std::nullopt;
    Kv out = kv;
    out.count = block_count - dropped;
    const uint64_t n = out.count;
    out.raw.resize(12 + elem * n);
    std::memcpy(out.raw.data() + 4, &n, 8);
    return out;
}

// The build's base model is its source (docs/splice.md, "Name and base model"): its name, and its
// organization and repository when the source names them.
std::vector<Kv> base_model_kvs(const ShardSet& model, const std::string& source_name) {
    std::vector<Kv> kvs;
    kvs.push_back(Kv::make_u32(kBaseModelCountKey, 1));
    kvs.push_back(Kv::make_string(kBaseModel0NameKey, source_name));
    const auto str = [&](const char* key) -> std::string {
        const Kv* kv = model.find_kv(key);
        return kv ? kv->as_string().value_or("") : "";
    };
    if (const std::string org = str(kGeneralOrganizationKey); !org.empty())
        kvs.push_back(Kv::make_string(kBaseModel0OrganizationKey, org));
    std::string url = str(kGeneralRepoUrlKey);
    if (url.empty())
        if (const std::string repo = str(kSourceHfRepositoryKey); !repo.empty())
            url = "https://huggingface.co/" + repo;
    if (!url.empty()) kvs.push_back(Kv::make_string(kBaseModel0RepoUrlKey, url));
    return kvs;
}

}  // namespace

std::vector<Kv> split_kvs(size_t no, size_t count, size_t tensors) {
    return {Kv::make_u16(kSplitNo, static_cast<uint16_t>(no)),
            Kv::make_i32(kSplitTensorsCount, static_cast<int32_t>(tensors)),
            Kv::make_u16(kSplitCount, static_cast<uint16_t>(count))};
}

std::vector<Kv> first_shard_kvs(const ShardSet& model, const MoeLayout& layout, const KeepList& kl,
                                const SpliceOptions& o, const std::vector<Kv>& split) {
    const std::string expert_key = layout.arch + ".expert_count";
    const uint64_t n_keep = kl.blocks.front().keep.size();
    std::vector<Kv> kvs;
    std::vector<bool> placed(split.size(), false);
    const uint64_t dropped = o.drop_mtp ? layout.nextn_predict_layers : 0;
    for (const Kv& kv : model.metadata().kvs) {
        if (kv.key.starts_with(kProvenancePrefix)) continue;
        if (o.provenance && kv.key.starts_with(kBaseModelPrefix)) continue;  // the source is the base now
        if (o.provenance && kv.key == kGeneralNameKey && kv.as_string()) {
            const std::string name = *kv.as_string();
            kvs.push_back(Kv::make_string(
                kGeneralNameKey,
                pruned_model_name(name, n_keep, layout.expert_count,
                                  o.width ? static_cast<uint64_t>(o.width->plan.k) : 0,
                                  o.width ? static_cast<uint64_t>(o.width->rules.native_width) : 0)));
            for (Kv& b : base_model_kvs(model, name)) kvs.push_back(std::move(b));
            continue;
        }
        if (dropped > 0) {
            if (kv.key == arch_key(layout.arch, kBlockCountKey)) {
                kvs.push_back(*Kv::make_int_like(kv, layout.block_count - dropped));
                continue;
            }
            if (kv.key == arch_key(layout.arch, kNextnPredictLayersKey)) {
                kvs.push_back(*Kv::make_int_like(kv, 0));
                continue;
            }
            if (auto cut = truncated_layer_array(kv, layout.arch, layout.block_count, dropped)) {
                kvs.push_back(std::move(*cut));
                continue;
            }
        }
        if (is_split_key(kv.key)) {
            for (size_t i = 0; i < split.size(); ++i)
                if (split[i].key == kv.key) {
                    kvs.push_back(split[i]);
                    placed[i] = true;
                }
            continue;
        }
        if (kv.key == expert_key) {
            auto v = Kv::make_int_like(kv, n_keep);
            if (!v) throw std::logic_error(fmt::format("{} cannot hold {}", expert_key, n_keep));
            kvs.push_back(*v);
            if (o.width)
                for (const auto& [key, value, why] : width_kvs(o.width->rules, o.width->plan.k))
                    if (!model.find_kv(key)) kvs.push_back(Kv::make_u32(key, static_cast<uint32_t>(value)));
            continue;
        }
        if (o.width) {
            bool replaced = false;
            for (const auto& [key, value, why] : width_kvs(o.width->rules, o.width->plan.k))
                if (kv.key == key) {
                    auto v = Kv::make_int_like(kv, value);
                    if (!v) throw std::logic_error(fmt::format("{} cannot hold {}", key, value));
                    kvs.push_back(*v);
                    replaced = true;
                }
            if (replaced) continue;
        }
        kvs.push_back(kv);
    }
    if (o.provenance) {
        kvs.push_back(Kv::make_string(kProvenanceVersionKey, o.tool_version));
        kvs.push_back(
            Kv::make_u32(kProvenanceSourceExpertCountKey, static_cast<uint32_t>(layout.expert_count)));
        kvs.push_back(Kv::make_string(kProvenanceKeeplistShaKey, o.keeplist_sha256));
        if (dropped > 0)
            kvs.push_back(Kv::make_u32(kProvenanceDroppedNextnKey, static_cast<uint32_t>(dropped)));
        for (const KeepBlock& b : kl.blocks)
            kvs.push_back(Kv::make_u32_array(fmt::format("{}{}", kProvenanceKeptPrefix, b.block), b.keep));
        if (o.width) {
            kvs.push_back(Kv::make_string(kProvenanceNeuronPlanShaKey, o.width->plan_sha256));
            kvs.push_back(Kv::make_u32(kProvenanceSourceExpertWidthKey,
                                       static_cast<uint32_t>(o.width->rules.native_width)));
        }
    }
    for (size_t i = 0; i < split.size(); ++i)
        if (!placed[i]) kvs.push_back(split[i]);
    return kvs;
}

}  // namespace gguf_reap
