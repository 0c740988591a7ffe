// card's inputs, read and held against each other (ops/card/card_inputs.h).
#include "ops/card/card_inputs.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <regex>

#include <fmt/format.h>

#include "format/json_input.h"
#include "gguf_reap/error.h"
#include "gguf_reap/manifest.h"
#include "gguf_reap/rank.h"
#include "io/hub_repo.h"
#include "io/paths.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "model/keeplist_file.h"
#include "model/moe_layout.h"
#include "model/provenance.h"
#include "services/audit_report.h"
#include "services/model_figures.h"
#include "services/opened.h"

namespace gguf_reap::card_detail {

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

std::vector<std::pair<std::string, uint64_t>> shard_names(const ShardSet& s) {
    std::vector<std::pair<std::string, uint64_t>> v;
    for (const Shard& sh : s.shards()) v.emplace_back(base_name(sh.path), sh.file->size());
    return v;
}

std::string describe(const std::vector<std::pair<std::string, uint64_t>>& v) {
    std::string s;
    for (const auto& [name, size] : v) s += fmt::format("{}{} ({} bytes)", s.empty() ? "" : ", ", name, size);
    return s.empty() ? "no files" : s;
}

// Where a shard list (name, size) read from a file first differs from the set on disk, completing
// "it lists ..."; "" when they are equal.
std::string first_difference(const std::vector<std::pair<std::string, uint64_t>>& listed,
                             const std::vector<std::pair<std::string, uint64_t>>& actual) {
    if (listed.size() != actual.size())
        return fmt::format("{} shard(s), {}, where the set on disk has {}, {}", listed.size(),
                           describe(listed), actual.size(), describe(actual));
    for (size_t i = 0; i < listed.size(); ++i)
        if (listed[i] != actual[i])
            return fmt::format("shard {} as {} ({} bytes) where the set on disk has {} ({} bytes)", i + 1,
                               listed[i].first, listed[i].second, actual[i].first, actual[i].second);
    return "";
}

// The keeplist must apply to MODEL (keeplist_applies_to: the same architecture, expert layout and
// tensor names); returns "ranked on X, applied to Y (...)" when it was ranked on another model of them.
std::string check_keeplist_source(const KeepList& kl, const std::string& kl_path, const OpenedModel& src,
                                  const MoeLayout& layout) {
    if (!kl.source)
        throw InputError(kl_path, std::nullopt, "source",
                         Message{"missing: a hand-written drop spec says nothing of its model; give the "
                                 "directory `gguf-reap rank ",
                                 RankOptions::kModel, "` wrote"});
    return keeplist_applies_to(kl, kl_path, keeplist_source_of(src.set, layout), src.path);
}

// "super-expert: carries 41.2 % of the block's energy in chat ..." → 41.2
std::optional<double> share_in(const std::string& reason) {
    static const std::regex re(R"(carries ([0-9]+(\.[0-9]+)?) % of the block's)");
    std::smatch m;
    if (!std::regex_search(reason, m, re)) return std::nullopt;
    return std::stod(m[1].str());
}

// The calibration domains a keeplist's method records: name, tokens, imatrix, datasets, and the text
// calibrate cut for each.
std::vector<CardDomain> method_domains(const json& j) {
    std::vector<CardDomain> out;
    if (j.contains("domains") && j["domains"].is_array())
        for (const json& d : j["domains"]) {
            CardDomain cd;
            cd.name = opt_string(d, "name");
            cd.tokens = opt_number<uint64_t>(d, "tokens");
            cd.imatrix_sha256 = opt_string(d, "sha256");
            if (d.is_object() && d.contains("datasets") && d["datasets"].is_array())
                for (const json& x : d["datasets"])
                    if (x.is_string()) cd.datasets.push_back(x.get<std::string>());
            if (d.is_object() && d.contains("calibration") && d["calibration"].is_object()) {
                const json& c = d["calibration"];
                cd.text = opt_string(c, "text");
                cd.text_sha256 = opt_string(c, "text_sha256");
                cd.used_sha256 = opt_string(c, "used_sha256");
                cd.text_tokens = opt_number<uint64_t>(c, "text_tokens").value_or(0);
                if (auto used = opt_number<uint64_t>(c, "used_tokens")) cd.tokens = used;
            }
            out.push_back(std::move(cd));
        }
    return out;
}

}  // namespace

