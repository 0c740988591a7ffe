// card's --json document, from the same CardFacts as the Markdown (docs/card.md, "--json").
#include <cmath>

#include <fmt/format.h>

#include "gguf_reap/card.h"
#include "ops/card/card_steps.h"
#include "services/llama_cpp/llama_recipes.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;

json column_json(const CardModelColumn& c) {
    return {{"first_shard", c.first_shard},
            {"shards", c.shards},
            {"moe_blocks", c.moe_blocks},
            {"expert_count", c.expert_count},
            {"expert_used_count", c.expert_used_count},
            {"expert_width", c.expert_width},
            {"parameters", c.parameters},
            {"active_parameters", c.active_parameters},
            {"file_bytes", c.file_bytes},
            {"tensor_bytes", c.tensor_bytes},
            {"decode_bytes_per_token", c.decode_bytes_per_token},
            {"tensor_types", c.tensor_types}};
}

template <class T>
json opt(const std::optional<T>& v) {
    return v ? json(*v) : json(nullptr);
}
json str_or_null(const std::string& s) {
    return s.empty() ? json(nullptr) : json(s);
}

json method_json(const CardMethod& m) {
    json doms = json::array();
    for (const CardDomain& d : m.domains)
        doms.push_back({{"name", d.name},
                        {"tokens", opt(d.tokens)},
                        {"datasets", d.datasets},
                        {"text_sha256", d.text_sha256.empty() ? json(nullptr) : json(d.text_sha256)}});
    json supers = json::array();
    for (const CardSuperExpert& e : m.super_experts)
        supers.push_back({{"block", e.block},
                          {"expert", e.expert},
                          {"share_percent", opt(e.share_percent)},
                          {"reason", e.reason}});
    return {
        {"criterion", m.criterion},
        {"criterion_words", m.criterion_words},
        {"consensus", m.consensus},
        {"consensus_words", m.consensus_words},
        {"rule", str_or_null(m.rule)},
        {"score_field", str_or_null(m.score_field)},
        {"from_plan", m.from_plan_file.empty() ? json(nullptr)
                                               : json{{"file", m.from_plan_file},
                                                      {"format", m.from_plan_format},
                                                      {"sha256", str_or_null(m.from_plan_sha256)}}},
        {"domains", doms},
        {"dead_experts", m.dead_experts},
        {"dead_blocks", m.dead_blocks},
        {"super_experts", supers},
        {"super_expert_thresholds",
         {{"share", opt(m.super_share_threshold)}, {"channel_ratio", opt(m.super_channel_ratio_threshold)}}},
        {"safety_margin",
         {{"best_pruned_rank", opt(m.best_pruned_rank)},
          {"of", opt(m.rank_of)},
          {"median_layer", opt(m.median_layer)},
          {"sentence", str_or_null(m.safety_margin)}}},
        {"blind_spot", m.blind_spot.empty() ? json(nullptr)
                                            : json{{"worst_domain", m.blind_spot_domain},
                                                   {"drop", opt(m.blind_spot_drop)},
                                                   {"sentence", m.blind_spot}}},
        {"keeplist_sha256", m.keeplist_sha256},
        {"receipt", m.receipt_name.empty() ? json(nullptr)
                                           : json{{"name", m.receipt_name}, {"sha256", m.receipt_sha256}}},
        {"source_identified", m.source_identified},
        {"ranked_on_other", str_or_null(m.ranked_on_other)},
        {"output_names_keeplist", m.output_names_keeplist}};
}

json verified_json(const CardFacts& f) {
    const CardAudit& a = f.audit;
    json j = a.audited ? json{{"audited", true},
                              {"result", "pass"},
                              {"with_source", a.with_source},
                              {"source_manifest",
                               a.source_manifest.empty()
                                   ? json(nullptr)
                                   : json{{"name", a.source_manifest}, {"sha256", a.source_manifest_sha256}}},
                              {"tool", a.tool},
                              {"date", a.date},
                              {"shards", a.shards},
                              {"tensors", a.tensors},
                              {"tensors_identical", a.tensors_identical},
                              {"expert_tensors", a.expert_tensors},
                              {"slabs", a.slabs},
                              {"bytes_compared", a.bytes_compared},
                              {"kvs_checked", a.kvs_checked},
                              {"hashed", a.hashed}}
                       : json{{"audited", false}};
    j["manifest"] = f.manifest_name.empty() ? json(nullptr)
                                            : json{{"name", f.manifest_name}, {"sha256", f.manifest_sha256}};
    return j;
}

