// rank, step 4: what the decision is written as — the keeplist's provenance, ranking.npz and the JSON
// summary, and the three files written (the receipt's text is rank_receipt.cpp). No decision is made
// here.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <system_error>

#include <fmt/format.h>

#include "format/npz.h"
#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "gguf_reap/version.h"
#include "io/input_file.h"
#include "io/output_file.h"
#include "io/parallel.h"
#include "io/paths.h"
#include "io/upload_path.h"
#include "ops/rank/criteria.h"
#include "ops/rank/rank_lodo.h"
#include "ops/rank/rank_steps.h"
#include "services/budget_search.h"
#include "services/llama_cpp/llama_tools.h"

namespace gguf_reap {

// A keeplist names a request field as "--" and the field's name: the rule "--ratio 0.25", the reason
// "--protect" (docs/keeplist.md). It is the file's spelling, whoever calls rank.
std::string keeplist_field(RequestField f) {
    return "--" + std::string(f.name);
}

std::string rule_text(const RankDecision& r) {
    return render(rule_message(r), keeplist_field);
}

namespace {

using json = nlohmann::ordered_json;

json opt_json(const std::optional<uint64_t>& v) {
    return v ? json(*v) : json(nullptr);
}
json num_or_null(double v) {
    return std::isfinite(v) ? json(v) : json(nullptr);
}

std::string fmt_rank(double v) {
    return v == std::floor(v) ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v);
}

json worst_json(const RankInput& in, const RankDecision& r) {
    if (std::isnan(r.worst_share)) return nullptr;
    return {{"domain", in.domains[r.worst_domain].name},
            {"block", r.blocks[r.worst_block]},
            {"retained_share", r.worst_share}};
}

}  // namespace

const char* const kTieRule =
    "per domain, equal scores rank the lower expert id better; in the consensus, ties are broken by the "
    "sorted "
    "vector of per-domain ranks compared lexicographically, then by the lower expert id";

std::pair<double, size_t> worst_retained_share(const RankDecision& r, size_t d) {
    const size_t B = r.blocks.size();
    std::pair<double, size_t> w{std::numeric_limits<double>::quiet_NaN(), 0};
    for (size_t b = 0; b < B; ++b) {
        const double x = r.retained_share[d * B + b];
        if (!std::isnan(x) && (std::isnan(w.first) || x < w.first)) w = {x, b};
    }
    return w;
}

const char* consensus_text(Consensus c) {
    switch (c) {
        case Consensus::kMinRank:
            return "each expert is scored by its rank in its single most favourable domain; the experts "
                   "pruned are "
                   "those that no domain ranks well";
        case Consensus::kMeanRank:
            return "mean of the expert's ranks over the domains";
        case Consensus::kSum:
            return "per-domain scores normalised to shares of the block, summed";
        case Consensus::kPooled: {
            static const std::string pooled =
                fmt::format("raw counts and sums added across domains ({}), then scored",
                            llama_cpp::imatrix_merge_words());
            return pooled.c_str();
        }
        case Consensus::kMaxMin:
            return "per block, the kept set that maximises the worst domain's retained share of the "
                   "criterion's mass (then the second worst, ...), found by backward elimination and "
                   "swaps, never below the min-rank set (docs/method.md)";
    }
    return "";
}

std::string safety_margin_sentence(int64_t best_pruned_rank, int64_t expert_count, double median_layer,
                                   int block, int64_t expert, const std::string& domain) {
    if (best_pruned_rank == 0) return "no expert is pruned";
    std::string s = fmt::format(
        "no pruned expert ranks better than {} of {} in any domain, in any layer (median layer: {})",
        best_pruned_rank, expert_count, fmt_rank(median_layer));
    if (block >= 0 && expert >= 0 && !domain.empty())
        s += fmt::format("; the closest to being kept is blk.{} expert {}, ranked {} in {}", block, expert,
                         best_pruned_rank, domain);
    return s;
}

std::string safety_margin_sentence(const RankDecision& r) {
    return safety_margin_sentence(r.safety_rank, r.expert_count, r.safety_median, r.safety_block,
                                  r.safety_expert, r.safety_domain);
}

