// card: read → cross-check → facts → render → write (docs/card.md). Reading and cross-checking the inputs
// is card_inputs.cpp; rendering is card_render.cpp (and card_eval.cpp, the eval's section).
#include "gguf_reap/card.h"
#include "gguf_reap/audit.h"

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
#include "gguf_reap/manifest.h"
#include "gguf_reap/rank.h"
#include "gguf_reap/splice.h"
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
#include "model/provenance.h"
#include "ops/card/card_inputs.h"
#include "ops/card/card_steps.h"
#include "ops/card/card_upload.h"
#include "services/llama_cpp/llama_recipes.h"
#include "services/model_figures.h"

namespace gguf_reap {

namespace {

using namespace card_detail;
namespace fs = std::filesystem;

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
        throw RequestError({q.out_path + " exists; use ", CardRequest::kForce, " to overwrite it"});
}

std::vector<std::string> not_verified(const CardFacts& f, const CardRequest& q) {
    std::vector<std::string> v;
    if (f.eval) {
        std::string texts;
        const auto runs = card_runs(*f.eval);
        for (const EvalRun* t : runs)
            texts += fmt::format("{}{} ({} tokens)", texts.empty() ? "" : ", ", t->text,
                                 with_commas(static_cast<uint64_t>(t->tokens)));
        if (runs.empty())
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
        v.push_back(fmt::format(
            "The files were not audited: that every kept tensor is byte-identical to the source "
            "was not checked (`gguf-reap audit OUTPUT {} MODEL {} MANIFEST.json`).",
            card_option(f, AuditOptions::kSource), card_option(f, ops::AuditRequest::kManifestOut)));
    else if (!f.audit.with_source)
        v.push_back(
            fmt::format("The audit checked the files' structure only (it was run without {}): their bytes "
                        "were not compared with the source.",
                        card_option(f, AuditOptions::kSource)));
    if (!f.method.output_names_keeplist)
        v.push_back(fmt::format(
            "The output carries no {} (spliced with {}?): that it was made with this keeplist is checked "
            "only by its expert count.",
            kProvenanceKeeplistShaKey, card_option(f, SpliceOptions::kNoProvenance)));
    if (!f.method.source_identified)
        v.push_back(fmt::format(
            "The keeplist was ranked without {}: that it was made for this source is checked only "
            "by its expert count.",
            card_option(f, RankOptions::kModel)));
    v.push_back(
        f.eval ? "That llama.cpp runs this build well beyond the measurements above: audit checks "
                 "llama.cpp's load-time rules for expert tensors, and llama.cpp ran the build only for "
                 "those measurements."
               : "That llama.cpp runs this build well: audit checks llama.cpp's load-time rules for expert "
                 "tensors, but gguf-reap did not load or run the model.");
    for (const std::string& n : q.notes) v.push_back(n);
    return v;
}

// A keeplist ranked with --fit on another model of the family (issue 40): the budget was met there, not
// necessarily here. What this build needs, measured as rank --fit measured the ranked model: its size on
// disk, or one GPU's share at the budget's tensor parallel degree, context and overhead.
void budget_of_build(const CardRequest& q, const OpenedModel& out, const RankKeeplist& k, CardMethod& m) {
    if (k.kl.source && !k.kl.source->shards.empty()) m.fit_ranked_on = k.kl.source->shards.front().first;
    if (m.fit_kind == "size") {
        m.fit_build_need = out.set.total_bytes();
        return;
    }
    EstimateRequest est;
    est.deployment.tp = {m.fit_tp};
    est.deployment.ctx = m.fit_ctx;
    est.deployment.overhead = m.fit_overhead;
    est.deployment.cache_types = q.deployment.cache_types;
    est.tool_version = q.tool_version;
    est.model = out.path;
    const EstimateResult e = estimate_model(out.set, est);
    for (const FitRow& r : e.fits_before)
        if (r.tp == m.fit_tp) m.fit_build_need = r.need();
}

// --calibration: a calibrate.json that made at least one of the keeplist's imatrices (the sha256 of each
// imatrix in both). Its text, for the card's sha256 of it.
std::string read_calibration(const std::string& path, const RankKeeplist& k) {
    const std::string text = read_small_file(path, uint64_t{16} << 20, "calibrate.json");
    std::set<std::string> ranked;
    if (k.kl.method.contains("domains") && k.kl.method["domains"].is_array())
        for (const auto& d : k.kl.method["domains"])
            if (d.is_object() && d.contains("sha256") && d["sha256"].is_string())
                ranked.insert(d["sha256"].get<std::string>());
    for (const CalibrationText& t : read_calibration_texts(path))
        if (ranked.count(t.imatrix_sha256)) return text;
    throw InputError(path, std::nullopt, "texts[].imatrix_sha256",
                     fmt::format("none is the sha256 of an imatrix {} was ranked from: the calibration of "
                                 "another build",
                                 k.path));
}

// --calibration, named with its sha256; and the calibration texts the keeplist does not record
// (imatrices ranked away from their calibrate.json): from --calibration, then from eval --calibration's
// record in eval.json, each taken only for the domain whose imatrix it made (docs/card.md, "Held-out
// text").
void add_calibration(const CardRequest& q, const RankKeeplist& k, CardFacts& f) {
    if (!q.calibration.empty()) {
        const std::string text = read_calibration(q.calibration, k);
        f.calibration_name = base_name(q.calibration);
        f.calibration_sha256 = sha256_hex(text.data(), text.size());
        add_calibration_texts(f.method, read_calibration_texts(q.calibration));
    }
    if (f.eval && f.eval->result.calibration)
        add_calibration_texts(f.method, f.eval->result.calibration->texts);
}

// --upload-dir: every file the card names, by the name it gives it.
std::vector<UploadSource> upload_sources(const CardRequest& q, const OpenedModel& out, const RankKeeplist& k,
                                         const CardFacts& f) {
    std::vector<UploadSource> v;
    for (const Shard& s : out.set.shards()) v.push_back({base_name(s.path), s.path});
    if (!q.manifest.empty()) {
        v.push_back({f.manifest_name, q.manifest});
        if (const std::string sums = manifest_sums_path(q.manifest); path_exists(sums))
            v.push_back({base_name(sums), sums});
    }
    v.push_back({"keeplist.json", k.path});
    if (!f.method.receipt_name.empty())
        v.push_back({f.method.receipt_name, (fs::path(q.rank_dir) / f.method.receipt_name).string()});
    if (f.eval) {
        v.push_back({f.eval->file, q.eval_json});
        if (!f.eval->svg.empty())
            v.push_back({f.eval->svg, (fs::path(q.eval_json).parent_path() / f.eval->svg).string()});
    }
    if (!f.calibration_name.empty()) v.push_back({f.calibration_name, q.calibration});
    return v;
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
    if (!f.method.fit_words.empty() && !k.applied.empty()) budget_of_build(q, out, k, f.method);
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

// Front matter: base model, license and tags.
void add_front_matter(const CardRequest& q, const OpenedModel& src, const Events& events, CardFacts& f) {
    const InputFile* first = src.set.shards().front().file.get();
    if (first && first->remote()) f.source_revision = first->remote()->hub_revision();
    for (const auto& s : src.set.shards())
        if (const RemoteFile* r = s.file->remote(); r && !r->hub_sha256().empty())
            f.source_files.push_back({r->path(), r->size(), r->hub_sha256()});
    if (!q.base_model.empty()) {
        f.base_model = q.base_model;
        f.base_model_from = spelled(CardRequest::kBaseModel, events.spell);
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
                CardRequest::kBaseModel, " ORG/NAME"});
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
    f.gpu_mem = q.deployment.gpu_mem;
    f.overhead = q.deployment.overhead;
    f.ctx = q.deployment.ctx;
    f.kv_bytes_per_token = out.estimate.kv.bytes_per_token;
    f.kv_kind = kv_kind_name(out.estimate.kv.kind);
    f.cache_type_k = kv_cache_type_name(q.deployment.cache_types.k);
    f.cache_type_v = kv_cache_type_name(q.deployment.cache_types.v);
    f.offload_flag = q.deployment.offload.flag();
    f.host.split = out.estimate.split_before;
    if (q.deployment.gpu_mem) f.host.fits = f.host.split.gpu_total() <= q.deployment.gpu_mem;
    for (const FitRow& r : out.estimate.fits_before) {
        CardFitRow row{r.tp,
                       r.weights,
                       r.kv_cache,
                       r.overhead,
                       r.need(),
                       std::nullopt,
                       out.estimate.kv.bytes_per_token_per_rank(r.tp)};
        if (q.deployment.gpu_mem) row.fits = r.fits(q.deployment.gpu_mem);
        f.fits.push_back(row);
    }
}

}  // namespace

namespace ops {

CardResult card(const CardRequest& q, const Events& events) {
    // Open both models: shapes, sizes, decode figures and the hardware table (inspect + estimate).
    EstimateRequest est;
    est.deployment.tp = q.deployment.tp;
    est.deployment.gpu_mem = q.deployment.gpu_mem;
    est.deployment.overhead = q.deployment.overhead;
    est.deployment.ctx = q.deployment.ctx;
    est.deployment.cache_types = q.deployment.cache_types;
    est.deployment.offload = q.deployment.offload;
    est.tool_version = q.tool_version;
    if (!q.out_path.empty() && fs::is_directory(q.out_path))
        throw RequestError(
            {CardRequest::kOut,
             fmt::format(" {} is a directory: give the card's file name (README.md)", q.out_path)});
    // -o checked and locked before any input is read: it may not exist without --force, and its
    // temporary is made now, so that a directory nobody can write to fails first.
    std::optional<OutputLock> lock;
    std::optional<OutputFile> file;
    if (!q.out_path.empty()) {
        if (!q.force && path_exists(q.out_path))
            throw RequestError({q.out_path + " exists; use ", CardRequest::kForce, " to overwrite it"});
        file.emplace(q.out_path);  // first: its error names the path as given
        lock.emplace(q.out_path);
    }
    if (!q.upload_dir.empty()) check_upload_dir(q.upload_dir);
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

    add_calibration(q, k, f);
    if (f.eval)
        for (const EvalRun* t : card_runs(*f.eval))
            if (const double kld = t->figures.kld.value; std::isfinite(kld))
                f.quality.push_back({t->text, kld, t->figures.kld.err, t->tokens, kld_verdict(kld),
                                     origin_words(text_origin(f.method, f.eval->result, t->text))});
    f.hf_repo = q.hf_repo;
    f.quant = quant_of(f.build.first_shard);
    add_files(q, out, audit_sha, f);
    add_front_matter(q, src, events, f);
    add_hardware(q, out, f);
    f.not_verified = not_verified(f, q);

    // Every input agreed: what the card could say better.
    if (q.hf_repo.empty())
        events.warn(Message{"no ", CardRequest::kHfRepo,
                            fmt::format(" ORG/REPO: the card's \"How to run\" has no `{}` line",
                                        llama_cpp::hub_run_words())});
    else if (f.quant.empty())
        events.warn(
            fmt::format("{} names no quantisation (Q4_K_M, IQ2_XXS, ...): the {} lines name the repository "
                        "only, and llama.cpp then picks its default quantisation",
                        f.build.first_shard, llama_cpp::hub_option()));

    f.links = !q.upload_dir.empty();
    if (f.links && !q.manifest.empty() && path_exists(manifest_sums_path(q.manifest)))
        f.manifest_sums = base_name(manifest_sums_path(q.manifest));

    // Render once; write under a temporary name and rename.
    CardResult o;
    o.markdown = render_card_markdown(f);
    if (!q.upload_dir.empty())
        o.uploaded = write_upload_dir(q.upload_dir, upload_sources(q, out, k, f), o.markdown, q.force);
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
