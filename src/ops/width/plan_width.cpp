// plan-width (ops/plan_width.h): imatrix ffn_down_exps energies → the K channels every
// routed expert keeps → plan .npz + JSON receipt. Reads one MoE block at a time (E × width floats),
// straight from the imatrix files through a bounded buffer.
#include "gguf_reap/plan_width.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "format/imatrix.h"
#include "format/npz.h"
#include "gguf_reap/error.h"
#include "gguf_reap/width.h"
#include "io/output_file.h"
#include "io/output_lock.h"
#include "io/preflight.h"
#include "io/sha256.h"
#include "io/signals.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "model/width_rules.h"
#include "services/imatrix_domains.h"

namespace gguf_reap {

namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;
// Channel ids are stored as uint16 (the seed plan's dtype): ids 0..65535.
constexpr int64_t kMaxWidth = 65536;

struct Domain {
    const DomainSpec& spec;
    const ImatrixFile& im;
    const std::map<int, const ImatrixEntry*>& down;  // block → ffn_down_exps entry
};

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Adds one domain's rows of one block into `score` ([E][W], float32, in place); marks the experts
// that contributed energy. Validates what it reads: sums of squares are finite and non-negative.
void add_domain_block(const Domain& d, const ImatrixEntry& en, int64_t E, int64_t W,
                      std::vector<float>& score, std::vector<std::string>& notes) {
    const ImatrixFile& im = d.im;
    const bool legacy = im.kind() == ImatrixKind::kLegacy;
    std::vector<float> counts;
    if (!legacy) {
        counts = im.read_counts(en);
        for (size_t e = 0; e < counts.size(); ++e)
            if (!std::isfinite(counts[e]) || counts[e] < 0)
                throw InputError(im.path(), en.counts_offset + e * 4,
                                 fmt::format("entry '{}' count of expert {}", en.name, e),
                                 fmt::format("{} is not a token count", counts[e]));
    }
    const int64_t rows_per_read = std::max<int64_t>(1, static_cast<int64_t>(kBufferBytes / 4) / W);
    std::vector<float> buf(static_cast<size_t>(rows_per_read * W));
    std::vector<int64_t> dead;
    for (int64_t e0 = 0; e0 < E; e0 += rows_per_read) {
        check_interrupted();
        const int64_t n = std::min(rows_per_read, E - e0);
        im.read_values_range(en, static_cast<uint64_t>(e0 * W), static_cast<size_t>(n * W), buf.data());
        for (int64_t r = 0; r < n; ++r) {
            const int64_t e = e0 + r;
            const float* v = buf.data() + r * W;
            const uint64_t row_off = en.sums_offset + static_cast<uint64_t>(e * W) * 4;
            const std::string where = fmt::format("entry '{}' expert {}", en.name, e);
            const int64_t nans = std::count_if(v, v + W, [](float x) { return std::isnan(x); });
            // Legacy writers mark a never-routed expert as all NaN (before 2024-06) or as exactly ncall
            // in every channel (value 1 × ncall, count 1): it carries no energy, so it adds nothing.
            if (legacy && (nans == W || (en.ncall > 0 && std::all_of(v, v + W, [&](float x) {
                                             return x == static_cast<float>(en.ncall);
                                         })))) {
                dead.push_back(e);
                continue;
            }
            if (nans) throw InputError(im.path(), row_off, where, "holds NaN values");
            if (std::any_of(v, v + W, [](float x) { return !std::isfinite(x) || x < 0; }))
                throw InputError(im.path(), row_off, where,
                                 "holds negative or infinite values (sums of squares cannot be)");
            if (!legacy && counts[static_cast<size_t>(e)] == 0 &&
                std::any_of(v, v + W, [](float x) { return x != 0; }))
                throw InputError(im.path(), row_off, where,
                                 "has no routed tokens but non-zero energy (damaged imatrix?)");
            float* s = score.data() + e * W;
            for (int64_t c = 0; c < W; ++c) s[c] += v[c];
        }
    }
    if (!dead.empty())
        notes.push_back(fmt::format("{}: {} marks expert(s) {} as never routed; they add no energy",
                                    d.spec.name, en.name, fmt::join(dead, ", ")));
}

// {min, median, max} of shares; nulls when there are none (every expert unrouted).
nlohmann::ordered_json spread(const std::vector<double>& shares) {
    if (shares.empty()) return {{"min", nullptr}, {"median", nullptr}, {"max", nullptr}};
    return {{"min", *std::min_element(shares.begin(), shares.end())},
            {"median", median_of(shares)},
            {"max", *std::max_element(shares.begin(), shares.end())}};
}

nlohmann::ordered_json model_json(const ShardSet& m, const WidthRules& r, const std::string& path) {
    nlohmann::ordered_json shards = nlohmann::ordered_json::array();
    for (const Shard& s : m.shards())
        shards.push_back(
            {{"file", std::filesystem::path(s.path).filename().string()}, {"bytes", s.file->size()}});
    nlohmann::ordered_json j{{"path", path},
                             {"architecture", m.architecture()},
                             {"shards", shards},
                             {"width_key", r.width_key},
                             {"width_key_present", r.width_key_present},
                             {"block_size", r.block_size},
                             {"shared_width", r.shared_width},
                             {"shared_derived", r.shared_derived},
                             {"legal_widths", r.legal}};
    if (r.shared_derived) j["shared_count_key"] = r.shared_count_key;
    return j;
}

}  // namespace