json rank_method_json(const RankInput& in, const RankDecision& r) {
    json m;
    m["tool"] = "gguf-reap rank";
    m["tool_version"] = GGUF_REAP_VERSION_STRING;
    m["criterion"] = criterion_name(r.criterion);
    if (in.imported)
        m["from_plan"] = {
            {"path", input_name(in.imported->path)},
            {"format", plan_format_name(in.imported->plan.format)},
            {"sha256", in.imported->sha256.empty() ? json(nullptr) : json(in.imported->sha256)}};
    if (criterion_spec(r.criterion).needs.score_files) {
        m["score_field"] = in.score_field;
        if (in.score_is_mean) m["score_aggregate"] = in.score_times_counts ? "sum" : "mean";
    }
    m["consensus"] = consensus_name(r.consensus);
    m["rule"] = rule_text(r);
    if (r.fit) m["fit"] = fit_json(*r.fit);
    m["tie_break"] = kTieRule;
    m["super_expert"] = {{"share_threshold", r.super_share},
                         {"channel_ratio_threshold", r.super_channel_ratio}};
    json doms = json::array();
    for (const auto& d : in.domains) {
        json o;
        o["name"] = d.name;
        // Files meant for upload name no local directory (a URL as given, an hf:// one at its commit).
        o["file"] = input_name(d.path);
        o["format"] = d.format;
        o["size"] = d.file_size;
        o["sha256"] = d.sha256.empty() ? json(nullptr) : json(d.sha256);
        o["datasets"] = upload_names(d.datasets);
        o["chunks"] = opt_json(d.chunks);
        o["chunk_size"] = opt_json(d.chunk_size);
        o["tokens"] = opt_json(d.tokens);
        if (d.calibration) {
            const CalibrationRecord& c = *d.calibration;
            o["calibration"] = {{"calibrate_json", input_name(c.json_path)},
                                {"text", base_name(c.text_path)},
                                {"text_sha256", c.text_sha256},
                                {"text_tokens", c.tokens},
                                {"used_sha256", c.used_sha256},
                                {"used_tokens", c.used_tokens},
                                {"chunks", c.chunks},
                                {"ctx", c.ctx},
                                {"command", upload_names(c.command)},
                                {"llama_args", c.llama_args},
                                {"llama_build", c.llama_build}};
        }
        doms.push_back(o);
    }
    m["domains"] = doms;
    if (!in.plan_path.empty())
        m["neuron_plan"] = {{"file", input_name(in.plan_path)},
                            {"sha256", in.plan_sha256.empty() ? json(nullptr) : json(in.plan_sha256)},
                            {"k", in.plan_k}};
    m["safety_margin"] = {{"best_pruned_rank", r.safety_rank},
                          {"of", r.expert_count},
                          {"median_layer", r.safety_median},
                          {"block", r.safety_block >= 0 ? json(r.safety_block) : json(nullptr)},
                          {"expert", r.safety_expert >= 0 ? json(r.safety_expert) : json(nullptr)},
                          {"domain", r.safety_domain.empty() ? json(nullptr) : json(r.safety_domain)}};
    m["blind_spot"] = blind_spot_json(in, r);
    return m;
}

json rank_summary_json(const RankInput& in, const RankDecision& r) {
    json j;
    j["expert_count"] = r.expert_count;
    j["n_keep"] = r.n_keep;
    j["rule"] = rule_text(r);
    if (r.fit) j["fit"] = fit_json(*r.fit);
    j["criterion"] = criterion_name(r.criterion);
    j["consensus"] = consensus_name(r.consensus);
    j["blocks"] = r.blocks;
    json doms = json::array();
    for (size_t d = 0; d < in.domains.size(); ++d) {
        const auto& dom = in.domains[d];
        doms.push_back({{"name", dom.name},
                        {"file", dom.path},
                        {"format", dom.format},
                        {"sha256", dom.sha256.empty() ? json(nullptr) : json(dom.sha256)},
                        {"pruned_token_share", num_or_null(r.pruned_token_share[d])},
                        {"pruned_energy_share", num_or_null(r.pruned_energy_share[d])},
                        {"worst_retained_share", num_or_null(worst_retained_share(r, d).first)}});
    }
    j["domains"] = doms;
    j["worst_domain"] = worst_json(in, r);
    json per = json::array();
    for (size_t b = 0; b < r.blocks.size(); ++b) {
        const KeepBlock& kb = r.keeplist.blocks[b];
        json o{{"block", kb.block},
               {"keep", kb.keep},
               {"prune", kb.prune},
               {"dead", kb.dead},
               {"best_pruned_rank", r.best_pruned_rank[b]}};
        if (!in.plan_path.empty()) {
            json sp = json::array();
            for (size_t d = 0; d < in.domains.size(); ++d)
                sp.push_back(num_or_null(r.spearman[d * r.blocks.size() + b]));
            o["spearman_restricted_vs_full"] = sp;
        }
        per.push_back(o);
    }
    j["per_block"] = per;
    json dead = json::array();
    for (const auto& d : r.dead_experts)
        dead.push_back({{"block", d.block}, {"expert", d.expert}, {"reason", d.reason}});
    j["dead"] = dead;
    json prot = json::array();
    for (const auto& p : r.protected_experts)
        prot.push_back({{"block", p.block},
                        {"expert", p.expert},
                        {"share", p.share},
                        {"share_domain", p.share_domain},
                        {"channel_ratio", p.channel_ratio},
                        {"by_share", p.by_share},
                        {"by_channel", p.by_channel},
                        {"by_option", p.by_option},
                        {"reason", p.reason}});
    j["protected"] = prot;
    j["safety_margin"] = {{"best_pruned_rank", r.safety_rank},
                          {"of", r.expert_count},
                          {"median_layer", r.safety_median},
                          {"block", r.safety_block >= 0 ? json(r.safety_block) : json(nullptr)},
                          {"expert", r.safety_expert >= 0 ? json(r.safety_expert) : json(nullptr)},
                          {"domain", r.safety_domain.empty() ? json(nullptr) : json(r.safety_domain)},
                          {"sentence", safety_margin_sentence(r)}};
    j["blind_spot"] = blind_spot_json(in, r);
    j["warnings"] = r.warnings;
    j["notes"] = in.notes;
    return j;
}

