// card, rendering: the Markdown card from CardFacts (docs/card.md); the --json document from the same facts
// is card_json.cpp.
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "gguf_reap/audit.h"
#include "gguf_reap/card.h"
#include "gguf_reap/estimate.h"
#include "gguf_reap/llama_args.h"
#include "gguf_reap/manifest.h"
#include "gguf_reap/rank.h"
#include "io/paths.h"
#include "io/units.h"
#include "ops/card/card_steps.h"
#include "services/llama_cpp/llama_recipes.h"

namespace gguf_reap {

// Decimal units, as disk and download sizes are sold: GB = 10^9 bytes (MB, kB below 1 GB).
std::string decimal_size(uint64_t b) {
    const double x = static_cast<double>(b);
    if (b >= 1000000000) return fmt::format("{:.1f} GB", x / 1e9);
    if (b >= 1000000) return fmt::format("{:.1f} MB", x / 1e6);
    if (b >= 1000) return fmt::format("{:.1f} kB", x / 1e3);
    return fmt::format("{} B", b);
}

// The llama.cpp commands of "How to run" (the same text in the card and the JSON): from the Hugging
// Face repository (with --hf-repo), and from the downloaded files.
llama_cpp::RunLines card_run_lines(const CardFacts& f) {
    llama_cpp::RunRecipe r;
    r.first_shard = f.build.first_shard;
    if (!f.hf_repo.empty()) r.hf_ref = f.quant.empty() ? f.hf_repo : f.hf_repo + ":" + f.quant;
    r.ctx = f.ctx;
    r.offload = f.offload_flag;
    r.cache_type_k = f.cache_type_k;
    r.cache_type_v = f.cache_type_v;
    return llama_cpp::run_lines(r);
}

namespace {

using json = nlohmann::ordered_json;

// GiB = 2^30 bytes: two decimals from 1 GiB up, four below, so that small per-GPU shares (a router, a
// KV cache at TP 8) do not all read 0.00. The JSON has the exact bytes.
std::string gib(uint64_t b) {
    const double g = static_cast<double>(b) / static_cast<double>(uint64_t{1} << 30);
    return g >= 1 ? fmt::format("{:.2f}", g) : fmt::format("{:.4f}", g);
}

// A YAML scalar: JSON strings are valid YAML, and quoting keeps ':' and '#' in names harmless.
std::string yaml(const std::string& s) {
    return json(s).dump();
}

std::string types_cell(const std::map<std::string, uint64_t>& t) {
    std::string s;
    for (const auto& [type, n] : t) s += fmt::format("{}{} ×{}", s.empty() ? "" : ", ", type, n);
    return s;
}

// "Kimi-K2-REAP-Q4_K_M-00001-of-00013.gguf" → "Kimi-K2-REAP-Q4_K_M"
std::string build_name(const std::string& first_shard) {
    std::string s = first_shard;
    if (s.size() > 5 && s.compare(s.size() - 5, 5, ".gguf") == 0) s.resize(s.size() - 5);
    const auto p = s.rfind("-00001-of-");
    if (p != std::string::npos && s.size() - p == 15) s.resize(p);
    return s;
}

std::string plural(uint64_t n, const char* one, const char* many) {
    return fmt::format("{} {}", with_commas(n), n == 1 ? one : many);
}

// A mean KLD as the headline gives it: two decimals, or two significant digits below 0.01.
std::string kld_text(double v) {
    return v >= 0.01 || v == 0 ? fmt::format("{:.2f}", v) : fmt::format("{:.2g}", v);
}

// Why K was chosen, when rank --fit chose it. Ranked on this source: K is the most that fit the budget.
// Ranked on another model of the family: what was ranked on what, and what this build needs against the
// same budget, two claims never made one (issue 40).
std::string fit_sentence(const CardFacts& f) {
    const CardMethod& m = f.method;
    if (m.fit_words.empty()) return "";
    const std::string k = with_commas(f.build.expert_count), fit = card_option(f, RankOptions::kFit);
    if (m.ranked_on_other.empty())
        return fmt::format(" {} is the most experts that fit {} (`rank {}`).", k, m.fit_words, fit);
    std::string s = fmt::format(
        " {} was chosen by `rank {}` on `{}`, not on this build's source: the most "
        "experts that fit {} there{}.",
        k, fit, m.fit_ranked_on.empty() ? "another model" : m.fit_ranked_on, m.fit_words,
        m.fit_ranked_need.empty() ? "" : " (" + m.fit_ranked_need + ")");
    if (m.fit_build_need)
        s += fmt::format(" This build, measured the same way, needs {}: it {} {}.",
                         human_bytes(*m.fit_build_need),
                         *m.fit_build_need <= m.fit_bytes ? "fits" : "does not fit", m.fit_words);
    return s;
}

// A file name as a relative link: every byte outside RFC 3986's unreserved set percent-encoded.
std::string link_target(const std::string& name) {
    std::string s;
    for (const char c : name) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~')
            s += c;
        else
            s += fmt::format("%{:02X}", u);
    }
    return s;
}

constexpr size_t kSuperExpertsListed = 16;  // the rest are in keeplist.json and the receipt

void front_matter(std::string& s, const CardFacts& f) {
    s += "---\n";
    if (!f.base_model.empty()) s += "base_model: " + yaml(f.base_model) + "\n";
    s += "library_name: gguf\n";
    if (!f.license.empty()) s += "license: " + yaml(f.license) + "\n";
    if (!f.license_name.empty()) s += "license_name: " + yaml(f.license_name) + "\n";
    if (!f.license_link.empty()) s += "license_link: " + yaml(f.license_link) + "\n";
    s += "tags:\n";
    for (const auto& t : f.tags) s += "- " + yaml(t) + "\n";
    s += "---\n\n";
}

void comparison_table(std::string& s, const CardFacts& f) {
    const CardModelColumn &a = f.source, &b = f.build;
    s += "| | source | this build |\n| --- | ---: | ---: |\n";
    const auto row = [&](const char* what, const std::string& x, const std::string& y) {
        s += fmt::format("| {} | {} | {} |\n", what, x, y);
    };
    const auto num = [](uint64_t v) { return with_commas(v); };
    const auto bytes = [](uint64_t v) { return fmt::format("{} ({})", with_commas(v), decimal_size(v)); };
    row("routed experts per MoE layer", num(a.expert_count), num(b.expert_count));
    row("experts routed per token", num(a.expert_used_count), num(b.expert_used_count));
    row("MoE layers", num(a.moe_blocks), num(b.moe_blocks));
    row("expert FFN width", num(a.expert_width), num(b.expert_width));
    row("parameters", num(a.parameters), num(b.parameters));
    row("active parameters per token", num(a.active_parameters), num(b.active_parameters));
    row("size on disk, bytes", bytes(a.file_bytes), bytes(b.file_bytes));
    row("decode bytes per token", bytes(a.decode_bytes_per_token), bytes(b.decode_bytes_per_token));
    row("tensor types (tensors)", types_cell(a.tensor_types), types_cell(b.tensor_types));
    row("shards", num(a.shards), num(b.shards));
    s += fmt::format(
        "\nSource: `{}`. Decode bytes per token: the weights one token reads (dense tensors, routers, and "
        "{} routed experts per MoE layer), as `gguf-reap estimate` counts them.\n\n",
        a.first_shard, b.expert_used_count);
}

void method_section(std::string& s, const CardFacts& f) {
    const CardMethod& m = f.method;
    s += "## Method\n\n";
    if (!m.from_plan_file.empty())
        s += fmt::format(
            "- **The kept experts come from another tool's plan**: `{}` ({} format{}), imported with `rank "
            "{}`. The criterion and consensus below only score that plan.\n",
            m.from_plan_file, m.from_plan_format,
            m.from_plan_sha256.empty() ? std::string() : ", sha256 `" + m.from_plan_sha256 + "`",
            card_option(f, RankOptions::kFromPlan));
    s += fmt::format(
        "- Criterion `{}`: {}{}.\n", m.criterion, m.criterion_words,
        m.score_field.empty() ? std::string() : fmt::format(" (score field `{}`)", m.score_field));
    s += fmt::format("- Consensus `{}`: {}.\n", m.consensus, m.consensus_words);
    if (!m.rule.empty())
        s += fmt::format("- Rule: `{}`, the same number of experts kept in every MoE layer.\n", m.rule);
    s += "- Calibration domains (llama.cpp imatrix files):\n";
    for (const CardDomain& d : m.domains) {
        std::string ds;
        for (const auto& x : d.datasets) ds += (ds.empty() ? "" : ", ") + x;
        if (!d.text_sha256.empty()) {
            // gguf-reap calibrate's record: the text by its sha256, and how much of it was used.
            const std::string amount = d.tokens && d.text_tokens > *d.tokens
                                           ? fmt::format("the first {} of the {}", with_commas(*d.tokens),
                                                         plural(d.text_tokens, "token", "tokens"))
                                       : d.tokens ? plural(*d.tokens, "token", "tokens")
                                                  : std::string("the tokens");
            s += fmt::format("  - {}: {} of `{}` (sha256 `{}`), by `gguf-reap calibrate`\n", d.name, amount,
                             base_name(d.text), d.text_sha256);
            continue;
        }
        s += fmt::format(
            "  - {}: {}{}\n", d.name,
            d.tokens ? plural(*d.tokens, "token", "tokens") : std::string("token count not recorded"),
            ds.empty() ? "" : fmt::format(" ({})", ds));
    }
    if (m.dead_experts == 0)
        s += "- Dead experts: none (every expert was routed in at least one domain).\n";
    else
        s += fmt::format(
            "- Dead experts: {} never routed in any calibration domain, in {} of {} MoE layers; all are "
            "among the removed.\n",
            with_commas(m.dead_experts), m.dead_blocks, f.source.moe_blocks);
    std::string thresholds;
    if (m.super_share_threshold && m.super_channel_ratio_threshold)
        thresholds = fmt::format(
            " (an expert carrying at least {:.1f} % of its layer's energy in a domain, or whose hottest "
            "channel is at least {:.0f}× the layer's median)",
            100 * *m.super_share_threshold, *m.super_channel_ratio_threshold);
    if (m.super_experts.empty()) {
        s += fmt::format("- Super-experts{}: none found.\n", thresholds);
    } else {
        s += fmt::format("- Super-experts and protected experts, always kept{}: {}.\n", thresholds,
                         with_commas(m.super_experts.size()));
        for (size_t i = 0; i < m.super_experts.size() && i < kSuperExpertsListed; ++i) {
            const CardSuperExpert& e = m.super_experts[i];
            s += fmt::format("  - blk.{} expert {}: {}\n", e.block, e.expert, e.reason);
        }
        if (m.super_experts.size() > kSuperExpertsListed)
            s += fmt::format("  - … and {} more (keeplist.json)\n",
                             m.super_experts.size() - kSuperExpertsListed);
    }
    if (!m.safety_margin.empty()) s += fmt::format("- Safety margin: {}.\n", m.safety_margin);
    s += fmt::format("- Keeplist: {}, sha256 `{}`", file_ref(f, "keeplist.json"), m.keeplist_sha256);
    if (!m.ranked_on_other.empty()) {
        const std::string& r = m.ranked_on_other;
        s += fmt::format("; {}", r.substr(0, r.find(" (")));
        s += ": one ranking serves every quantisation of the same network";
    }
    if (!m.receipt_name.empty())
        s += fmt::format("; receipt {}, sha256 `{}`", file_ref(f, m.receipt_name), m.receipt_sha256);
    s += ".\n";
    if (!f.calibration_name.empty())
        s += fmt::format("- Calibration record (`gguf-reap calibrate`): {}, sha256 `{}`.\n",
                         file_ref(f, f.calibration_name), f.calibration_sha256);
    s += "\n";
}

void verified_section(std::string& s, const CardFacts& f) {
    const CardAudit& a = f.audit;
    s += "## Verified\n\n";
    if (!a.audited) {
        s += "Not audited.\n\n";
    } else if (a.with_source) {
        s += fmt::format(
            "**PASS**: `gguf-reap audit` ({}, {}) verified {} tensors in {} from the disk: {} byte-identical "
            "to the source, {} expert tensors whose {} kept expert slabs equal their source experts; {} "
            "bytes "
            "compared, {} key/value pairs checked.\n\n",
            a.tool, a.date, with_commas(a.tensors), plural(a.shards, "shard", "shards"),
            with_commas(a.tensors_identical), with_commas(a.expert_tensors), with_commas(a.slabs),
            with_commas(a.bytes_compared), with_commas(a.kvs_checked));
        if (!a.source_manifest.empty())
            s += fmt::format(
                "The bytes were compared by sha256 with the source's manifest `{}` (sha256 `{}`: a hash per "
                "tensor and per expert slab of the source, made by `gguf-reap audit SOURCE {}`), "
                "not with the source files themselves.\n\n",
                a.source_manifest, a.source_manifest_sha256, card_option(f, ops::AuditRequest::kManifestOut));
    } else {
        s += fmt::format(
            "**PASS (structure only)**: `gguf-reap audit` ({}, {}) checked the structure of {} tensors in {} "
            "(run without {}: the bytes were not compared with the source).\n\n",
            a.tool, a.date, with_commas(a.tensors), plural(a.shards, "shard", "shards"),
            card_option(f, AuditOptions::kSource));
    }
    if (!f.manifest_name.empty())
        s += fmt::format(
            "Manifest {}, sha256 `{}`: the sha256 of every shard and tensor (`gguf-reap audit {} {} "
            "{}` verifies a copy; `sha256sum -c {}` checks the shards{}).\n\n",
            file_ref(f, f.manifest_name), f.manifest_sha256, f.build.first_shard,
            card_option(f, AuditOptions::kManifest), f.manifest_name, manifest_sums_path(f.manifest_name),
            f.manifest_sums.empty() ? "" : ": " + file_ref(f, f.manifest_sums));
}

void hardware_section(std::string& s, const CardFacts& f) {
    s += "## Hardware fit\n\n";
    const CardHostRow& h = f.host;
    s += fmt::format(
        "One GPU with the host's RAM, as llama.cpp places the build (`{}`): the GPU holds {}, {}{}; RAM "
        "holds "
        "the token embeddings{}. GiB = 2^30 bytes.\n\n",
        llama_cpp::one_gpu_args(f.offload_flag),
        f.offload_flag.empty() ? "every other weight" : "the weights not in RAM",
        f.ctx ? "the KV cache for " + plural(f.ctx, "token", "tokens")
              : fmt::format("no KV cache ({} 0)", card_option(f, Deployment::kCtx)),
        f.overhead ? fmt::format(" and {} GiB of overhead", gib(f.overhead))
                   : std::string(" and no overhead"),
        f.offload_flag.empty() ? "" : " and the routed experts the flag moves there");
    s +=
        "| device | weights, GiB | KV cache, GiB | total, GiB | fits |\n| --- | ---: | ---: | ---: | --- |\n";
    s += fmt::format("| GPU | {} | {} | {} | {} |\n", gib(h.split.gpu_weights), gib(h.split.gpu_kv),
                     gib(h.split.gpu_total()),
                     !h.fits   ? "–"
                     : *h.fits ? "yes"
                               : "no");
    s += fmt::format("| RAM | {} | – | {} | – |\n\n", gib(h.split.ram_weights), gib(h.split.ram_weights));
    const std::string cache = f.cache_type_k == "f16" && f.cache_type_v == "f16"
                                  ? std::string("F16 cache")
                                  : fmt::format("cache types K {}, V {}", f.cache_type_k, f.cache_type_v);
    s += fmt::format(
        "From `gguf-reap estimate` of this build. Per GPU at tensor parallel N: {}{}. KV "
        "cache: {} bytes per token ({}, {}).\n\n",
        f.ctx ? fmt::format("weights + KV cache for {} + overhead {} GiB", plural(f.ctx, "token", "tokens"),
                            gib(f.overhead))
              : fmt::format("weights + overhead {} GiB (no KV cache budgeted: {} 0)", gib(f.overhead),
                            card_option(f, Deployment::kCtx)),
        f.gpu_mem ? fmt::format(", against {} GiB per GPU", gib(f.gpu_mem))
                  : "; no fit verdict without " + card_option(f, Deployment::kGpuMem),
        with_commas(f.kv_bytes_per_token), f.kv_kind, cache);
    s += "| TP | weights per GPU, GiB | KV cache, GiB | total per GPU, GiB | fits | KV bytes per token per "
         "GPU |\n";
    s += "| ---: | ---: | ---: | ---: | --- | ---: |\n";
    for (const CardFitRow& r : f.fits)
        s += fmt::format("| {} | {} | {} | {} | {} | {} |\n", r.tp, gib(r.weights), gib(r.kv_cache),
                         gib(r.need),
                         !r.fits   ? "–"
                         : *r.fits ? "yes"
                                   : "no",
                         with_commas(r.kv_bytes_per_token));
    s += "\n";
}

void run_section(std::string& s, const CardFacts& f) {
    s += "## How to run\n\n";
    const llama_cpp::RunLines run = card_run_lines(f);
    if (!f.hf_repo.empty()) {
        s += "From Hugging Face (llama.cpp downloads the files itself):\n\n```\n";
        s += run.server_hf + "\n" + run.cli_hf + "\n```\n\n";
        s += "From the downloaded files:\n\n";
    }
    s += "```\n";
    s += run.cli + "\n" + run.server + "\n";
    s += "```\n\n";
    if (f.build.shards > 1)
        s += fmt::format(
            "Download all {} shards into one directory: llama.cpp opens the others from the first.\n\n",
            f.build.shards);
}

void files_section(std::string& s, const CardFacts& f) {
    s += "## Files\n\n| file | bytes | sha256 |\n| --- | ---: | --- |\n";
    for (const CardFile& x : f.files)
        s += fmt::format("| {} | {} | {} |\n", file_ref(f, x.name), with_commas(x.size),
                         x.sha256.empty() ? "not recorded" : "`" + x.sha256 + "`");
    s += "\n";
    if (f.eval && !f.eval->svg.empty()) {
        if (f.links) s += fmt::format("![mean KLD against size per text]({})\n\n", link_target(f.eval->svg));
        s += fmt::format("Plot: {} ({} bytes), mean KLD against size per text, from {}.\n\n",
                         file_ref(f, f.eval->svg), with_commas(f.eval->svg_bytes), file_ref(f, f.eval->file));
    }
    if (!f.source_revision.empty())
        s += fmt::format("Pruned from `{}` (the Hub revision pinned when the source was read).\n\n",
                         f.source_revision);
    if (!f.source_files.empty()) {
        s += "Source files, with the sha256 the Hub lists for each (its lfs.oid):\n\n"
             "| source file | bytes | sha256 |\n| --- | ---: | --- |\n";
        for (const CardFile& x : f.source_files)
            s += fmt::format("| `{}` | {} | `{}` |\n", x.name, with_commas(x.size), x.sha256);
        s += "\n";
    }
    if (f.hashes_from == "manifest")
        s += fmt::format("sha256 from the manifest `{}`.\n\n", f.manifest_name);
    else if (f.hashes_from == "audit")
        s += "sha256 from the audit, which hashed every shard.\n\n";
    else
        s += fmt::format(
            "The sha256 of the shards is not recorded: run `gguf-reap audit {} {} {} {} MANIFEST.json` and "
            "give `gguf-reap card {} MANIFEST.json`.\n\n",
            f.build.first_shard, card_option(f, AuditOptions::kSource), f.source.first_shard,
            card_option(f, ops::AuditRequest::kManifestOut), card_option(f, AuditOptions::kManifest));
}

}  // namespace