CardMethod method_of(const KeepList& kl, const std::string& kl_path, const std::string& kl_text,
                     const std::string& rank_dir) {
    CardMethod m;
    const json& j = kl.method;
    m.criterion = opt_string(j, "criterion");
    m.consensus = opt_string(j, "consensus");
    if (m.criterion.empty() || m.consensus.empty())
        throw InputError(kl_path, std::nullopt, m.criterion.empty() ? "method.criterion" : "method.consensus",
                         "missing: the card states how the experts were chosen, which only a keeplist "
                         "written by `gguf-reap rank` records");
    const auto cr = parse_criterion(m.criterion);
    const auto cs = parse_consensus(m.consensus);
    if (!cr)
        throw InputError(kl_path, std::nullopt, "method.criterion",
                         fmt::format("unknown: '{}'", m.criterion));
    if (!cs)
        throw InputError(kl_path, std::nullopt, "method.consensus",
                         fmt::format("unknown: '{}'", m.consensus));
    m.criterion_words = criterion_formula(*cr);
    m.consensus_words = consensus_text(*cs);
    m.rule = opt_string(j, "rule");
    if (j.contains("fit") && j["fit"].contains("budget")) {
        const json& b = j["fit"]["budget"];
        m.fit_words = opt_string(b, "words");
        m.fit_kind = opt_string(b, "kind");
        m.fit_bytes = opt_number<uint64_t>(b, "bytes").value_or(0);
        m.fit_tp = opt_number<uint64_t>(b, "tp").value_or(1);
        m.fit_ctx = opt_number<uint64_t>(b, "ctx").value_or(0);
        m.fit_overhead = opt_number<uint64_t>(b, "overhead").value_or(0);
        if (j["fit"].contains("at_k")) m.fit_ranked_need = opt_string(j["fit"]["at_k"], "human");
    }
    m.score_field = opt_string(j, "score_field");
    if (j.contains("from_plan")) {
        m.from_plan_file = base_name(opt_string(j["from_plan"], "path"));
        m.from_plan_format = opt_string(j["from_plan"], "format");
        m.from_plan_sha256 = opt_string(j["from_plan"], "sha256");
        if (m.from_plan_file.empty())
            throw InputError(kl_path, std::nullopt, "method.from_plan.path",
                             "missing: the card names the plan the kept experts come from");
    }
    m.domains = method_domains(j);
    if (m.domains.empty())
        throw InputError(kl_path, std::nullopt, "method.domains",
                         "missing or empty: the card names the calibration domains");
    if (j.contains("super_expert")) {
        m.super_share_threshold = opt_number<double>(j["super_expert"], "share_threshold");
        m.super_channel_ratio_threshold = opt_number<double>(j["super_expert"], "channel_ratio_threshold");
    }
    if (j.contains("safety_margin")) {
        const json& s = j["safety_margin"];
        m.best_pruned_rank = opt_number<int64_t>(s, "best_pruned_rank");
        m.rank_of = opt_number<int64_t>(s, "of");
        m.median_layer = opt_number<double>(s, "median_layer");
        const auto block = opt_number<int64_t>(s, "block");
        const auto expert = opt_number<int64_t>(s, "expert");
        if (m.best_pruned_rank && m.rank_of && m.median_layer)
            m.safety_margin = safety_margin_sentence(*m.best_pruned_rank, *m.rank_of, *m.median_layer,
                                                     block ? static_cast<int>(*block) : -1,
                                                     expert.value_or(-1), opt_string(s, "domain"));
    }
    if (j.contains("blind_spot") && j["blind_spot"].is_object() && j["blind_spot"].contains("worst")) {
        const json& b = j["blind_spot"];
        m.blind_spot_domain = opt_string(b["worst"], "domain");
        m.blind_spot_drop = opt_number<double>(b["worst"], "drop");
        if (!m.blind_spot_domain.empty() && m.blind_spot_drop)
            m.blind_spot = blind_spot_sentence(*m.blind_spot_drop, m.blind_spot_domain,
                                               opt_string(b, "measure") == "score mass");
    }
    for (const KeepBlock& b : kl.blocks) {
        m.dead_experts += b.dead.size();
        if (!b.dead.empty()) ++m.dead_blocks;
        for (const ProtectedExpert& p : b.protected_experts)
            m.super_experts.push_back({b.block, p.expert, p.reason, share_in(p.reason)});
    }
    m.keeplist_sha256 = sha256_hex(kl_text.data(), kl_text.size());
    const fs::path receipt = fs::path(rank_dir) / kReceiptFile;
    if (fs::is_regular_file(receipt)) {
        m.receipt_name = kReceiptFile;
        m.receipt_sha256 = sha256_file(receipt.string());
    }
    m.source_identified = kl.source && !kl.source->from_imatrix_only;
    return m;
}

