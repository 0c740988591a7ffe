// card: read → cross-check → facts → render → write (docs/card.md). Rendering is card_render.cpp.
#include "gguf_reap/card.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "format/json_input.h"
#include "gguf_reap/error.h"
#include "gguf_reap/estimate.h"
#include "gguf_reap/inspect.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/manifest.h"
#include "gguf_reap/rank.h"
#include "io/input_file.h"
#include "io/output_file.h"
#include "io/output_lock.h"
#include "io/paths.h"
#include "io/preflight.h"
#include "io/remote_file.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "io/units.h"
#include "model/model_identity.h"
#include "model/moe_layout.h"
#include "model/provenance.h"
#include "ops/card/card_steps.h"
#include "services/audit_report.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

struct OpenedModel {
    std::string path;
    ShardSet set;
    ModelSummary summary;
    EstimateResult estimate;
};

OpenedModel open_model(const std::string& path, const std::string& role, const EstimateRequest& base) {
    ops::InspectResult r = ops::inspect(path);
    if (!r.model)
        throw InputError(
            path, std::nullopt, "",
            fmt::format("is an imatrix file, not a model (give the {} model's first shard)", role));
    EstimateRequest in = base;
    in.model = path;
    EstimateResult e = estimate_model(*r.model, in);
    return {path, std::move(*r.model), std::move(r.summary), std::move(e)};
}

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

CardModelColumn column(const OpenedModel& m) {
    CardModelColumn c;
    c.first_shard = base_name(m.set.shards().front().path);
    c.shards = m.set.shards().size();
    c.moe_blocks = m.estimate.moe_blocks;
    c.expert_count = m.estimate.before.expert_count;
    c.expert_used_count = m.estimate.expert_used_count;
    c.expert_width = m.estimate.before.expert_width;
    c.parameters = m.estimate.before.parameters;
    c.active_parameters = m.estimate.before.active_parameters;
    c.file_bytes = m.estimate.before.file_bytes;
    c.tensor_bytes = m.estimate.before.tensor_bytes;
    c.decode_bytes_per_token = m.estimate.before.decode_total();
    for (const ClassTypeRow& r : m.summary.rows) c.tensor_types[ggml_type_display(r.type)] += r.tensors;
    return c;
}

std::string kv_string(const ShardSet& s, const char* key) {
    const Kv* kv = s.find_kv(key);
    if (!kv) return "";
    return kv->as_string().value_or("");
}

// The Hugging Face id of the source: a repository key, or a huggingface.co URL among the general.* keys
// llama.cpp's converter writes (gguf-py constants). A URL elsewhere is not an id and is not used.
std::pair<std::string, std::string> base_model_of(const ShardSet& source) {
    if (std::string v = kv_string(source, "general.source.huggingface.repository"); !v.empty())
        return {v, "general.source.huggingface.repository"};
    for (const char* key :
         {"general.source.repo_url", "general.repo_url", "general.source.url", "general.url"}) {
        std::string v = kv_string(source, key);
        for (const char* prefix : {"https://huggingface.co/", "http://huggingface.co/", "https://hf.co/"})
            if (v.rfind(prefix, 0) == 0) {
                v = v.substr(std::string_view(prefix).size());
                while (!v.empty() && v.back() == '/') v.pop_back();
                if (!v.empty()) return {v, key};
            }
    }
    return {"", ""};
}

// --- the keeplist -------------------------------------------------------------------------------

// The keeplist must apply to MODEL (keeplist_applies_to: the same architecture, expert layout and
// tensor names); returns "ranked on X, applied to Y (...)" when it was ranked on another model of them.
std::string check_keeplist_source(const KeepList& kl, const std::string& kl_path, const OpenedModel& src,
                                  const MoeLayout& layout) {
    if (!kl.source)
        throw InputError(kl_path, std::nullopt, "source",
                         Message{"missing: a hand-written drop spec says nothing of its model; give the "
                                 "directory `gguf-reap rank ",
                                 RequestField::kModel, "` wrote"});
    return keeplist_applies_to(kl, kl_path, keeplist_source_of(src.set, layout), src.path);
}

