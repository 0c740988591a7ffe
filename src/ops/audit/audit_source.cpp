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
#include "gguf_reap/error.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/width.h"
#include "io/sha256.h"
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
                                RequestField::kNeuronPlan,
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
                 RequestField::kNeuronPlan, " (the plan it was cut with) to verify its expert tensors"});
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
        if (prov.present && prov.well_formed) {
            bool same = true;
            for (const auto& [block, keep] : k.blocks) {
                auto it = prov.kept.find(block);
                if (it == prov.kept.end()) continue;  // the metadata check names the missing key
                if (it->second == keep) continue;
                same = false;
                Finding f = make_finding(
                    FindingKind::kKeeplist, first.path, fmt::format("kv 'gguf_reap.kept.{}'", block),
                    kv_value_offset(*prov.kept_kv[block]),
                    fmt::format(
                        "the output records block {} as keeping {} but the keeplist keeps {}: the output was "
                        "made from another keeplist",
                        block, ids_string(it->second), ids_string(keep)));
                report.findings.push_back(std::move(f));
            }
            const auto recorded = prov.keeplist_sha ? prov.keeplist_sha->as_string() : std::nullopt;
            if (same && recorded && *recorded != sha256_file(*keeplist_path))
                report.notes.push_back(fmt::format(
                    "{} keeps the same experts as the output records, but its sha256 differs from "
                    "gguf_reap.keeplist_sha256 ({}): a reformatted copy?",
                    *keeplist_path, *recorded));
        }
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
                 RequestField::kNoProvenance, "?): pass the keeplist it was made from with ",
                 RequestField::kKeeplist});
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