json hardware_json(const CardFacts& f) {
    json fits = json::array();
    for (const CardFitRow& r : f.fits)
        fits.push_back({{"tp", r.tp},
                        {"weights", r.weights},
                        {"kv_cache", r.kv_cache},
                        {"overhead", r.overhead},
                        {"need", r.need},
                        {"need_gib", static_cast<double>(r.need) / static_cast<double>(uint64_t{1} << 30)},
                        {"fits", opt(r.fits)},
                        {"kv_bytes_per_token", r.kv_bytes_per_token}});
    return {{"gpu_mem", f.gpu_mem ? json(f.gpu_mem) : json(nullptr)},
            {"overhead", f.overhead},
            {"ctx", f.ctx},
            {"kv_kind", f.kv_kind},
            {"kv_bytes_per_token", f.kv_bytes_per_token},
            {"cache_type_k", f.cache_type_k},
            {"cache_type_v", f.cache_type_v},
            {"one_gpu",
             {{"offload", str_or_null(f.offload_flag)},
              {"gpu_weights", f.host.split.gpu_weights},
              {"gpu_kv_cache", f.host.split.gpu_kv},
              {"gpu_overhead", f.host.split.gpu_overhead},
              {"gpu_total", f.host.split.gpu_total()},
              {"fits", opt(f.host.fits)},
              {"ram_weights", f.host.split.ram_weights},
              {"ram_experts", f.host.split.ram_experts}}},
            {"tensor_parallel", fits}};
}

}  // namespace

json card_json(const CardFacts& f) {
    json j;
    j["format"] = "gguf-reap.card";
    j["version"] = 1;
    j["tool"] = f.tool;
    j["base_model"] = str_or_null(f.base_model);
    j["base_model_from"] = str_or_null(f.base_model_from);
    j["source_revision"] = str_or_null(f.source_revision);
    if (f.source_files.empty()) {
        j["source_files"] = nullptr;
    } else {
        j["source_files"] = json::array();
        for (const CardFile& x : f.source_files)
            j["source_files"].push_back({{"path", x.name}, {"bytes", x.size}, {"sha256", x.sha256}});
    }
    j["library_name"] = "gguf";
    j["tags"] = f.tags;
    j["license"] = {{"license", str_or_null(f.license)},
                    {"license_name", str_or_null(f.license_name)},
                    {"license_link", str_or_null(f.license_link)}};
    j["arch"] = f.arch;
    j["headline"] = {{"experts_removed_per_layer", f.experts_removed},
                     {"experts_per_layer", f.source.expert_count},
                     {"experts_kept_per_layer", f.build.expert_count},
                     {"moe_layers", f.build.moe_blocks},
                     {"file_bytes", f.build.file_bytes},
                     {"file_gb", decimal_size(f.build.file_bytes)},
                     {"shards", f.build.shards}};
    if (!f.method.fit_words.empty()) j["headline"]["fit"] = f.method.fit_words;
    // rank --fit on another model of the family: that model and K's need there; this build's need, here.
    if (!f.method.fit_words.empty() && !f.method.ranked_on_other.empty())
        j["headline"]["fit_ranked_on"] = {
            {"model", f.method.fit_ranked_on},
            {"need", f.method.fit_ranked_need},
            {"build_need", f.method.fit_build_need ? json(*f.method.fit_build_need) : json(nullptr)},
            {"build_fits",
             f.method.fit_build_need ? json(*f.method.fit_build_need <= f.method.fit_bytes) : json(nullptr)}};
    json quality = json::array();
    for (const CardQuality& q : f.quality)
        quality.push_back({{"text", q.text},
                           {"kld_mean", q.kld_mean},
                           {"kld_mean_err", std::isfinite(q.kld_err) ? json(q.kld_err) : json(nullptr)},
                           {"tokens", q.tokens},
                           {"held_out", q.origin.empty() ? json(nullptr) : json(q.origin == "held-out text")},
                           {"verdict", q.verdict}});
    j["headline"]["quality"] = f.quality.empty() ? json(nullptr) : quality;
    j["source"] = column_json(f.source);
    j["build"] = column_json(f.build);
    j["method"] = method_json(f.method);
    j["verified"] = verified_json(f);
    j["width"] = f.width ? json{{"source_width", f.width->source_width},
                                {"width", f.width->width},
                                {"plan_sha256", f.width->plan_sha256},
                                {"plan_file", str_or_null(f.width->plan_file)}}
                         : json(nullptr);
    j["measured"] = f.eval ? card_eval_json(*f.eval, f.method) : json(nullptr);
    j["not_verified"] = f.not_verified;
    j["hardware"] = hardware_json(f);
    const llama_cpp::RunLines run = card_run_lines(f);
    j["run"] = {{"llama_cli", run.cli},
                {"llama_server", run.server},
                {"llama_server_hf", f.hf_repo.empty() ? json(nullptr) : json(run.server_hf)},
                {"llama_cli_hf", f.hf_repo.empty() ? json(nullptr) : json(run.cli_hf)}};
    json files = json::array();
    for (const CardFile& x : f.files)
        files.push_back({{"name", x.name}, {"size", x.size}, {"sha256", str_or_null(x.sha256)}});
    j["files"] = {{"shards", files}, {"sha256_from", str_or_null(f.hashes_from)}};
    return j;
}

}  // namespace gguf_reap