std::string file_ref(const CardFacts& f, const std::string& name) {
    return f.links ? fmt::format("[`{}`]({})", name, link_target(name)) : fmt::format("`{}`", name);
}

std::string render_card_markdown(const CardFacts& f) {
    std::string s;
    front_matter(s, f);
    s += fmt::format("# {}\n\n", build_name(f.build.first_shard));
    s += fmt::format(
        "**{} of {} routed experts removed per MoE layer** ({} kept in each of the {} MoE layers, {} routed "
        "per token): {} in {}, from {}.{}\n\n",
        with_commas(f.experts_removed), with_commas(f.source.expert_count), with_commas(f.build.expert_count),
        f.build.moe_blocks, f.build.expert_used_count, decimal_size(f.build.file_bytes),
        plural(f.build.shards, "shard", "shards"), decimal_size(f.source.file_bytes), fit_sentence(f));
    // The verdict a visitor reads first: measured figures, in the words docs/eval.md gives them.
    if (f.quality.empty()) {
        s += "**Quality**: not measured against the source (no `gguf-reap eval`; see Not verified).\n\n";
    } else {
        std::string q;
        for (size_t i = 0; i < f.quality.size(); ++i) {
            const CardQuality& x = f.quality[i];
            // Each KLD with llama-perplexity's ± and the tokens it was scored on; "held-out text" only
            // for a text that is none of the calibration texts (text_origin).
            q += fmt::format("{}{}{}{} on {} ({} tokens{}): {}", i ? "; " : "", i ? "" : "KLD ",
                             kld_text(x.kld_mean),
                             std::isfinite(x.kld_err) ? " ± " + kld_text(x.kld_err) : std::string(), x.text,
                             with_commas(static_cast<uint64_t>(x.tokens)),
                             x.origin.empty() ? std::string() : ", " + x.origin, x.verdict);
        }
        s += fmt::format(
            "**Quality**: {} (mean KL divergence to the source per kind of text, ± {}'s uncertainty, "
            "`gguf-reap eval`; the words are the thresholds under Measured against the source).\n\n",
            q, llama_tool_name(LlamaTool::perplexity));
    }
    s += fmt::format(
        "Made with gguf-reap (`rank`, then `splice`): routed experts removed from {}{} without "
        "requantisation; the kept tensors are copied as they are. GB = 10^9 bytes.\n\n",
        f.base_model.empty() ? "the source" : "`" + f.base_model + "`",
        f.width ? fmt::format(", and every expert's FFN cut from {} to {} channels", f.width->source_width,
                              f.width->width)
                : std::string());
    comparison_table(s, f);
    method_section(s, f);
    verified_section(s, f);
    measured_section(s, f);
    s += "## Not verified\n\n";
    for (const auto& n : f.not_verified) s += "- " + n + "\n";
    s += "\n";
    hardware_section(s, f);
    run_section(s, f);
    files_section(s, f);
    s += fmt::format("Card written by {} `card`: every figure above is computed from the files named here.\n",
                     f.tool);
    return s;
}

}  // namespace gguf_reap