std::vector<int32_t> top_channels(const float* score, int64_t n, int64_t k) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), 0);
    k = std::clamp<int64_t>(k, 0, n);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [score](int32_t a, int32_t b) {
        return score[a] != score[b] ? score[a] > score[b] : a < b;
    });
    ids.resize(static_cast<size_t>(k));
    return ids;
}

std::vector<int32_t> top_channel_groups(const float* score, int64_t n, int64_t k, int64_t group) {
    const int64_t groups = n / group;
    std::vector<double> sum(static_cast<size_t>(groups), 0.0);
    for (int64_t g = 0; g < groups; ++g)
        for (int64_t c = g * group; c < (g + 1) * group; ++c) sum[static_cast<size_t>(g)] += score[c];
    std::vector<int32_t> ids(static_cast<size_t>(groups));
    std::iota(ids.begin(), ids.end(), 0);
    const int64_t keep = std::clamp<int64_t>(k / group, 0, groups);
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), [&sum](int32_t a, int32_t b) {
        return sum[static_cast<size_t>(a)] != sum[static_cast<size_t>(b)]
                   ? sum[static_cast<size_t>(a)] > sum[static_cast<size_t>(b)]
                   : a < b;
    });
    ids.resize(static_cast<size_t>(keep));
    std::sort(ids.begin(), ids.end());
    std::vector<int32_t> channels;
    channels.reserve(static_cast<size_t>(keep * group));
    for (int32_t g : ids)
        for (int64_t c = 0; c < group; ++c) channels.push_back(static_cast<int32_t>(g * group + c));
    return channels;
}

std::string default_receipt_path(const std::string& plan_path) {
    const std::string ext = ".npz";
    if (plan_path.size() > ext.size() &&
        plan_path.compare(plan_path.size() - ext.size(), ext.size(), ext) == 0)
        return plan_path.substr(0, plan_path.size() - ext.size()) + ".json";
    return plan_path + ".json";
}

