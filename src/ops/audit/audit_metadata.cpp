// audit, step 2b: the key/value pairs of every output shard against the source's, plus exactly the
// changes pruning makes (expert count, width keys, split.*, provenance) — rebuilt here, never taken
// from splice.
#include <cstring>
#include <deque>
#include <unordered_set>

#include <fmt/format.h>

#include "io/sha256.h"
#include "model/provenance.h"
#include "model/tensor_table.h"
#include "ops/audit/audit_internal.h"

namespace gguf_reap::audit_detail {

namespace {

enum class Match {
    kExact,     // type and raw bytes equal
    kSplit,     // split.*: presence, type and value are the structure check's business; only order here
    kPresence,  // present (gguf_reap.kept.*: values are checked against the keeplist/source separately)
    kVersion,   // a string "gguf-reap ..."
    kSha256,    // a string of 64 lower-case hex digits
};

struct ExpectedKv {
    std::string key;
    Match match = Match::kExact;
    const Kv* value = nullptr;  // kExact: the expected value (points into source or `owned`)
    std::string why;            // said when missing or different
};

void compare_kvs(const OutShard& s, const std::vector<ExpectedKv>& exp, AuditReport& r) {
    const auto& actual = s.header->kvs;
    std::unordered_map<std::string_view, size_t> at;
    for (size_t i = 0; i < actual.size(); ++i) at.emplace(actual[i].key, i);
    std::unordered_set<std::string_view> expected_keys;
    auto add = [&](Finding f) { r.findings.push_back(std::move(f)); };

    for (const ExpectedKv& e : exp) {
        expected_keys.insert(e.key);
        const std::string subject = fmt::format("kv '{}'", e.key);
        auto it = at.find(e.key);
        if (it == at.end()) {
            if (e.match != Match::kSplit)
                add(make_finding(FindingKind::kMetadata, s.path, subject, std::nullopt, "missing: " + e.why));
            continue;
        }
        const Kv& a = actual[it->second];
        ++r.summary.kvs_checked;
        switch (e.match) {
            case Match::kSplit:
            case Match::kPresence:
                break;
            case Match::kVersion:
            case Match::kSha256: {
                const auto str = a.as_string();
                const bool ok =
                    str && (e.match == Match::kVersion ? str->starts_with("gguf-reap ") && str->size() > 10
                                                       : is_sha256_hex(*str));
                if (!ok)
                    add(make_finding(
                        FindingKind::kMetadata, s.path, subject, kv_value_offset(a),
                        fmt::format("is {} {}, expected {}", gguf_type_name(a.type), a.display(), e.why)));
                break;
            }
            case Match::kExact: {
                const Kv& want = *e.value;
                if (a.type != want.type || (a.type == GgufType::kArray && a.elem_type != want.elem_type)) {
                    add(make_finding(FindingKind::kMetadata, s.path, subject,
                                     a.file_offset + 8 + a.key.size(),
                                     fmt::format("has type {}, expected {} ({})", gguf_type_name(a.type),
                                                 gguf_type_name(want.type), e.why)));
                    break;
                }
                if (a.raw == want.raw) break;
                size_t i = 0;
                while (i < a.raw.size() && i < want.raw.size() && a.raw[i] == want.raw[i]) ++i;
                add(make_finding(
                    FindingKind::kMetadata, s.path, subject, kv_value_offset(a) + i,
                    fmt::format("value {} differs from the expected {} ({}; first difference at byte "
                                "{} of the value)",
                                a.display(), want.display(), e.why, i)));
                break;
            }
        }
    }
    for (const Kv& a : actual)
        if (!expected_keys.count(a.key))
            add(make_finding(
                FindingKind::kMetadata, s.path, fmt::format("kv '{}'", a.key), a.file_offset,
                fmt::format("unexpected key {} = {}: not in the source and not one of the documented "
                            "changes",
                            gguf_type_name(a.type), a.display())));
    // Order: the keys both sides have, in the order each side has them. The split.* keys are left out:
    // no reader cares where they stand (llama.cpp's gguf-split writes no, tensors.count, count), and a
    // source that is the same model split differently would otherwise move them.
    std::vector<const Kv*> got;
    for (const Kv& a : actual)
        if (expected_keys.count(a.key) && !is_split_key(a.key)) got.push_back(&a);
    std::vector<std::string_view> want;
    for (const ExpectedKv& e : exp)
        if (at.count(e.key) && !is_split_key(e.key)) want.push_back(e.key);
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
        if (got[i]->key == want[i]) continue;
        add(make_finding(
            FindingKind::kMetadata, s.path, fmt::format("kv '{}'", got[i]->key), got[i]->file_offset,
            fmt::format("key order differs from the source: '{}' stands where '{}' belongs (source KVs "
                        "keep their order and provenance keys follow them)",
                        got[i]->key, want[i])));
        break;
    }
}

void check_version(const OutShard& s, const Header& src_meta, AuditReport& r) {
    if (s.header->version != src_meta.version)
        r.findings.push_back(make_finding(
            FindingKind::kMetadata, s.path, "version", 4,
            fmt::format("GGUF version {}, the source has {}", s.header->version, src_meta.version)));
}

}  // namespace

