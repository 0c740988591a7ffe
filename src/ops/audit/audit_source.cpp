// audit, step 2: what the output must be, rebuilt from the source, the output's own headers and the
// keeplist or provenance keys — never from splice's plan.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "format/ggml_types.h"
#include "gguf_reap/audit.h"
#include "gguf_reap/error.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/splice.h"
#include "gguf_reap/width.h"
#include "io/sha256.h"
#include "model/keeplist_file.h"
#include "model/width_rules.h"
#include "ops/audit/audit_internal.h"

namespace gguf_reap::audit_detail {

namespace {

std::string ids_string(const std::vector<int64_t>& ids) {
    return fmt::format("[{}]", fmt::join(ids, ", "));
}

// ---- provenance ----------------------------------------------------------------------------------

struct Provenance {
    bool present = false;     // any gguf_reap.* key
    bool well_formed = true;  // every gguf_reap.kept.* key is an array of u32 under a block number
    std::map<int, std::vector<int64_t>> kept;
    std::map<int, const Kv*> kept_kv;
    const Kv* keeplist_sha = nullptr;
};

Provenance read_provenance(const OutShard& first, std::vector<Finding>& findings) {
    Provenance p;
    for (const Kv& kv : first.header->kvs) {
        if (!kv.key.starts_with(kProvenancePrefix)) continue;
        p.present = true;
        if (kv.key == kProvenanceKeeplistShaKey) p.keeplist_sha = &kv;
        if (!kv.key.starts_with(std::string_view(kProvenanceKeptPrefix))) continue;
        const std::string_view num =
            std::string_view(kv.key).substr(std::string_view(kProvenanceKeptPrefix).size());
        int block = -1;
        auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), block);
        const std::string subject = fmt::format("kv '{}'", kv.key);
        if (ec != std::errc() || ptr != num.data() + num.size() || block < 0) {
            findings.push_back(make_finding(FindingKind::kKeeplist, first.path, subject, kv.file_offset,
                                            "provenance key does not end in a block number"));
            p.well_formed = false;
            continue;
        }
        if (kv.type != GgufType::kArray || kv.elem_type != GgufType::kUint32) {
            findings.push_back(make_finding(
                FindingKind::kKeeplist, first.path, subject, kv.file_offset + 8 + kv.key.size(),
                fmt::format("must be an array of u32 (the kept source expert ids), found {}",
                            kv.type == GgufType::kArray ? "arr[" + gguf_type_name(kv.elem_type) + "]"
                                                        : gguf_type_name(kv.type))));
            p.well_formed = false;
            continue;
        }
        std::vector<int64_t> ids(kv.count);
        for (uint64_t i = 0; i < kv.count; ++i) {
            uint32_t v;
            std::memcpy(&v, kv.raw.data() + 12 + 4 * i, 4);  // after i32 element type and u64 count
            ids[i] = v;
        }
        p.kept[block] = std::move(ids);
        p.kept_kv[block] = &kv;
    }
    return p;
}

void fill_from(const KeepList& kl, KeptExperts& k) {
    for (const auto& b : kl.blocks) k.blocks[b.block] = b.keep;
    k.n = kl.n_keep;
    k.valid = true;
}

}  // namespace