namespace {

// deepseek4's token → expert table (services/hash_routing.h states the rewrite): every entry that named a
// kept expert names its new index; every entry that named a pruned one names a kept expert; no row
// names an expert twice. Read whole from both files (a few MB), compared here.
void check_hash_table(const ShardSet& src, const TensorRef& sref, const OutShard& s, const TensorInfo& t,
                      const std::vector<int64_t>& keep, AuditReport& report) {
    std::vector<int32_t> before(sref.nbytes / 4), after(before.size());
    src.shards()[sref.shard].file->read(sref.abs_offset, before.data(), 4 * before.size());
    const uint64_t at = s.header->data_start + t.offset;
    s.file->read(at, after.data(), 4 * after.size());
    std::vector<int32_t> new_index;
    for (size_t k = 0; k < keep.size(); ++k) {
        if (new_index.size() <= static_cast<size_t>(keep[k]))
            new_index.resize(static_cast<size_t>(keep[k]) + 1, -1);
        new_index[static_cast<size_t>(keep[k])] = static_cast<int32_t>(k);
    }
    const auto row = static_cast<size_t>(t.ne[0]);
    const auto n = static_cast<int32_t>(keep.size());
    size_t bad = 0;
    std::optional<std::pair<size_t, std::string>> first;
    for (size_t base = 0; row > 0 && base + row <= after.size(); base += row)
        for (size_t j = 0; j < row; ++j) {
            const size_t i = base + j;
            const int32_t was = before[i], is = after[i];
            const int32_t want = was >= 0 && static_cast<size_t>(was) < new_index.size()
                                     ? new_index[static_cast<size_t>(was)]
                                     : -1;
            std::string why;
            if (is < 0 || is >= n)
                why = fmt::format("names expert {}, outside the {} kept", is, n);
            else if (want >= 0 && is != want)
                why = fmt::format("names {}, but source expert {} is kept as {}", is, was, want);
            else
                for (size_t k = 0; k < j; ++k)
                    if (after[base + k] == is) why = fmt::format("names expert {} twice in the row", is);
            if (why.empty()) continue;
            ++bad;
            if (!first) first = std::make_pair(i, fmt::format("token {} slot {} {}", base / row, j, why));
        }
    if (!first) {
        ++report.summary.hash_tables;
        return;
    }
    Finding f =
        make_finding(FindingKind::kData, s.path, fmt::format("tensor '{}'", t.name), at + 4 * first->first,
                     fmt::format("{} of {} token → expert entries are wrong; the first: {}", bad,
                                 after.size(), first->second));
    f.tensor = t.name;
    f.region = "hash routing table";
    report.findings.push_back(std::move(f));
}

// ---- tensor infos ---------------------------------------------------------------------------------

// The source's tensors that are not copied whole: expert-indexed ones with their block, and deepseek4's
// token → expert tables.
struct ExpertOf {
    int block;
    const ExpertTensor* et;
};
struct SourceRoles {
    std::unordered_map<size_t, ExpertOf> expert_of;
    std::unordered_map<size_t, int> hash_table_of;  // deepseek4: source tensor → its block
};

SourceRoles source_roles(const MoeLayout& layout) {
    SourceRoles roles;
    for (const auto& b : layout.blocks) {
        for (const auto& et : b.tensors) roles.expert_of.emplace(et.tensor, ExpertOf{b.block, &et});
        if (b.hash_table) roles.hash_table_of.emplace(*b.hash_table, b.block);
    }
    return roles;
}

// An output tensor paired with its source tensor, in output order.
struct Placed {
    size_t src_index;
    const OutShard* shard;
    const TensorInfo* info;
};

void info_finding(AuditReport& report, const OutShard& s, const TensorInfo& t, std::string msg) {
    Finding f = make_finding(FindingKind::kTensorInfo, s.path, fmt::format("tensor '{}'", t.name),
                             t.info_offset, std::move(msg));
    f.tensor = t.name;
    report.findings.push_back(std::move(f));
}

// The source tensor an output tensor stands for, or null: not in the source (a finding), or a
// duplicate (named by the structure check).
const TensorRef* pair_with_source(const ShardSet& src, const OutShard& s, const TensorInfo& t,
                                  std::vector<bool>& paired, std::vector<Placed>& order,
                                  AuditReport& report) {
    const TensorRef* r = src.find_tensor(t.name);
    if (!r) {
        info_finding(report, s, t,
                     "not in the source: pruning removes experts, never tensors, and adds none");
        return nullptr;
    }
    const size_t g = static_cast<size_t>(r - src.tensors().data());
    if (paired[g]) return nullptr;
    paired[g] = true;
    order.push_back({g, &s, &t});
    return r;
}

// What the source says an output tensor's info must be.
struct WantedInfo {
    const TensorInfo* source;
    const ExpertOf* expert;  // null: not expert-indexed
    std::array<int64_t, 4> ne;
    std::optional<std::pair<int, int64_t>> cut;  // width axis and its length
};

WantedInfo wanted_info(const TensorInfo& S, const ExpertOf* ex, const KeptExperts& kept,
                       const TensorInfo& t) {
    WantedInfo w{&S, ex, S.ne, std::nullopt};
    if (ex) {
        // With the kept experts unknown the expert axis can be anything; the rest must match.
        const ExpertTensorKind& kind = *ex->et->kind;
        const auto axis = static_cast<size_t>(kind.expert_axis);
        w.ne[axis] = kept.valid ? static_cast<int64_t>(kept.n) : t.ne[axis];
        if (kept.width && kind.width_cut())
            w.cut = std::make_pair(kind.width_axis, kind.width_factor * kept.width->plan.k);
        if (w.cut) w.ne[static_cast<size_t>(w.cut->first)] = w.cut->second;
    }
    return w;
}

// Type, n_dims and shape against the wanted ones; false when the bytes cannot be compared.
bool info_matches(const WantedInfo& w, const OutShard& s, const TensorInfo& t, const MoeLayout& layout,
                  const KeptExperts& kept, AuditReport& report) {
    const TensorInfo& S = *w.source;
    bool ok = true;
    if (t.type != S.type) {
        info_finding(report, s, t,
                     fmt::format("has type {}, the source has {} (pruning never requantises)",
                                 ggml_type_display(t.type), ggml_type_display(S.type)));
        ok = false;
    }
    if (t.n_dims != S.n_dims)
        info_finding(report, s, t, fmt::format("has n_dims {}, the source has {}", t.n_dims, S.n_dims));
    if (t.ne != w.ne) {
        TensorInfo shown = S;
        shown.ne = w.ne;
        info_finding(report, s, t,
                     fmt::format("has shape {}, expected {}{}", shape_string(t), shape_string(shown),
                                 w.expert ? fmt::format(" ({} of the source's {} experts kept on axis {}{})",
                                                        kept.n, layout.expert_count, w.expert->et->axis(),
                                                        w.cut ? fmt::format(", {} channels on axis {}",
                                                                            kept.width->plan.k, w.cut->first)
                                                              : std::string())
                                          : std::string(" (as in the source)")));
        ok = false;
    }
    return ok;
}

// How one kept expert's bytes of a width-cut tensor are gathered from its source slab: rows c (gate/up;
// a fused gate_up rows c then n_ff + c) or elements c of every row (down, gate/up biases). Sets
// `out_slab` to the bytes of one output expert.
std::shared_ptr<WidthGather> width_gather(const ExpertTensor& et, const TensorInfo& S, int block,
                                          const KeptExperts& kept, uint64_t& out_slab) {
    const WidthAudit& w = *kept.width;
    auto g = std::make_shared<WidthGather>();
    g->elements = et.kind->width_cuts_inside_rows();
    g->factor = et.kind->width_factor;
    g->n_ff = w.native_width;
    g->k = w.plan.k;
    g->width = kept.width;
    g->plan = &w.plan;
    g->block_index = static_cast<size_t>(std::lower_bound(w.plan.blocks.begin(), w.plan.blocks.end(), block) -
                                         w.plan.blocks.begin());
    if (g->elements) {
        g->unit = static_cast<uint64_t>(ggml_type(S.type)->type_size);
        if (const int64_t bs = ggml_type(S.type)->block_size; bs > 1) {
            g->values = bs;
            g->n_ff /= bs;
            g->k /= bs;
            g->plan = &w.block_plans.at(bs);
        }
        g->rows = et.axis() == 1 ? 1 : S.ne[1];  // a bias [n_ff, E] is one row per expert
        out_slab = g->unit * static_cast<uint64_t>(g->factor * g->k * g->rows);
    } else {
        g->unit = *ggml_row_size(S.type, S.ne[0]);
        out_slab = g->unit * static_cast<uint64_t>(g->factor * g->k);
    }
    return g;
}

// An expert-indexed tensor's bytes: output expert k is source expert kept[k]'s slab, whole or cut.
TensorExpect expert_runs(const TensorRef& r, const WantedInfo& w, const KeptExperts& kept) {
    TensorExpect te;
    const ExpertTensor& et = *w.expert->et;
    const auto kb = kept.blocks.find(w.expert->block);
    if (kb == kept.blocks.end() || et.slab == 0) return te;
    uint64_t out_slab = et.slab;
    if (w.cut) te.gather = width_gather(et, *w.source, w.expert->block, kept, out_slab);
    for (size_t k = 0; k < kb->second.size(); ++k) {
        const int64_t e = kb->second[k];
        te.runs.push_back(
            {r.shard, r.abs_offset + static_cast<uint64_t>(e) * et.slab, out_slab, static_cast<int64_t>(k), e,
             w.cut ? (te.gather->elements ? "kept columns" : "kept rows") : expert_role_region(et.role()),
             te.gather.get()});
    }
    return te;
}

// What an output tensor's bytes must equal: the source tensor, its kept experts' slabs, or nothing
// here (a hash-routing table, whose rewritten values are checked now).
TensorExpect expected_bytes(const ShardSet& src, const SourceRoles& roles, const TensorRef& r, size_t g,
                            const WantedInfo& w, const OutShard& s, const TensorInfo& t,
                            const KeptExperts& kept, AuditReport& report) {
    if (const auto h = roles.hash_table_of.find(g); h != roles.hash_table_of.end()) {
        // Its values are rewritten, not copied: checked here, not in the byte pass.
        if (kept.valid) check_hash_table(src, r, s, t, kept.blocks.at(h->second), report);
        return {};
    }
    if (!w.expert) {
        TensorExpect te;
        if (w.source->nbytes > 0)
            te.runs.push_back({r.shard, r.abs_offset, w.source->nbytes, -1, -1, "tensor data"});
        return te;
    }
    return kept.valid ? expert_runs(r, w, kept) : TensorExpect{};
}

// Missing tensors: only meaningful when every shard was read (a missing shard is named already).
void check_missing(const ShardSet& src, const MoeLayout& layout, const KeptExperts& kept,
                   const OutputSet& out, const std::vector<bool>& paired, AuditReport& report) {
    const auto& refs = src.tensors();
    if (!out.complete()) {
        size_t missing = 0;
        for (bool p : paired) missing += p ? 0 : 1;
        if (missing)
            report.notes.push_back(
                fmt::format("{} source tensors were not found in the readable output shards", missing));
        return;
    }
    for (size_t g = 0; g < refs.size(); ++g) {
        if (paired[g]) continue;
        const TensorInfo& S = src.info(refs[g]);
        if (kept.dropped_nextn > 0)  // --drop-mtp: the nextn blocks' tensors are meant to be absent
            if (const auto split = split_block_name(S.name); split && layout.is_nextn_block(split->first))
                continue;
        Finding f = make_finding(FindingKind::kTensorInfo, out.shards.front().path,
                                 fmt::format("tensor '{}'", S.name), std::nullopt,
                                 fmt::format("missing from the output (the source has it in {})",
                                             base_name(src.shards()[refs[g].shard].path)));
        f.tensor = S.name;
        report.findings.push_back(std::move(f));
    }
}

// Order: tensors keep the source's global order (shards may be cut elsewhere). The first out of place
// is named.
void check_order(const ShardSet& src, const std::vector<Placed>& order, AuditReport& report) {
    std::vector<size_t> sorted;
    sorted.reserve(order.size());
    for (const auto& p : order) sorted.push_back(p.src_index);
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < order.size(); ++i) {
        if (order[i].src_index == sorted[i]) continue;
        Finding f =
            make_finding(FindingKind::kTensorInfo, order[i].shard->path,
                         fmt::format("tensor '{}'", order[i].info->name), order[i].info->info_offset,
                         fmt::format("tensor order differs from the source: '{}' stands where the source has "
                                     "'{}' (splice keeps the source's tensor order)",
                                     order[i].info->name, src.info(src.tensors()[sorted[i]]).name));
        f.tensor = order[i].info->name;
        report.findings.push_back(std::move(f));
        break;
    }
}

}  // namespace

