// eval's JSON document and its plot (gguf_reap/eval.h; the schema is in docs/eval.md).
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "gguf_reap/eval.h"
#include "io/paths.h"
#include "ops/eval/eval_behaviour.h"
#include "ops/eval/eval_internal.h"
#include "services/svg.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;

json opt(const std::optional<double>& v) {
    return v && std::isfinite(*v) ? json(*v) : json(nullptr);
}
json num(double v) {
    return std::isfinite(v) ? json(v) : json(nullptr);
}

json run_json(const EvalRun& r) {
    const KldFigures& f = r.figures;
    json j;
    j["output"] = r.output;
    j["text"] = r.text;
    j["tokens"] = r.tokens;
    j["chunks"] = f.chunks;
    j["from"] = f.from;
    j["kld"] = {{"mean", num(f.kld.value)}, {"mean_err", num(f.kld.err)}, {"median", opt(f.kld_median)},
                {"p99", opt(f.kld_p99)},    {"p999", opt(f.kld_p999)},    {"max", opt(f.kld_max)}};
    j["same_top"] = {{"mean", num(f.same_top.value)}, {"err", num(f.same_top.err)}};
    j["ppl"] = {{"source", f.ppl_source ? num(f.ppl_source->value) : json(nullptr)},
                {"source_err", f.ppl_source ? num(f.ppl_source->err) : json(nullptr)},
                {"output", num(f.ppl_output.value)},
                {"output_err", num(f.ppl_output.err)}};
    j["ln_ppl_ratio"] = {{"mean", num(f.ln_ppl_ratio.value)}, {"err", num(f.ln_ppl_ratio.err)}};
    j["rms_dp"] = num(f.rms_dp.value);
    j["rms_dp_err"] = num(f.rms_dp.err);
    j["command"] = r.command;
    return j;
}

json token_json(const SmokeToken& t) {
    return {{"id", t.id}, {"text", t.text}};
}

json generation_json(const SmokeGeneration& g) {
    json tokens = json::array();
    std::string text;
    for (const SmokeToken& t : g.tokens) {
        tokens.push_back(token_json(t));
        text += t.text;
    }
    return {{"tokens", tokens}, {"text", text}, {"command", g.command}};
}

json smoke_json(const EvalSmoke& s) {
    json j = {{"prompt", s.prompt},
              {"tokens_requested", s.tokens_requested},
              {"prompt_tokens", s.prompt_tokens},
              {"llama_completion", s.completion_path}};
    j["source"] = generation_json(s.source);
    return j;
}

// An OUT's generation against the source's: how many leading tokens agree, and the first that differs
// (a side is null when its generation ended there).
json output_smoke_json(const EvalSmoke& s, const EvalSmokeOutput& o) {
    json j = generation_json(o.generation);
    j["identical"] = o.identical;
    json diff = nullptr;
    if (o.first_diff) {
        const auto i = static_cast<size_t>(*o.first_diff);
        const auto side = [&](const SmokeGeneration& g) {
            return i < g.tokens.size() ? token_json(g.tokens[i]) : json(nullptr);
        };
        // Counted from 1, as eval's table and the card count tokens (issue 33).
        diff = {{"index", *o.first_diff + 1}, {"source", side(s.source)}, {"output", side(o.generation)}};
    }
    j["first_diff"] = diff;
    return j;
}

// eval.json is meant for upload beside the card: no absolute local path in it. Every string that is one
// (a path, or a word of a recorded command) becomes relative to eval.json's directory when it lies
// under it, else its base name; the same path always maps to the same name, so the card still matches
// runs to builds.
std::string relative_or_base(const std::string& s, const std::filesystem::path& base) {
    if (s.empty() || s.front() != '/') return s;
    const std::filesystem::path rel = std::filesystem::path(s).lexically_normal().lexically_relative(base);
    const bool under = !rel.empty() && *rel.begin() != "..";
    return under ? rel.string() : base_name(s);
}

// Every path in the document, relative or a base name. Values that are texts, not paths, are left as they
// are, even when they start with "/": generated text and prompts ("text", "prompt"), the server endpoint
// and request ("endpoint", "request").
void drop_local_paths(json& j, const std::filesystem::path& base) {
    if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) {
            const std::string& k = it.key();
            if (k == "text" || k == "prompt" || k == "endpoint" || k == "request") continue;
            drop_local_paths(it.value(), base);
        }
        return;
    }
    if (j.is_array()) {
        for (auto& v : j) drop_local_paths(v, base);
        return;
    }
    if (j.is_string()) j = relative_or_base(j.get<std::string>(), base);
}

}  // namespace

std::string eval_detail::path_for_upload(const std::string& path, const std::string& json_out) {
    return relative_or_base(path, std::filesystem::absolute(json_out).parent_path().lexically_normal());
}