std::shared_ptr<const WidthAudit> derive_width(const ShardSet& src, const MoeLayout& layout,
                                               const OutputSet& out,
                                               const std::optional<std::string>& plan_path,
                                               AuditReport& report) {
    const OutShard& first = out.meta();
    const Kv* recorded = first.header ? first.header->find(kProvenanceNeuronPlanShaKey) : nullptr;
    const auto recorded_sha = recorded ? recorded->as_string() : std::nullopt;
    if (!plan_path) {
        if (recorded)
            throw RequestError({fmt::format("{}: was width-spliced with plan sha256 {}: pass ", first.path,
                                            recorded_sha.value_or(recorded->display())),
                                AuditOptions::kNeuronPlan,
                                " (the plan it was cut with) to verify its expert tensors"});
        // Without provenance keys a width cut still shows in the expert width: say what is missing
        // rather than report every expert tensor's shape.
        const std::string key = arch_key(src.architecture(), kExpertWidthKey);
        const Kv* out_kv = first.header ? first.header->find(key) : nullptr;
        const auto out_w = out_kv ? out_kv->as_uint() : std::nullopt;
        const auto src_w = src.arch_uint(std::string(kExpertWidthKey));
        if (out_w && src_w && *out_w < *src_w)
            throw RequestError(
                {fmt::format(
                     "{}: has {} = {} but the source has {}: it was width-spliced (without provenance "
                     "keys); pass ",
                     first.path, key, *out_w, *src_w),
                 AuditOptions::kNeuronPlan, " (the plan it was cut with) to verify its expert tensors"});
        return nullptr;
    }
    auto w = std::make_shared<WidthAudit>();
    const WidthRules rules = width_rules(src, layout);
    w->native_width = rules.native_width;
    std::vector<int> blocks;
    for (const auto& b : layout.blocks) blocks.push_back(b.block);
    w->plan =
        read_neuron_plan(*plan_path, blocks, static_cast<int64_t>(layout.expert_count), rules.native_width);
    check_width(rules, w->plan.k, src.shards().front().path);
    w->kvs = width_kvs(rules, w->plan.k);
    // Elements of a quantized row are whole blocks: only a plan of whole aligned groups of the block
    // size can have cut it byte-exactly. Each such plan is also kept in units of blocks.
    auto in_blocks = plan_in_row_blocks(rules, w->plan);
    if (const auto* partial = std::get_if<PartialRowBlock>(&in_blocks)) {
        const PartialBlock& p = partial->at;
        const int64_t bs = partial->block_size;
        throw UsageError(fmt::format(
            "{}: {} is {}, whose rows hold blocks of {} values, but {} keeps {} of the {} channels "
            "{}..{} "
            "of block {} expert {}: no width-spliced output of this source can have been cut by that "
            "plan byte-exactly",
            src.shards().front().path, partial->row_type->tensor, ggml_type_display(partial->row_type->type),
            bs, *plan_path, p.kept, bs, p.group * bs, p.group * bs + bs - 1, p.block, p.expert));
    }
    w->block_plans = std::move(std::get<std::map<int64_t, NeuronPlan>>(in_blocks));
    w->sha256 = sha256_file(*plan_path);
    if (recorded && recorded_sha != w->sha256)
        report.findings.push_back(make_finding(
            FindingKind::kKeeplist, first.path, fmt::format("kv '{}'", kProvenanceNeuronPlanShaKey),
            kv_value_offset(*recorded),
            fmt::format("the output was cut with plan sha256 {}, but {} has sha256 {}: another plan",
                        recorded_sha.value_or(recorded->display()), *plan_path, w->sha256)));
    report.neuron_plan = *plan_path;
    report.source_width = w->native_width;
    report.output_width = w->plan.k;
    return w;
}

namespace {

// The keeplist given against the provenance keys of an output that has them: a kept list that differs is
// a finding (another keeplist made it); the same lists under another sha256 are a note.
void check_against_provenance(const KeptExperts& k, const Provenance& prov, const OutShard& first,
                              const std::string& keeplist_path, AuditReport& report) {
    bool same = true;
    for (const auto& [block, keep] : k.blocks) {
        auto it = prov.kept.find(block);
        if (it == prov.kept.end()) continue;  // the metadata check names the missing key
        if (it->second == keep) continue;
        same = false;
        Finding f = make_finding(
            FindingKind::kKeeplist, first.path, fmt::format("kv 'gguf_reap.kept.{}'", block),
            kv_value_offset(*prov.kept_kv.at(block)),
            fmt::format("the output records block {} as keeping {} but the keeplist keeps {}: the output was "
                        "made from another keeplist",
                        block, ids_string(it->second), ids_string(keep)));
        report.findings.push_back(std::move(f));
    }
    const auto recorded = prov.keeplist_sha ? prov.keeplist_sha->as_string() : std::nullopt;
    if (same && recorded && *recorded != sha256_file(keeplist_path))
        report.notes.push_back(
            fmt::format("{} keeps the same experts as the output records, but its sha256 differs from "
                        "gguf_reap.keeplist_sha256 ({}): a reformatted copy?",
                        keeplist_path, *recorded));
}

}  // namespace