Expectations check_tensor_infos(const ShardSet& src, const MoeLayout& layout, const KeptExperts& kept,
                                const OutputSet& out, AuditReport& report) {
    const SourceRoles roles = source_roles(layout);
    Expectations exp(out.shards.size());
    std::vector<bool> paired(src.tensors().size(), false);
    std::vector<Placed> order;
    for (size_t si = 0; si < out.shards.size(); ++si) {
        const OutShard& s = out.shards[si];
        if (!s.header) continue;
        exp[si].resize(s.header->tensors.size());
        for (size_t ti = 0; ti < s.header->tensors.size(); ++ti) {
            const TensorInfo& t = s.header->tensors[ti];
            const TensorRef* r = pair_with_source(src, s, t, paired, order, report);
            if (!r) continue;
            const size_t g = static_cast<size_t>(r - src.tensors().data());
            const auto ex = roles.expert_of.find(g);
            const WantedInfo w =
                wanted_info(src.info(*r), ex != roles.expert_of.end() ? &ex->second : nullptr, kept, t);
            if (!info_matches(w, s, t, layout, kept, report)) continue;
            exp[si][ti] = expected_bytes(src, roles, *r, g, w, s, t, kept, report);
        }
    }
    check_missing(src, layout, kept, out, paired, report);
    check_order(src, order, report);
    return exp;
}

}  // namespace gguf_reap::audit_detail
