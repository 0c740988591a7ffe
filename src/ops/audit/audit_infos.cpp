// audit, step 2 (continued): every output tensor's info held against the source tensor it comes from, and
// the bytes it must then hold (Expectations); deepseek4's token → expert tables compared whole.
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