KeptExperts derive_kept(const ShardSet& source, const std::string& source_name, const MoeLayout& layout,
                        const OutputSet& out, const std::optional<std::string>& keeplist_path,
                        AuditReport& report) {
    KeptExperts k;
    const OutShard& first = out.meta();
    Provenance prov;
    if (first.header) prov = read_provenance(first, report.findings);
    k.provenance = prov.present;
    for (const auto& b : layout.blocks) k.moe_blocks.push_back(b.block);
    report.source_expert_count = layout.expert_count;

    if (keeplist_path) {
        // The user's claim: the output is exactly this keeplist applied to this source.
        KeepList kl = KeepList::load(*keeplist_path);
        if (std::string note =
                keeplist_applies_to(kl, *keeplist_path, keeplist_source_of(source, layout), source_name);
            !note.empty())
            report.notes.push_back("keeplist " + note);
        validate_keeplist(kl, layout, *keeplist_path);
        fill_from(kl, k);
        k.from = "keeplist";
        if (prov.present && prov.well_formed)
            check_against_provenance(k, prov, first, *keeplist_path, report);
    } else if (prov.present) {
        k.from = "provenance";
        if (!prov.well_formed) {
            report.notes.push_back("the provenance keys are malformed: expert tensors are not verified");
        } else {
            KeepList kl;
            for (const auto& [block, ids] : prov.kept) {
                KeepBlock b;
                b.block = block;
                b.keep = ids;
                kl.blocks.push_back(std::move(b));
            }
            try {
                validate_keeplist(kl, layout, "gguf_reap.kept.*");
                fill_from(kl, k);
            } catch (const UsageError& e) {
                report.findings.push_back(make_finding(
                    FindingKind::kKeeplist, first.path, "kv 'gguf_reap.kept.*'", std::nullopt,
                    fmt::format("the provenance keys do not describe a pruning of this source ({}); expert "
                                "tensors are not verified",
                                e.what())));
            }
        }
    } else if (!first.header) {
        report.notes.push_back(
            "shard 1's header is unreadable and no keeplist was given: the kept experts are "
            "unknown, so expert tensors are not verified");
    } else {
        // No record of a pruning: then the output must be the source's experts, all of them (a re-split
        // or a copy). Anything else needs the keeplist it was made from.
        const Kv* ec = first.header->find(layout.arch + ".expert_count");
        const auto n = ec ? ec->as_uint() : std::nullopt;
        if (!layout.blocks.empty() && !n) {
            // The metadata check names the missing key; without it nothing says which experts are kept.
            report.notes.push_back(
                fmt::format("{} carries no usable {}.expert_count and no provenance keys: expert "
                            "tensors are not verified",
                            first.path, layout.arch));
            report.kept_from = k.from;
            return k;
        }
        if (!layout.blocks.empty() && *n != layout.expert_count)
            throw RequestError(
                {fmt::format("{}: the output has {} experts per block, the source {}, and the output "
                             "carries no gguf_reap.kept.* keys (written with ",
                             first.path, *n, layout.expert_count),
                 SpliceOptions::kNoProvenance, "?): pass the keeplist it was made from with ",
                 AuditOptions::kKeeplist});
        k.valid = true;
        k.from = "unchanged";
        k.n = layout.expert_count;
        for (const auto& b : layout.blocks) {
            auto& ids = k.blocks[b.block];
            for (uint64_t e = 0; e < layout.expert_count; ++e) ids.push_back(static_cast<int64_t>(e));
        }
    }
    report.kept_from = k.from;
    if (k.valid) report.output_expert_count = k.n;
    // --drop-mtp
    if (layout.nextn_predict_layers > 0 && out.meta().header) {
        const Header& h = *out.meta().header;
        if (const Kv* d = h.find(kProvenanceDroppedNextnKey); d && d->as_uint()) {
            k.dropped_nextn = *d->as_uint();
        } else if (const Kv* bc = h.find(arch_key(layout.arch, kBlockCountKey));
                   bc && bc->as_uint() &&
                   *bc->as_uint() + layout.nextn_predict_layers == layout.block_count) {
            k.dropped_nextn = layout.nextn_predict_layers;
        }
    }
    return k;
}

}  // namespace gguf_reap::audit_detail