// general.name: the source's name with the experts kept (and the width cut); then the source as the
// base model: count 1, its name, organization and repository (general.repo_url, else the Hugging Face
// repository the source names), each when the source has it.
void expect_name_and_base(const ShardSet& src, const KeptExperts& kept, const std::string& name,
                          std::deque<Kv>& owned, std::vector<ExpectedKv>& exp) {
    const auto add = [&](Kv kv, std::string why) {
        owned.push_back(std::move(kv));
        exp.push_back({owned.back().key, Match::kExact, &owned.back(), std::move(why)});
    };
    if (kept.valid) {
        const uint64_t width = kept.width ? static_cast<uint64_t>(kept.width->plan.k) : 0;
        const uint64_t native = kept.width ? static_cast<uint64_t>(kept.width->native_width) : 0;
        add(Kv::make_string(
                kGeneralNameKey,
                pruned_model_name(name, kept.n, src.arch_uint("expert_count").value_or(0), width, native)),
            "the source's name with the experts kept");
    } else {
        exp.push_back({kGeneralNameKey, Match::kPresence, nullptr, "the source has it"});
    }
    add(Kv::make_u32(kBaseModelCountKey, 1), "the source is the build's one base model");
    add(Kv::make_string(kBaseModel0NameKey, name), "the source's general.name");
    const auto str = [&](const char* key) -> std::string {
        const Kv* kv = src.find_kv(key);
        return kv ? kv->as_string().value_or("") : "";
    };
    if (const std::string org = str(kGeneralOrganizationKey); !org.empty())
        add(Kv::make_string(kBaseModel0OrganizationKey, org), "the source's general.organization");
    std::string url = str(kGeneralRepoUrlKey);
    if (url.empty())
        if (const std::string repo = str(kSourceHfRepositoryKey); !repo.empty())
            url = "https://huggingface.co/" + repo;
    if (!url.empty()) add(Kv::make_string(kBaseModel0RepoUrlKey, url), "the source's repository");
}

namespace {

// What --drop-mtp makes of a source key (block_count, the nextn count, a per-layer array), with why; nullopt
// for a key it leaves alone.
std::optional<std::pair<Kv, std::string>> mtp_dropped_kv(const ShardSet& src, const KeptExperts& kept,
                                                         const Kv& kv) {
    const std::string& arch = src.architecture();
    const uint64_t bc = src.arch_uint(std::string(kBlockCountKey)).value_or(0);
    const uint64_t d = kept.dropped_nextn;
    std::optional<Kv> want;
    std::string why;
    if (kv.key == arch_key(arch, kBlockCountKey)) {
        want = Kv::make_int_like(kv, bc - d);
        why = fmt::format("MTP dropped: {} nextn block(s) left out of {}", d, bc);
    } else if (kv.key == arch_key(arch, kNextnPredictLayersKey)) {
        want = Kv::make_int_like(kv, 0);
        why = "MTP dropped: no nextn blocks are left";
    } else if (kv.type == GgufType::kArray && kv.count == bc && kv.key.starts_with(arch + ".") &&
               kv.elem_type != GgufType::kString && gguf_scalar_size(kv.elem_type) > 0) {
        Kv t = kv;
        t.count = bc - d;
        const uint64_t n = t.count;
        t.raw.resize(12 + gguf_scalar_size(kv.elem_type) * n);
        std::memcpy(t.raw.data() + 4, &n, 8);
        want = std::move(t);
        why = fmt::format("MTP dropped: a per-layer array loses the last {} (nextn) element(s)", d);
    }
    if (!want) return std::nullopt;
    return std::make_pair(std::move(*want), why);
}

// The provenance keys a build that carries them must carry, all of them.
void expect_provenance(const ShardSet& src, const KeptExperts& kept, std::deque<Kv>& owned,
                       std::vector<ExpectedKv>& exp) {
    const char* why = "the output carries provenance keys, so it must carry all of them";
    exp.push_back({kProvenanceVersionKey, Match::kVersion, nullptr, "a string \"gguf-reap <version>\""});
    owned.push_back(Kv::make_u32(kProvenanceSourceExpertCountKey,
                                 static_cast<uint32_t>(src.arch_uint("expert_count").value_or(0))));
    exp.push_back({kProvenanceSourceExpertCountKey, Match::kExact, &owned.back(),
                   fmt::format("{}; the source's expert_count", why)});
    exp.push_back({kProvenanceKeeplistShaKey, Match::kSha256, nullptr, "a sha256 in hex"});
    if (kept.dropped_nextn > 0) {
        owned.push_back(Kv::make_u32(kProvenanceDroppedNextnKey, static_cast<uint32_t>(kept.dropped_nextn)));
        exp.push_back({kProvenanceDroppedNextnKey, Match::kExact, &owned.back(),
                       "MTP dropped: the nextn blocks left out"});
    }
    for (int block : kept.moe_blocks)
        exp.push_back({fmt::format("{}{}", kProvenanceKeptPrefix, block), Match::kPresence, nullptr,
                       fmt::format("{}; one per MoE block", why)});
    if (kept.width) {
        owned.push_back(Kv::make_string(kProvenanceNeuronPlanShaKey, kept.width->sha256));
        exp.push_back(
            {kProvenanceNeuronPlanShaKey, Match::kExact, &owned.back(), "the sha256 of the neuron plan"});
        owned.push_back(
            Kv::make_u32(kProvenanceSourceExpertWidthKey, static_cast<uint32_t>(kept.width->native_width)));
        exp.push_back(
            {kProvenanceSourceExpertWidthKey, Match::kExact, &owned.back(), "the source's expert FFN width"});
    }
}

}  // namespace