// The arrays of ranking.npz (docs/keeplist.md).
static std::vector<std::pair<std::string, NpyArray>> ranking_arrays(const RankInput& in,
                                                                    const RankDecision& r) {
    const int64_t D = static_cast<int64_t>(in.domains.size()), B = static_cast<int64_t>(r.blocks.size()),
                  E = r.expert_count;
    std::vector<int32_t> blocks(r.blocks.begin(), r.blocks.end());
    std::vector<std::pair<std::string, NpyArray>> arrays;
    arrays.emplace_back("domains", NpyArray::strings(r.domain_names));
    arrays.emplace_back("blocks", NpyArray::i32({B}, blocks));
    arrays.emplace_back("scores", NpyArray::f64({D, B, E}, r.scores));
    arrays.emplace_back("ranks", NpyArray::i32({D, B, E}, r.ranks));
    arrays.emplace_back("counts", NpyArray::i64({D, B, E}, r.counts));
    arrays.emplace_back("consensus_rank", NpyArray::i32({B, E}, r.consensus_rank));
    arrays.emplace_back("consensus_score", NpyArray::f64({B, E}, r.consensus_score));
    arrays.emplace_back("keep", NpyArray::boolean({B, E}, r.keep));
    arrays.emplace_back("dead", NpyArray::boolean({B, E}, r.dead));
    arrays.emplace_back("protected", NpyArray::boolean({B, E}, r.protect));
    arrays.emplace_back("retained_share", NpyArray::f64({D, B}, r.retained_share));
    std::vector<double> lodo;  // [D, 2]: kept seen, kept unseen (ops/rank/rank_lodo.h)
    for (const BlindSpot& x : r.blind_spot) lodo.insert(lodo.end(), {x.seen, x.unseen});
    arrays.emplace_back("lodo_share", NpyArray::f64({D, 2}, lodo));
    if (!in.plan_path.empty()) arrays.emplace_back("spearman", NpyArray::f64({D, B}, r.spearman));
    return arrays;
}

void write_rank_outputs(const RankInput& in, const RankDecision& r, const std::string& dir, bool force,
                        int threads) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw IoError(dir, "create directory", ec.value());
    const fs::path base(dir);
    for (const char* f : {kKeeplistFile, kRankingFile, kReceiptFile})
        if (!force && fs::exists(base / f))
            throw RequestError(
                {(base / f).string() + " exists; use ", ops::RankRequest::kForce, " to overwrite it"});

    // The three files are built and written in parallel (the ranking's arrays are most of the bytes),
    // each under its temporary name; they are renamed into place only when all three are written, the
    // receipt last: its presence says the other two are complete, and a failed write leaves none.
    OutputFile ranking_out((base / kRankingFile).string());
    OutputFile keeplist_out((base / kKeeplistFile).string());
    std::string receipt;
    parallel_for(3, resolve_threads(threads), [&](size_t i) {
        if (i == 0) {
            write_npz_to(ranking_out, ranking_arrays(in, r));
        } else if (i == 1) {
            const std::string keeplist = r.keeplist.text();
            keeplist_out.write_at(0, keeplist.data(), keeplist.size());
        } else {
            receipt = render_receipt(in, r);
        }
    });
    OutputFile out((base / kReceiptFile).string());
    out.write_at(0, receipt.data(), receipt.size());
    ranking_out.commit();
    keeplist_out.commit();
    out.commit();
}

}  // namespace gguf_reap