namespace {

// --model, when given: its MoE blocks, experts and width rules.
struct WidthModel {
    std::optional<ShardSet> set;
    MoeLayout layout;
    WidthRules rules;
};

// The options and the outputs, checked before anything is read: the plan and receipt paths, which
// must not exist (without --force) or be an input.
void check_request(const PlanWidthRequest& opts, PlanWidthResult& res) {
    if (opts.imatrices.empty())
        throw RequestError({"give at least one ", PlanWidthRequest::kImatrix, " NAME=FILE"});
    check_domain_names(opts.imatrices);
    if (opts.out.empty())
        throw RequestError({"give the plan file with ", PlanWidthRequest::kOut, " plan.npz"});
    res.plan_path = opts.out;
    res.receipt_path = opts.receipt.empty() ? default_receipt_path(opts.out) : opts.receipt;
    if (res.receipt_path == res.plan_path)
        throw RequestError({fmt::format("the receipt and the plan would both be {}: give ", res.plan_path),
                            PlanWidthRequest::kReceipt, " another name"});
    std::vector<std::string> inputs;
    for (const auto& d : opts.imatrices) inputs.push_back(d.path);
    for (const std::string& out : {res.plan_path, res.receipt_path}) {
        const auto id = file_identity(out);
        for (const auto& in : inputs)
            if (id && id == file_identity(in))
                throw UsageError(fmt::format("{} is an input ({}): refusing to write over it", out, in));
        if (!opts.force && path_exists(out))
            throw RequestError({out + " exists; use ", PlanWidthRequest::kForce, " to overwrite it"});
    }
    if (opts.granularity == Granularity::kBlock && opts.model.empty())
        throw RequestError({PlanWidthRequest::kGranularity, " block needs ", PlanWidthRequest::kModel,
                            ": the block size comes from the model's tensor types"});
}

WidthModel open_model(const PlanWidthRequest& opts, PlanWidthResult& res) {
    WidthModel m;
    if (opts.model.empty()) return m;
    m.set.emplace(ShardSet::open(opts.model));
    m.layout = build_moe_layout(*m.set);
    m.rules = width_rules(*m.set, m.layout);
    for (const auto& b : m.layout.blocks) res.blocks.push_back(b.block);
    res.expert_count = static_cast<int64_t>(m.layout.expert_count);
    res.native_width = m.rules.native_width;
    for (const Shard& s : m.set->shards())
        if (const auto id = file_identity(s.path))
            for (const std::string& out : {res.plan_path, res.receipt_path})
                if (id == file_identity(out))
                    throw UsageError(
                        fmt::format("{} is an input ({}): refusing to write over it", out, s.path));
    return m;
}

// Each imatrix's ffn_down_exps entries (services/imatrix_domains.h), and the experts and width of every
// entry, the same everywhere (and as in the model).
ImatrixDomains match_domains(const PlanWidthRequest& opts, const std::vector<ImatrixFile>& ims,
                             const WidthModel& model, PlanWidthResult& res) {
    const bool with_model = model.set.has_value();
    // "but MODEL has 16" / "but other entries have 16"
    const auto but = [&](int64_t v) {
        return with_model ? fmt::format("but {} has {}", opts.model, v)
                          : fmt::format("but other entries have {}", v);
    };
    ImatrixDomainChecks checks;
    checks.found = [&](size_t d, const std::map<int, const ImatrixEntry*>& down) {
        // GGUF entries state their expert count; legacy ones do not.
        if (!with_model && ims[d].kind() == ImatrixKind::kGguf && res.expert_count == 0)
            res.expert_count = down.begin()->second->n_mat;
    };
    checks.entry = [&](size_t d, size_t, int, const ImatrixEntry& e) {
        const DomainSpec& spec = opts.imatrices[d];
        const bool legacy = ims[d].kind() == ImatrixKind::kLegacy;
        if (legacy && res.expert_count == 0)
            throw RequestError(
                {fmt::format("{}: the legacy .dat format does not store the expert count of {}: give ",
                             spec.path, e.name),
                 PlanWidthRequest::kModel, " (or a GGUF imatrix of the same model)"});
        const int64_t E = legacy ? res.expert_count : e.n_mat;
        if (E < 1 || e.nval % E != 0)
            throw InputError(ims[d].path(), e.entry_offset, fmt::format("entry '{}'", e.name),
                             fmt::format("{} values cannot be split among {} experts", e.nval, E));
        if (E != res.expert_count)
            throw UsageError(fmt::format("{}: {} has {} experts, {}{}", spec.path, e.name, E,
                                         but(res.expert_count),
                                         with_model ? ": the imatrix was made for another model" : ""));
        const int64_t W = e.nval / E;
        if (res.native_width == 0) res.native_width = W;
        if (W != res.native_width)
            throw UsageError(fmt::format(
                "{}: {} has expert width {}, {}{}", spec.path, e.name, W, but(res.native_width),
                with_model ? (W < res.native_width ? ": was the imatrix made for a width-pruned model?"
                                                   : ": the imatrix was made for another model")
                           : ""));
    };
    const std::vector<int> model_blocks = res.blocks;
    ImatrixDomains found = match_imatrix_domains(ims, opts.imatrices, with_model ? &model_blocks : nullptr,
                                                 opts.model, res.notes, checks);
    res.blocks = found.blocks;
    if (res.native_width > kMaxWidth)
        throw UsageError(
            fmt::format("the expert width {} is too large for a plan: channel ids are stored as uint16, "
                        "so widths above {} cannot be written",
                        res.native_width, kMaxWidth));
    return found;
}

// K, checked against the model's width rules (or, without one, against the imatrices' width), and
// with block granularity the group B. Returns the tensors whose rows lose channels, with their block
// sizes ("blk.1.ffn_down_exps.weight Q8_0 (32)", once per type).
std::vector<std::string> choose_k(const PlanWidthRequest& opts, const WidthModel& model,
                                  PlanWidthResult& res) {
    res.k = opts.k;
    std::vector<std::string> block_sources;
    if (opts.granularity == Granularity::kBlock) {
        res.group = model.rules.block_size;
        for (const WidthRules::RowType& rt : model.rules.row_types)
            block_sources.push_back(fmt::format("{} {} ({})", rt.tensor, ggml_type_display(rt.type),
                                                ggml_type(rt.type)->block_size));
    }
    if (model.set) {
        check_width(model.rules, opts.k, opts.model);
    } else if (opts.k < 1 || opts.k > res.native_width) {
        throw RequestError(
            {fmt::format("K = {} is not a legal expert width for {}: {}; legal widths are 1 to {} (without ",
                         opts.k, opts.imatrices.front().path,
                         opts.k < 1
                             ? "an expert keeps at least one channel"
                             : fmt::format("it exceeds the imatrix's expert width {}", res.native_width),
                         res.native_width),
             PlanWidthRequest::kModel, " only this range is checked; give ", PlanWidthRequest::kModel,
             " to apply the block-size and shared-expert rules)"});
    }
    return block_sources;
}

// One block: the domains' energies summed, then every expert's top K channels (or groups) and the
// share of its energy they keep. Returns the block's line of the receipt.
nlohmann::ordered_json rank_block(const std::vector<Domain>& doms, size_t bi, bool by_block,
                                  PlanWidthResult& res, std::vector<float>& score) {
    const int64_t E = res.expert_count, W = res.native_width, K = res.k;
    const int b = res.blocks[bi];
    score.assign(static_cast<size_t>(E * W), 0.0f);
    for (const auto& d : doms)  // float32, in the order the domains were given
        if (auto it = d.down.find(b); it != d.down.end())
            add_domain_block(d, *it->second, E, W, score, res.notes);
    std::vector<double> kept_shares, channel_shares;
    std::vector<int64_t> unrouted;
    for (int64_t e = 0; e < E; ++e) {
        const float* s = score.data() + e * W;
        const size_t pair = bi * static_cast<size_t>(E) + static_cast<size_t>(e);
        const std::vector<int32_t> by_channel = top_channels(s, W, K);
        const std::vector<int32_t> top = by_block ? top_channel_groups(s, W, K, res.group) : by_channel;
        double total = 0, kept = 0, kept_by_channel = 0;
        for (int64_t c = 0; c < W; ++c) total += s[c];
        for (int32_t c : top) kept += s[c];
        for (int32_t c : by_channel) kept_by_channel += s[c];
        for (int32_t c : top) res.channels.push_back(static_cast<uint16_t>(c));
        if (total > 0) {
            res.retained[pair] = kept / total;
            kept_shares.push_back(kept / total);
            if (by_block) {
                res.retained_channel[pair] = kept_by_channel / total;
                channel_shares.push_back(kept_by_channel / total);
            }
        } else {
            // No energy in any domain: every score ties at 0, so the tie rule keeps channels 0..K-1.
            res.unrouted[pair] = 1;
            unrouted.push_back(e);
        }
    }
    nlohmann::ordered_json bj{{"block", b}};
    bj["energy_retained"] = spread(kept_shares);
    if (by_block) bj["energy_retained_by_channel"] = spread(channel_shares);
    bj["unrouted_experts"] = unrouted;
    return bj;
}

// Every block in turn (one block's E × width floats at a time). Returns the receipt's blocks.
nlohmann::ordered_json rank_channels(const std::vector<Domain>& doms, bool by_block, PlanWidthResult& res) {
    const size_t pairs = res.blocks.size() * static_cast<size_t>(res.expert_count);
    res.channels.reserve(pairs * static_cast<size_t>(res.k));
    res.retained.assign(pairs, std::numeric_limits<double>::quiet_NaN());
    if (by_block) res.retained_channel.assign(pairs, std::numeric_limits<double>::quiet_NaN());
    res.unrouted.assign(pairs, 0);
    nlohmann::ordered_json blocks_json = nlohmann::ordered_json::array();
    std::vector<float> score;
    for (size_t bi = 0; bi < res.blocks.size(); ++bi)
        blocks_json.push_back(rank_block(doms, bi, by_block, res, score));
    return blocks_json;
}

// The plan .npz (docs/formats.md).
void write_plan(bool by_block, const PlanWidthResult& res) {
    const int64_t E = res.expert_count, K = res.k;
    std::vector<int32_t> block_ids, expert_ids;
    for (int b : res.blocks)
        for (int64_t e = 0; e < E; ++e) {
            block_ids.push_back(b);
            expert_ids.push_back(static_cast<int32_t>(e));
        }
    const auto P = static_cast<int64_t>(res.blocks.size()) * E;
    std::vector<std::pair<std::string, NpyArray>> arrays{
        {"channels", NpyArray::u16({P, K}, res.channels)},
        {"k", NpyArray::i32({1}, {static_cast<int32_t>(K)})},
        {"block", NpyArray::i32({P}, block_ids)},
        {"expert", NpyArray::i32({P}, expert_ids)},
        {"energy_retained", NpyArray::f64({P}, res.retained)}};
    if (by_block) {
        arrays.emplace_back("group", NpyArray::i32({1}, {static_cast<int32_t>(res.group)}));
        arrays.emplace_back("energy_retained_by_channel", NpyArray::f64({P}, res.retained_channel));
    }
    write_npz(res.plan_path, arrays);
}

// With block granularity: the receipt's account of the groups, and why B.
nlohmann::ordered_json granularity_json(const PlanWidthResult& res,
                                        const std::vector<std::string>& block_sources) {
    return {
        {"unit", "block"},
        {"group", res.group},
        {"rule", fmt::format("aligned groups of {} channels [g*{}, (g+1)*{}) ranked by their summed score "
                             "(double, channel order) descending, ties by group index ascending; the "
                             "best k/{} = {} kept; channels stored ascending",
                             res.group, res.group, res.group, res.group, res.k / res.group)},
        {"block_size_from", block_sources},
        {"why", fmt::format("{} is the least common multiple of the block sizes of the tensors whose "
                            "rows lose channels: a plan of whole groups keeps whole quant blocks, so "
                            "splice cuts it without requantising",
                            res.group)}};
}

// The JSON receipt (res.receipt), after the plan: `plan_written` false when the plan could not be
// written, and the receipt then records no plan file.
void build_receipt(const PlanWidthRequest& opts, const std::vector<Domain>& doms, const WidthModel& model,
                   const std::vector<std::string>& block_sources, nlohmann::ordered_json blocks_json,
                   bool plan_written, PlanWidthResult& res) {
    const bool by_block = opts.granularity == Granularity::kBlock;
    nlohmann::ordered_json ins = nlohmann::ordered_json::array();
    for (const auto& d : doms)
        ins.push_back({{"name", d.spec.name},
                       {"path", d.spec.path},
                       {"format", imatrix_kind_name(d.im.kind())},
                       {"bytes", d.im.file().size()},
                       {"sha256", sha256_file(d.im.file())}});
    size_t n_unrouted = 0;
    for (uint8_t u : res.unrouted) n_unrouted += u;
    nlohmann::ordered_json& j = res.receipt;
    j["format"] = "gguf-reap width plan receipt";
    j["version"] = 1;
    j["tool"] = opts.tool_version;
    if (plan_written) {
        const auto plan_file = InputFile::open(res.plan_path);
        j["plan"] = {
            {"path", res.plan_path}, {"bytes", plan_file->size()}, {"sha256", sha256_file(*plan_file)}};
    } else {
        j["plan"] = {{"path", res.plan_path}, {"bytes", nullptr}, {"sha256", nullptr}};
    }
    j["k"] = res.k;
    j["native_width"] = res.native_width;
    j["expert_count"] = res.expert_count;
    j["pairs"] = res.blocks.size() * static_cast<size_t>(res.expert_count);
    j["score"] =
        "ffn_down_exps in_sum2 summed over the domains as float32 in the order given; channels ranked by "
        "score descending, ties by channel id ascending; the top k kept";
    if (by_block) j["granularity"] = granularity_json(res, block_sources);
    j["inputs"] = ins;
    j["model"] =
        model.set ? model_json(*model.set, model.rules, opts.model) : nlohmann::ordered_json(nullptr);
    j["unrouted_pairs"] = n_unrouted;
    j["blocks"] = std::move(blocks_json);
    j["notes"] = res.notes;
}

// Written after the plan: its presence says the plan is complete.
void write_receipt(const PlanWidthResult& res) {
    const std::string text = res.receipt.dump(2) + "\n";
    OutputFile out(res.receipt_path);
    out.write_at(0, text.data(), text.size());
    out.commit();
}

}  // namespace