OpenedModel open_model(const std::string& path, const std::string& role, const EstimateRequest& base) {
    ops::InspectResult r = ops::inspect(path);
    if (!r.opened->model)
        throw InputError(
            path, std::nullopt, "",
            fmt::format("is an imatrix file, not a model (give the {} model's first shard)", role));
    EstimateRequest in = base;
    in.model = path;
    EstimateResult e = estimate_model(*r.opened->model, in);
    return {path, *r.opened->model, std::move(r.summary), std::move(e)};
}

std::string kv_string(const ShardSet& s, const char* key) {
    const Kv* kv = s.find_kv(key);
    if (!kv) return "";
    return kv->as_string().value_or("");
}

RankKeeplist read_rank_keeplist(const std::string& rank_dir, const OpenedModel& src, const OpenedModel& out) {
    std::error_code ec;
    if (!fs::exists(rank_dir, ec)) throw InputError(rank_dir, std::nullopt, "", kMissingPathWords);
    if (!fs::is_directory(rank_dir, ec))
        throw InputError(rank_dir, std::nullopt, "",
                         Message{"not a directory (give the directory `gguf-reap rank ",
                                 ops::RankRequest::kOut, "` wrote)"});
    RankKeeplist k;
    k.path = (fs::path(rank_dir) / kKeeplistFile).string();
    if (!fs::exists(k.path, ec))
        throw InputError(
            rank_dir, std::nullopt, kKeeplistFile,
            Message{"missing (give the directory `gguf-reap rank ", ops::RankRequest::kOut, "` wrote)"});
    k.text = read_small_file(k.path, uint64_t{64} << 20, "keeplist");
    k.kl = KeepList::parse(k.text, k.path);
    const MoeLayout layout = build_moe_layout(src.set);
    k.applied = check_keeplist_source(k.kl, k.path, src, layout);
    validate_keeplist(k.kl, layout, k.path);
    if (out.estimate.before.expert_count != k.kl.n_keep)
        throw InputError(k.path, std::nullopt, "n_keep",
                         fmt::format("{} experts kept per block, but {} has {}: the output was not spliced "
                                     "with this keeplist",
                                     k.kl.n_keep, out.path, out.estimate.before.expert_count));
    k.sha256 = sha256_hex(k.text.data(), k.text.size());
    if (const std::string recorded = kv_string(out.set, kProvenanceKeeplistShaKey);
        !recorded.empty() && recorded != k.sha256)
        throw InputError(out.path, std::nullopt, kProvenanceKeeplistShaKey,
                         fmt::format("{}, but {} hashes to {}: the output was spliced from another keeplist",
                                     recorded, k.path, k.sha256));
    return k;
}