json eval_json(const EvalResult& r) {
    json j;
    j["tool"] = r.tool;
    j["kind"] = "gguf-reap eval";
    j["llama_cpp"] = {{"build", r.llama_build}, {"llama_perplexity", r.perplexity_path}};
    // Only when given: an eval without them writes the document it wrote before --llama-args.
    if (!r.llama_args.empty()) j["llama_cpp"]["args"] = r.llama_args;
    j["source"] = {{"path", r.source},
                   {"shards", r.source_shards},
                   {"bytes", r.source_bytes},
                   {"expert_count", r.source_expert_count},
                   {"identity", r.source_identity},
                   {"main_type", r.source_main_type}};
    // With --reference only: the model the source and every build were also measured against.
    if (r.reference)
        j["reference"] = {
            {"path", r.reference->model.path},   {"shards", r.reference->model.shards},
            {"bytes", r.reference->model.bytes}, {"expert_count", r.reference->model.expert_count},
            {"identity", r.reference->identity}, {"main_type", r.reference->main_type}};
    j["settings"] = {{"ctx", r.ctx},
                     {"batch", r.batch},
                     {"chunks", r.chunks_requested ? json(*r.chunks_requested) : json(nullptr)},
                     {"scored_per_chunk", r.ctx - 1 - r.ctx / 2}};
    json texts = json::array();
    for (const EvalTextFacts& t : r.texts) {
        json tj = {{"name", t.name},
                   {"path", t.path},
                   {"sha256", t.sha256},
                   {"bytes", t.bytes},
                   {"tokens", t.tokens},
                   {"chunks", t.chunks},
                   {"scored_tokens", t.scored_tokens},
                   {"source_ppl", t.base.ppl ? num(t.base.ppl->value) : json(nullptr)},
                   {"base_file", t.base.file},
                   {"base_bytes", t.base.bytes},
                   {"base_cached", t.base.cached},
                   {"base_command", t.base.command},
                   {"tokenize_command", t.tokenize_command}};
        if (const auto& b = t.reference_base)
            tj["reference_base"] = {{"ppl", b->ppl ? num(b->ppl->value) : json(nullptr)},
                                    {"file", b->file},
                                    {"bytes", b->bytes},
                                    {"cached", b->cached},
                                    {"command", b->command}};
        texts.push_back(tj);
    }
    j["texts"] = texts;
    json outs = json::array();
    for (size_t i = 0; i < r.outputs.size(); ++i) {
        const EvalOutputFacts& o = r.outputs[i];
        json oj = {
            {"path", o.path}, {"shards", o.shards}, {"bytes", o.bytes}, {"expert_count", o.expert_count}};
        if (r.smoke) oj["smoke"] = output_smoke_json(*r.smoke, r.smoke->outputs[i]);
        outs.push_back(oj);
    }
    j["outputs"] = outs;
    json runs = json::array();
    for (const EvalRun& run : r.runs) runs.push_back(run_json(run));
    j["runs"] = runs;
    if (r.reference) {
        json against = json::array();
        for (const EvalRun& run : r.reference_runs) against.push_back(run_json(run));
        j["reference_runs"] = against;
    }
    if (r.smoke) j["smoke"] = smoke_json(*r.smoke);  // absent without --smoke-prompt
    eval_detail::add_behaviour_json(j, r);
    j["files"] = {{"json", r.json_written.empty() ? json(nullptr) : json(base_name(r.json_written))},
                  {"svg", r.svg_written.empty() ? json(nullptr) : json(base_name(r.svg_written))},
                  {"svg_sha256", r.svg_sha256.empty() ? json(nullptr) : json(r.svg_sha256)},
                  {"generations",
                   r.generations_written.empty() ? json(nullptr) : json(base_name(r.generations_written))}};
    if (!r.json_written.empty())
        drop_local_paths(j, std::filesystem::absolute(r.json_written).parent_path().lexically_normal());
    return j;
}