PlanWidthResult ops::plan_width(const PlanWidthRequest& opts, const Events& events) {
    PlanWidthResult res;
    const bool by_block = opts.granularity == Granularity::kBlock;
    check_request(opts, res);  // before anything is read
    // Both outputs locked, and a temporary of each made and removed: a directory nobody can write to
    // fails now, before the imatrices are read.
    for (const std::string& p : {res.plan_path, res.receipt_path}) OutputFile(p).discard();
    const OutputLock lock(res.plan_path);
    const WidthModel model = open_model(opts, res);  // --model: blocks, experts, width rules
    const std::vector<ImatrixFile> ims = open_imatrices(opts.imatrices, 0);
    const ImatrixDomains found = match_domains(opts, ims, model, res);
    std::vector<Domain> doms;
    for (size_t d = 0; d < ims.size(); ++d) doms.push_back({opts.imatrices[d], ims[d], found.down[d]});
    const std::vector<std::string> block_sources = choose_k(opts, model, res);
    nlohmann::ordered_json blocks_json = rank_channels(doms, by_block, res);  // block by block
    // The plan, then its receipt. The work is done: a failure to write either still leaves the results
    // to print (PlanWidthResult::write_error).
    bool plan_written = false;
    try {
        write_plan(by_block, res);
        plan_written = true;
    } catch (const Error&) {
        res.write_error = std::current_exception();
    }
    build_receipt(opts, doms, model, block_sources, std::move(blocks_json), plan_written, res);
    if (plan_written) {
        try {
            write_receipt(res);
        } catch (const Error&) {
            res.write_error = std::current_exception();
        }
    }
    for (const auto& n : res.notes) events.info(n);
    return res;
}

}  // namespace gguf_reap