// "super-expert: carries 41.2 % of the block's energy in chat ..." → 41.2
std::optional<double> share_in(const std::string& reason) {
    static const std::regex re(R"(carries ([0-9]+(\.[0-9]+)?) % of the block's)");
    std::smatch m;
    if (!std::regex_search(reason, m, re)) return std::nullopt;
    return std::stod(m[1].str());
}

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
    if (j.contains("fit") && j["fit"].contains("budget"))
        m.fit_words = opt_string(j["fit"]["budget"], "words");
    m.score_field = opt_string(j, "score_field");
    if (j.contains("from_plan")) {
        m.from_plan_file = base_name(opt_string(j["from_plan"], "path"));
        m.from_plan_format = opt_string(j["from_plan"], "format");
        m.from_plan_sha256 = opt_string(j["from_plan"], "sha256");
        if (m.from_plan_file.empty())
            throw InputError(kl_path, std::nullopt, "method.from_plan.path",
                             "missing: the card names the plan the kept experts come from");
    }
    if (j.contains("domains") && j["domains"].is_array())
        for (const json& d : j["domains"]) {
            CardDomain cd;
            cd.name = opt_string(d, "name");
            cd.tokens = opt_number<uint64_t>(d, "tokens");
            if (d.is_object() && d.contains("datasets") && d["datasets"].is_array())
                for (const json& x : d["datasets"])
                    if (x.is_string()) cd.datasets.push_back(x.get<std::string>());
            if (d.is_object() && d.contains("calibration") && d["calibration"].is_object()) {
                const json& c = d["calibration"];
                cd.text = opt_string(c, "text");
                cd.text_sha256 = opt_string(c, "text_sha256");
                cd.text_tokens = opt_number<uint64_t>(c, "text_tokens").value_or(0);
                if (auto used = opt_number<uint64_t>(c, "used_tokens")) cd.tokens = used;
            }
            m.domains.push_back(std::move(cd));
        }
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

// --- the audit report ---------------------------------------------------------------------------

struct AuditRead {
    CardAudit facts;
    std::vector<std::pair<std::string, uint64_t>> shards;
    std::vector<std::string> sha256;  // per shard, "" when not hashed
    std::string neuron_plan;          // base name, "" when none
};

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
        const std::string s = base_name(*doc.source);
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

// --- the card file ------------------------------------------------------------------------------

void check_destination(const CardRequest& q, const OpenedModel& src, const OpenedModel& out,
                       const std::string& kl_path) {
    std::vector<std::string> inputs;
    for (const Shard& s : src.set.shards()) inputs.push_back(s.path);
    for (const Shard& s : out.set.shards()) inputs.push_back(s.path);
    inputs.push_back(kl_path);
    if (!q.audit_json.empty()) inputs.push_back(q.audit_json);
    if (!q.manifest.empty()) inputs.push_back(q.manifest);
    if (const std::string* in = same_file_as(q.out_path, inputs))
        throw UsageError(fmt::format("{} is an input ({}): refusing to write over it", q.out_path, *in));
    if (!q.force && path_exists(q.out_path))
        throw RequestError({q.out_path + " exists; use ", RequestField::kForce, " to overwrite it"});
}