AuditRead read_audit(const std::string& path, const OpenedModel& out, const OpenedModel& src) {
    const AuditDocument doc = read_audit_document(path, out.path);
    AuditRead a;
    a.facts.audited = true;
    a.facts.tool = doc.tool;
    a.facts.date = doc.date;
    a.facts.shards = doc.shards;
    a.facts.tensors = doc.tensors;
    a.facts.tensors_identical = doc.tensors_identical;
    a.facts.expert_tensors = doc.expert_tensors;
    a.facts.slabs = doc.slabs;
    a.facts.kvs_checked = doc.kvs_checked;
    a.facts.bytes_compared = doc.bytes_compared;
    for (const AuditDocument::Shard& s : doc.shard_list) {
        a.shards.emplace_back(base_name(s.path), s.size);
        a.sha256.push_back(s.sha256);
    }
    if (const std::string d = first_difference(a.shards, shard_names(out.set)); !d.empty())
        throw InputError(path, std::nullopt, audit_key::kShards,
                         fmt::format("the audit is of other files than {}: it lists {}", out.path, d));
    a.facts.hashed = !a.sha256.empty() && std::all_of(a.sha256.begin(), a.sha256.end(),
                                                      [](const std::string& s) { return !s.empty(); });

    if (doc.source) {
        a.facts.with_source = true;
        // A set named by its quant (hf://ORG/REPO:QUANT) is its first shard at the commit it resolves to.
        std::string audited = *doc.source;
        if (const auto q = parse_hub_quant(audited)) audited = resolve_hub_quant(audited, *q).first_shard;
        const std::string s = base_name(audited);
        const auto names = shard_names(src.set);
        if (std::none_of(names.begin(), names.end(), [&](const auto& n) { return n.first == s; }))
            throw InputError(
                path, std::nullopt, audit_key::kSource,
                fmt::format("the audit compared the output with {}, which is not a shard of {} ({})", s,
                            src.path, describe(names)));
    }
    if (doc.source_manifest) {
        // Verified against a manifest of the source: it must be one of this source.
        a.facts.with_source = true;
        const std::string& mp = *doc.source_manifest;
        Manifest m;
        try {
            m = Manifest::load(mp);
        } catch (const Error& e) {
            throw InputError(
                path, std::nullopt, audit_key::kSourceManifest,
                fmt::format("the audit verified against {}, which cannot be read here ({})", mp, e.what()));
        }
        std::vector<std::pair<std::string, uint64_t>> listed;
        for (const ManifestShard& ms : m.shards) listed.emplace_back(ms.name, ms.size);
        if (const std::string d = first_difference(listed, shard_names(src.set)); !d.empty())
            throw InputError(
                path, std::nullopt, audit_key::kSourceManifest,
                fmt::format("the audit verified against {}, a manifest of other files than {}: it "
                            "lists {}",
                            mp, src.path, d));
        a.facts.source_manifest = base_name(mp);
        a.facts.source_manifest_sha256 = sha256_file(mp);
    }
    if (doc.neuron_plan) a.neuron_plan = base_name(*doc.neuron_plan);
    return a;
}

void add_files(const CardRequest& q, const OpenedModel& out, const std::vector<std::string>& audit_sha,
               CardFacts& f) {
    for (const auto& [name, size] : shard_names(out.set)) f.files.push_back({name, size, ""});
    if (!q.manifest.empty()) {
        const Manifest man = Manifest::load(q.manifest);
        std::vector<std::pair<std::string, uint64_t>> listed;
        for (const ManifestShard& s : man.shards) listed.emplace_back(s.name, s.size);
        if (const std::string d = first_difference(listed, shard_names(out.set)); !d.empty())
            throw InputError(q.manifest, std::nullopt, "shards",
                             fmt::format("the manifest is of other files than {}: it lists {}", out.path, d));
        for (size_t i = 0; i < man.shards.size(); ++i) {
            if (!audit_sha.empty() && audit_sha[i] != man.shards[i].sha256)
                throw InputError(
                    q.manifest, std::nullopt, fmt::format("shards[{}].sha256", i),
                    fmt::format("{} for {}, but the audit {} hashed it as {}", man.shards[i].sha256,
                                man.shards[i].name, q.audit_json, audit_sha[i]));
            f.files[i].sha256 = man.shards[i].sha256;
        }
        f.hashes_from = "manifest";
        f.manifest_name = base_name(q.manifest);
        f.manifest_sha256 = sha256_file(q.manifest);
    } else if (!audit_sha.empty()) {
        for (size_t i = 0; i < audit_sha.size(); ++i) f.files[i].sha256 = audit_sha[i];
        f.hashes_from = "audit";
    }
}

}  // namespace gguf_reap::card_detail