void check_metadata(const ShardSet& src, const KeptExperts& kept, const OutputSet& out, AuditReport& report) {
    const Header& meta = src.metadata();
    const std::string ec_key = src.architecture() + ".expert_count";
    std::deque<Kv> owned;  // values made here; a deque, so that pointers into it stay valid
    // A width cut sets the expert width to K and, where the loader derives the shared width from it,
    // the shared-expert count to W / K.
    const std::vector<WidthKv> no_width;
    const std::vector<WidthKv>& width_kvs = kept.width ? kept.width->kvs : no_width;
    std::vector<ExpectedKv> exp;
    std::unordered_set<std::string> src_split;
    for (const Kv& kv : meta.kvs) {
        if (is_split_key(kv.key)) {
            src_split.insert(kv.key);
            // A split source's split.* keys are replaced in place; a single output drops them.
            if (out.multi()) exp.push_back({kv.key, Match::kSplit, nullptr, ""});
            continue;
        }
        // With provenance the build names itself, and its base model is the source (docs/splice.md, "Name
        // and base model"): the source's own base-model keys are not expected.
        if (kept.provenance && kv.key.starts_with(kBaseModelPrefix)) continue;
        if (kept.provenance && kv.key == kGeneralNameKey && kv.as_string()) {
            expect_name_and_base(src, kept, *kv.as_string(), owned, exp);
            continue;
        }
        // --drop-mtp: the nextn blocks are left out (docs/splice.md).
        if (kept.dropped_nextn > 0)
            if (auto want = mtp_dropped_kv(src, kept, kv)) {
                owned.push_back(std::move(want->first));
                exp.push_back({kv.key, Match::kExact, &owned.back(), want->second});
                continue;
            }
        if (kv.key == ec_key && !kept.valid) {
            exp.push_back({kv.key, Match::kPresence, nullptr, "the source has it"});
            continue;
        }
        if (kv.key == ec_key) {
            if (auto v = Kv::make_int_like(kv, kept.n)) {
                owned.push_back(std::move(*v));
                exp.push_back({kv.key, Match::kExact, &owned.back(),
                               fmt::format("expert_count of the source, {}, becomes the {} experts kept",
                                           kv.display(), kept.n)});
                // A source relying on the loader's fallback gets the width KVs right after expert_count.
                for (const auto& [key, value, why] : width_kvs)
                    if (!meta.find(key)) {
                        owned.push_back(Kv::make_u32(key, static_cast<uint32_t>(value)));
                        exp.push_back(
                            {key, Match::kExact, &owned.back(),
                             fmt::format("{} (added after expert_count: the source lacks it)", why)});
                    }
                continue;
            }
        }
        bool width_changed = false;
        for (const auto& [key, value, why] : width_kvs)
            if (kv.key == key)
                if (auto v = Kv::make_int_like(kv, value)) {
                    owned.push_back(std::move(*v));
                    exp.push_back({kv.key, Match::kExact, &owned.back(), why});
                    width_changed = true;
                }
        if (width_changed) continue;
        exp.push_back({kv.key, Match::kExact, &kv, "copied unchanged from the source"});
    }
    if (kept.provenance) expect_provenance(src, kept, owned, exp);
    if (out.multi())
        for (const char* k : kSplitKeys)
            if (!src_split.count(k)) exp.push_back({k, Match::kSplit, nullptr, ""});

    // Shard 1 holds the model's keys; shards 2..n the split.* keys and nothing else.
    std::vector<ExpectedKv> rest;
    for (const char* k : kSplitKeys) rest.push_back({k, Match::kSplit, nullptr, ""});
    const size_t meta_index = out.meta_index();
    for (size_t i = 0; i < out.shards.size(); ++i) {
        const OutShard& s = out.shards[i];
        if (!s.header) continue;
        check_version(s, meta, report);
        compare_kvs(s, i == meta_index ? exp : rest, report);
    }
}

}  // namespace gguf_reap::audit_detail