std::vector<std::string> not_verified(const CardFacts& f, const CardRequest& q) {
    std::vector<std::string> v;
    if (f.eval) {
        std::string texts;
        for (const CardEvalText& t : f.eval->texts)
            texts += fmt::format("{}{} ({} tokens)", texts.empty() ? "" : ", ", t.name,
                                 with_commas(static_cast<uint64_t>(t.tokens)));
        if (f.eval->texts.empty())
            v.push_back("No task benchmark and no KLD: only generation behaviour was measured (see above).");
        else
            v.push_back(fmt::format("No task benchmark; KLD measured only on these texts: {}.", texts));
    } else {
        v.push_back(
            "No task benchmark: gguf-reap measured no accuracy, perplexity or task score of this build, and "
            "none is claimed here.");
    }
    std::string doms;
    for (const CardDomain& d : f.method.domains)
        doms += fmt::format("{}{} ({})", doms.empty() ? "" : ", ", d.name,
                            d.tokens ? with_commas(*d.tokens) + " tokens" : "token count not recorded");
    if (f.method.blind_spot.empty())
        v.push_back(fmt::format(
            "Calibration covered only these kinds of text: {}. Other kinds of text (other languages, tasks, "
            "formats) were not measured; the experts they rely on may be among those removed.",
            doms));
    else
        v.push_back(fmt::format(
            "Calibration covered only these kinds of text: {}. Other kinds of text (other languages, tasks, "
            "formats) were not measured. An estimate from the imatrices, ranking again without each "
            "calibration domain in turn: {}, and text unlike every calibration domain may lose more. It is "
            "a proxy from routed energy, not a quality measurement: `gguf-reap eval` measures such text on "
            "this build.",
            doms, f.method.blind_spot));
    if (f.width)
        v.push_back(fmt::format(
            "Expert FFN width: every routed expert was cut from {} to {} channels by a neuron plan ({}sha256 "
            "{}, recorded in the output's {}). Which channels it keeps was decided by that plan "
            "(`plan-width` "
            "ranks them by imatrix channel energy), not by a quality measurement: the quality cost of the "
            "width restriction is not measured.",
            f.width->source_width, f.width->width,
            f.width->plan_file.empty() ? "" : fmt::format("`{}`, ", f.width->plan_file), f.width->plan_sha256,
            kProvenanceNeuronPlanShaKey));
    if (!f.audit.audited)
        v.push_back(
            fmt::format("The files were not audited: that every kept tensor is byte-identical to the source "
                        "was not checked (`gguf-reap audit OUTPUT {} MODEL {} MANIFEST.json`).",
                        card_option(f, RequestField::kSource), card_option(f, RequestField::kManifestOut)));
    else if (!f.audit.with_source)
        v.push_back(
            fmt::format("The audit checked the files' structure only (it was run without {}): their bytes "
                        "were not compared with the source.",
                        card_option(f, RequestField::kSource)));
    if (!f.method.output_names_keeplist)
        v.push_back(fmt::format(
            "The output carries no {} (spliced with {}?): that it was made with this keeplist is checked "
            "only by its expert count.",
            kProvenanceKeeplistShaKey, card_option(f, RequestField::kNoProvenance)));
    if (!f.method.source_identified)
        v.push_back(fmt::format(
            "The keeplist was ranked without {}: that it was made for this source is checked only "
            "by its expert count.",
            card_option(f, RequestField::kModel)));
    v.push_back(
        f.eval ? "That llama.cpp runs this build well beyond the measurements above: audit checks "
                 "llama.cpp's load-time rules for expert tensors, and llama.cpp ran the build only for "
                 "those measurements."
               : "That llama.cpp runs this build well: audit checks llama.cpp's load-time rules for expert "
                 "tensors, but gguf-reap did not load or run the model.");
    for (const std::string& n : q.notes) v.push_back(n);
    return v;
}

// The rank directory's keeplist, as read (its sha256 is of these bytes).
struct RankKeeplist {
    std::string path;
    std::string text;
    KeepList kl;
    std::string sha256;
    std::string applied;  // keeplist_applies_to's sentence; "" when ranked on MODEL itself
};