namespace {

// The KLD plot, a whole SVG document kKldW × kKldH.
constexpr double kKldW = 720, kKldH = 450;
std::string kld_svg(const EvalResult& r) {
    // Size (x, in the byte unit that fits, from near the smallest build to the source) against mean KLD
    // (y, from 0: the source's own KLD); a point per build and text with its error bar and K, the source
    // as a black square at KLD 0 (docs/eval.md, "eval.svg").
    constexpr double W = kKldW, H = kKldH, L = 70, R = 150, T = 52, B = 66;
    double xlo = static_cast<double>(r.source_bytes), xhi = xlo, ymax = 0;
    for (const EvalOutputFacts& o : r.outputs) {
        xlo = std::min(xlo, static_cast<double>(o.bytes));
        xhi = std::max(xhi, static_cast<double>(o.bytes));
    }
    for (const EvalRun& run : r.runs)
        if (std::isfinite(run.figures.kld.value))
            ymax = std::max(ymax, run.figures.kld.value +
                                      (std::isfinite(run.figures.kld.err) ? run.figures.kld.err : 0.0));
    const SvgByteUnit unit = svg_byte_unit(xhi);
    const SvgAxis xa = svg_axis(xlo / unit.bytes, xhi / unit.bytes);
    const SvgAxis ya = svg_axis(0, ymax > 0 ? ymax : 1, 5, true);
    auto px = [&](double bytes) { return xa.at(bytes / unit.bytes, L, W - R); };
    auto py = [&](double kld) { return ya.at(kld, H - B, T); };
    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
        W, H);
    s +=
        fmt::format("<text x=\"{}\" y=\"18\" font-size=\"14\">Mean KL divergence to {} against size</text>\n",
                    L, svg_escape(base_name(r.source)));
    s += fmt::format(
        "<text class=\"context\" x=\"{}\" y=\"36\" fill=\"#444\">context {} tokens per chunk; bars: ± one "
        "standard error; K: experts kept per MoE block</text>\n",
        L, r.ctx);
    s += "<g class=\"grid\" stroke=\"#e4e4e4\">";
    for (double v : ya.ticks())
        s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/>", L, py(v), W - R);
    for (double v : xa.ticks())
        s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>", px(v * unit.bytes), T,
                         H - B);
    s += "</g>\n";
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", L, H - B,
                     W - R);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", L, H - B, T);
    for (double v : xa.ticks())
        s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(v * unit.bytes),
                         H - B + 16, xa.label(v));
    for (double v : ya.ticks())
        s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", L - 6, py(v) + 4,
                         ya.label(v));
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">size on disk ({})</text>\n",
                     (L + W - R) / 2, H - 12, unit.name);
    s += fmt::format(
        "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">mean KLD</text>\n",
        (T + H - B) / 2, (T + H - B) / 2);
    // K of each build and of the source, once, in a row under the size axis's ticks.
    for (const EvalOutputFacts& o : r.outputs)
        s += fmt::format(
            "<text class=\"k\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">K={}</text>\n",
            px(static_cast<double>(o.bytes)), H - B + 32, o.expert_count);
    s += fmt::format(
        "<text class=\"k\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">K={}</text>\n",
        px(static_cast<double>(r.source_bytes)), H - B + 32, r.source_expert_count);
    for (size_t ti = 0; ti < r.texts.size(); ++ti) {
        const char* colour = kSvgColours[ti % std::size(kSvgColours)];
        struct Pt {
            double x, y, err;
        };
        std::vector<Pt> pts;
        for (const EvalRun& run : r.runs) {
            if (run.text != r.texts[ti].name || !std::isfinite(run.figures.kld.value)) continue;
            for (const EvalOutputFacts& o : r.outputs)
                if (o.path == run.output)
                    pts.push_back({static_cast<double>(o.bytes), run.figures.kld.value,
                                   std::isfinite(run.figures.kld.err) ? run.figures.kld.err : 0.0});
        }
        std::sort(pts.begin(), pts.end(), [](const Pt& a, const Pt& b) { return a.x < b.x; });
        // The line runs from the builds to the source, whose KLD to itself is 0.
        std::string poly;
        for (const Pt& p : pts) poly += fmt::format("{:.1f},{:.1f} ", px(p.x), py(p.y));
        poly += fmt::format("{:.1f},{:.1f}", px(static_cast<double>(r.source_bytes)), py(0));
        s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", colour,
                         poly);
        for (const Pt& p : pts) {
            s += fmt::format(
                "<line class=\"err\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
                "stroke=\"{3}\"/>\n",
                px(p.x), py(std::max(0.0, p.y - p.err)), py(p.y + p.err), colour);
            s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"/>\n", px(p.x), py(p.y),
                             colour);
        }
        const double ly = T + 10 + 18.0 * static_cast<double>(ti);
        s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", W - R + 16,
                         ly - 10, colour);
        s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", W - R + 34, ly, svg_escape(r.texts[ti].name));
    }
    const double sx = px(static_cast<double>(r.source_bytes)), sy = py(0);
    // Named in the legend only: a label beside it would cross the lines that end there.
    s += fmt::format(
        "<g class=\"source\"><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"9\" height=\"9\" fill=\"black\"/></g>\n",
        sx - 4.5, sy - 4.5);
    const double ly = T + 10 + 18.0 * static_cast<double>(r.texts.size());
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"black\"/><text x=\"{}\" y=\"{}\">source "
        "(K={})</text>\n",
        W - R + 16, ly - 10, W - R + 34, ly, r.source_expert_count);
    s += "</svg>\n";
    return s;
}

}  // namespace

// The KLD plot (with --text, kKldW × kKldH) above the behaviour panel (with --prompts, kKldW × H).
std::string eval_svg(const EvalResult& r) {
    constexpr double W = kKldW, H = 400;
    std::string kld;
    if (!r.texts.empty()) {
        kld = kld_svg(r);
        if (r.panels.empty()) return kld;
        // Its body: without the <svg> line and the background <rect> line, and without "</svg>".
        kld = kld.substr(kld.find('\n', kld.find('\n') + 1) + 1);
        kld.resize(kld.rfind("</svg>"));
    }
    const double top = r.texts.empty() ? 0 : kKldH;
    const double height = top + H;
    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
        W, height);
    s += kld;
    s += eval_detail::behaviour_svg(r, top, W, H);
    s += "</svg>\n";
    return s;
}

}  // namespace gguf_reap