// The rank directory: the keeplist must be for this source, and the output made from it.
RankKeeplist read_rank_keeplist(const std::string& rank_dir, const OpenedModel& src, const OpenedModel& out) {
    std::error_code ec;
    if (!fs::exists(rank_dir, ec)) throw InputError(rank_dir, std::nullopt, "", kMissingPathWords);
    if (!fs::is_directory(rank_dir, ec))
        throw InputError(
            rank_dir, std::nullopt, "",
            Message{"not a directory (give the directory `gguf-reap rank ", RequestField::kOut, "` wrote)"});
    RankKeeplist k;
    k.path = (fs::path(rank_dir) / kKeeplistFile).string();
    if (!fs::exists(k.path, ec))
        throw InputError(
            rank_dir, std::nullopt, kKeeplistFile,
            Message{"missing (give the directory `gguf-reap rank ", RequestField::kOut, "` wrote)"});
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

// The two models side by side, the method, and the width provenance (splice --neuron-plan writes it
// into shard 1).
CardFacts model_facts(const CardRequest& q, const OpenedModel& src, const OpenedModel& out,
                      const RankKeeplist& k) {
    CardFacts f;
    f.tool = q.tool_version;
    f.arch = src.set.architecture();
    f.source = column(src);
    f.build = column(out);
    f.experts_removed = f.source.expert_count - f.build.expert_count;
    f.method = method_of(k.kl, k.path, k.text, q.rank_dir);
    f.method.ranked_on_other = k.applied;
    f.method.output_names_keeplist = kv_string(out.set, kProvenanceKeeplistShaKey) == k.sha256;
    if (const std::string plan_sha = kv_string(out.set, kProvenanceNeuronPlanShaKey); !plan_sha.empty()) {
        CardWidth w;
        w.plan_sha256 = plan_sha;
        w.source_width = f.source.expert_width;
        w.width = f.build.expert_width;
        if (k.kl.method.contains("neuron_plan"))
            w.plan_file = base_name(opt_string(k.kl.method["neuron_plan"], "file"));
        f.width = w;
    }
    return f;
}

// The files, with their sha256 from the manifest or the hashing audit (never hashed here). `audit_sha`
// is the audit's, per shard, empty when it did not hash.
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

// Front matter: base model, license and tags.
void add_front_matter(const CardRequest& q, const OpenedModel& src, const Events& events, CardFacts& f) {
    const InputFile* first = src.set.shards().front().file.get();
    if (first && first->remote()) f.source_revision = first->remote()->hub_revision();
    if (!q.base_model.empty()) {
        f.base_model = q.base_model;
        f.base_model_from = spelled(RequestField::kBaseModel, events.spell);
    } else {
        std::tie(f.base_model, f.base_model_from) = base_model_of(src.set);
        if (f.base_model.empty() && !f.source_revision.empty()) {  // the repository it was read from
            f.base_model = f.source_revision.substr(0, f.source_revision.find('@'));
            f.base_model_from = "the hf:// source";
        }
        if (f.base_model.empty())
            events.warn(Message{
                fmt::format("{} names no Hugging Face repository (general.source.huggingface.repository, "
                            "general.source.repo_url, general.repo_url, general.source.url, "
                            "general.url): the card has no base_model; give ",
                            src.path),
                RequestField::kBaseModel, " ORG/NAME"});
    }
    f.license = kv_string(src.set, "general.license");
    f.license_name = kv_string(src.set, "general.license.name");
    f.license_link = kv_string(src.set, "general.license.link");
    if (!f.arch.empty()) f.tags.push_back(f.arch);
    f.tags.push_back("expert-pruning");
    // `reap` names the REAP criterion (arXiv 2510.13999): rank's reap-mean, or external scores read from
    // their "reap" field. Energy, frequency and the rest are other criteria, and are not tagged as it.
    if (f.method.criterion == "reap-mean" ||
        (f.method.criterion == "external" && f.method.score_field == "reap"))
        f.tags.push_back("reap");
    for (const auto& [type, n] : f.build.tensor_types) f.tags.push_back(type);
}

// The quantisation `llama-server -hf ORG/REPO:QUANT` picks a file by: the last of llama.cpp's file-type
// names in the build's first shard name ("X-REAP-Q4_K_M-00001-of-00003.gguf" → "Q4_K_M"); "" if none.
std::string quant_of(const std::string& first_shard) {
    static const std::regex re(
        "(?:^|[-_.])(IQ1_S|IQ1_M|IQ2_XXS|IQ2_XS|IQ2_S|IQ2_M|IQ3_XXS|IQ3_XS|IQ3_S|IQ3_M|IQ4_NL|IQ4_XS|Q2_K_S|"
        "Q2_K|Q3_K_S|Q3_K_M|Q3_K_L|Q4_0|Q4_1|Q4_K_S|Q4_K_M|Q5_0|Q5_1|Q5_K_S|Q5_K_M|Q6_K|Q8_0|TQ1_0|TQ2_0|"
        "MXFP4_MOE|MXFP4|BF16|F16|F32)(?=$|[-_.])");
    std::string up = first_shard;
    for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::string last;
    for (auto it = std::sregex_iterator(up.begin(), up.end(), re); it != std::sregex_iterator(); ++it)
        last = (*it)[1].str();
    return last;
}

// The words of the headline's quality verdict for a mean KLD (nats), docs/eval.md "What the card says".
const char* kld_verdict(double kld) {
    if (kld <= 0.05) return "nearly identical to the source";
    if (kld <= 0.2) return "close";
    if (kld <= 0.5) return "noticeably different";
    return "often predicts something else";
}

// The hardware table: estimate of the build itself.
void add_hardware(const CardRequest& q, const OpenedModel& out, CardFacts& f) {
    f.gpu_mem = q.gpu_mem;
    f.overhead = q.overhead;
    f.ctx = q.ctx;
    f.kv_bytes_per_token = out.estimate.kv.bytes_per_token;
    f.kv_kind = kv_kind_name(out.estimate.kv.kind);
    f.cache_type_k = kv_cache_type_name(q.cache_types.k);
    f.cache_type_v = kv_cache_type_name(q.cache_types.v);
    f.offload_flag = q.offload.flag();
    f.host.split = out.estimate.split_before;
    if (q.gpu_mem) f.host.fits = f.host.split.gpu_total() <= q.gpu_mem;
    for (const FitRow& r : out.estimate.fits_before) {
        CardFitRow row{r.tp,
                       r.weights,
                       r.kv_cache,
                       r.overhead,
                       r.need(),
                       std::nullopt,
                       out.estimate.kv.bytes_per_token_per_rank(r.tp)};
        if (q.gpu_mem) row.fits = r.fits(q.gpu_mem);
        f.fits.push_back(row);
    }
}

}  // namespace

namespace ops {

CardResult card(const CardRequest& q, const Events& events) {
    // Open both models: shapes, sizes, decode figures and the hardware table (inspect + estimate).
    EstimateRequest est;
    est.tp = q.tp;
    est.gpu_mem = q.gpu_mem;
    est.overhead = q.overhead;
    est.ctx = q.ctx;
    est.cache_types = q.cache_types;
    est.offload = q.offload;
    est.tool_version = q.tool_version;
    if (!q.out_path.empty() && fs::is_directory(q.out_path))
        throw RequestError(
            {RequestField::kOut,
             fmt::format(" {} is a directory: give the card's file name (README.md)", q.out_path)});
    // -o checked and locked before any input is read: it may not exist without --force, and its
    // temporary is made now, so that a directory nobody can write to fails first.
    std::optional<OutputLock> lock;
    std::optional<OutputFile> file;
    if (!q.out_path.empty()) {
        if (!q.force && path_exists(q.out_path))
            throw RequestError({q.out_path + " exists; use ", RequestField::kForce, " to overwrite it"});
        file.emplace(q.out_path);  // first: its error names the path as given
        lock.emplace(q.out_path);
    }
    const OpenedModel src = open_model(q.source, "source", est);
    const OpenedModel out = open_model(q.output, "pruned", est);

    // The rank directory's keeplist, and where the card goes.
    const RankKeeplist k = read_rank_keeplist(q.rank_dir, src, out);
    if (!q.out_path.empty()) check_destination(q, src, out, k.path);
    CardFacts f = model_facts(q, src, out, k);
    f.spell = events.spell;

    // The audit: a pass of exactly these files.
    std::vector<std::string> audit_sha;
    if (!q.audit_json.empty()) {
        AuditRead a = read_audit(q.audit_json, out, src);
        f.audit = a.facts;
        if (a.facts.hashed) audit_sha = a.sha256;
        if (f.width && f.width->plan_file.empty()) f.width->plan_file = a.neuron_plan;
    }

    // The measurement: an eval of exactly this build, against this source.
    if (!q.eval_json.empty()) f.eval = read_card_eval(q.eval_json, out.set, source_identity(src.set));

    if (f.eval)
        for (const CardEvalText& t : f.eval->texts)
            if (std::isfinite(t.kld_mean)) f.quality.push_back({t.name, t.kld_mean, kld_verdict(t.kld_mean)});
    f.hf_repo = q.hf_repo;
    f.quant = quant_of(f.build.first_shard);
    add_files(q, out, audit_sha, f);
    add_front_matter(q, src, events, f);
    add_hardware(q, out, f);
    f.not_verified = not_verified(f, q);

    // Every input agreed: what the card could say better.
    if (q.hf_repo.empty())
        events.warn(Message{"no ", RequestField::kHfRepo,
                            " ORG/REPO: the card's \"How to run\" has no `llama-server -hf` line"});
    else if (f.quant.empty())
        events.warn(
            fmt::format("{} names no quantisation (Q4_K_M, IQ2_XXS, ...): the -hf lines name the "
                        "repository only, and llama.cpp then picks its default quantisation",
                        f.build.first_shard));

    // Render once; write under a temporary name and rename.
    CardResult o;
    o.markdown = render_card_markdown(f);
    o.facts = std::move(f);
    if (file) {
        try {
            file->write_at(0, o.markdown.data(), o.markdown.size());
            file->commit();
            o.written = true;
        } catch (const Error&) {
            o.write_error = std::current_exception();
        }
    }
    return o;
}

}  // namespace ops

}  // namespace gguf_reap
