// eval's plot, eval.svg (docs/eval.md, "eval.svg"): the KLD against size, and the behaviour runs' loop
// rates. eval.json is services/eval_report's.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "io/paths.h"
#include "ops/eval/eval_report.h"
#include "services/svg.h"

namespace gguf_reap {

namespace {

// The KLD plot, a whole SVG document kKldW × kKldH: size (x, in the byte unit that fits, from near the
// smallest build to the source) against mean KLD (y, from 0: the source's own KLD); a point per build and
// text with its error bar and K, the source as a black square at KLD 0 (docs/eval.md, "eval.svg").
constexpr double kKldW = 720, kKldH = 450;

// Its margins and axes, in pixels.
struct KldFrame {
    static constexpr double W = kKldW, H = kKldH, L = 70, R = 150, T = 52, B = 66;
    SvgByteUnit unit;
    SvgAxis xa, ya;
    double px(double bytes) const { return xa.at(bytes / unit.bytes, L, W - R); }
    double py(double kld) const { return ya.at(kld, H - B, T); }
};

KldFrame kld_frame(const EvalResult& r) {
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
    return {unit, svg_axis(xlo / unit.bytes, xhi / unit.bytes), svg_axis(0, ymax > 0 ? ymax : 1, 5, true)};
}

// The title, the grid, both axes with their ticks and labels, and K of each build and of the source, once,
// in a row under the size axis's ticks.
std::string kld_axes(const EvalResult& r, const KldFrame& f) {
    constexpr double W = KldFrame::W, H = KldFrame::H, L = KldFrame::L, R = KldFrame::R, T = KldFrame::T,
                     B = KldFrame::B;
    std::string s =
        fmt::format("<text x=\"{}\" y=\"18\" font-size=\"14\">Mean KL divergence to {} against size</text>\n",
                    L, svg_escape(base_name(r.source)));
    s += fmt::format(
        "<text class=\"context\" x=\"{}\" y=\"36\" fill=\"#444\">context {} tokens per chunk; bars: ± one "
        "standard error; K: experts kept per MoE block</text>\n",
        L, r.ctx);
    s += "<g class=\"grid\" stroke=\"#e4e4e4\">";
    for (double v : f.ya.ticks())
        s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/>", L, f.py(v), W - R);
    for (double v : f.xa.ticks())
        s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>",
                         f.px(v * f.unit.bytes), T, H - B);
    s += "</g>\n";
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", L, H - B,
                     W - R);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", L, H - B, T);
    for (double v : f.xa.ticks())
        s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                         f.px(v * f.unit.bytes), H - B + 16, f.xa.label(v));
    for (double v : f.ya.ticks())
        s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", L - 6, f.py(v) + 4,
                         f.ya.label(v));
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">size on disk ({})</text>\n",
                     (L + W - R) / 2, H - 12, f.unit.name);
    s += fmt::format(
        "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">mean KLD</text>\n",
        (T + H - B) / 2, (T + H - B) / 2);
    const auto k = [&](uint64_t bytes, uint64_t experts) {
        return fmt::format(
            "<text class=\"k\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">K={}</text>\n",
            f.px(static_cast<double>(bytes)), H - B + 32, experts);
    };
    for (const EvalOutputFacts& o : r.outputs) s += k(o.bytes, o.expert_count);
    s += k(r.source_bytes, r.source_expert_count);
    return s;
}

// Text `ti`'s line, from the builds to the source (whose KLD to itself is 0), its points with their error
// bars, and its legend entry.
std::string kld_series(const EvalResult& r, const KldFrame& f, size_t ti) {
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
    std::string poly;
    for (const Pt& p : pts) poly += fmt::format("{:.1f},{:.1f} ", f.px(p.x), f.py(p.y));
    poly += fmt::format("{:.1f},{:.1f}", f.px(static_cast<double>(r.source_bytes)), f.py(0));
    std::string s = fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                                colour, poly);
    for (const Pt& p : pts) {
        s += fmt::format(
            "<line class=\"err\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
            "stroke=\"{3}\"/>\n",
            f.px(p.x), f.py(std::max(0.0, p.y - p.err)), f.py(p.y + p.err), colour);
        s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"/>\n", f.px(p.x), f.py(p.y),
                         colour);
    }
    const double ly = KldFrame::T + 10 + 18.0 * static_cast<double>(ti);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n",
                     KldFrame::W - KldFrame::R + 16, ly - 10, colour);
    s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", KldFrame::W - KldFrame::R + 34, ly,
                     svg_escape(r.texts[ti].name));
    return s;
}

std::string kld_svg(const EvalResult& r) {
    const KldFrame f = kld_frame(r);
    constexpr double W = KldFrame::W, H = KldFrame::H, R = KldFrame::R, T = KldFrame::T;
    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
        W, H);
    s += kld_axes(r, f);
    for (size_t ti = 0; ti < r.texts.size(); ++ti) s += kld_series(r, f, ti);
    const double sx = f.px(static_cast<double>(r.source_bytes)), sy = f.py(0);
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

// A build's name as the behaviour legend shows it, at most `max` characters: its base name without
// ".gguf" and a split's "-00001-of-00003"; when that is longer, the part every build's name shares at the
// start (up to a '-', '_' or '.') becomes "…"; when that is still longer, its middle becomes "…", so the
// start and the end, where names of builds tend to differ, stay (docs/eval.md, "eval.svg").
std::string legend_name(const std::string& model, const std::vector<std::string>& builds, size_t max) {
    const auto plain = [](const std::string& m) {
        std::string n = base_name(m);
        if (n.size() > 5 && n.ends_with(".gguf")) n.resize(n.size() - 5);
        // -NNNNN-of-NNNNN
        if (n.size() > 15 && n.compare(n.size() - 15, 1, "-") == 0 && n.compare(n.size() - 9, 4, "-of-") == 0)
            n.resize(n.size() - 15);
        return n;
    };
    const auto chars = [](std::string_view t) {  // UTF-8 characters
        return static_cast<size_t>(
            std::count_if(t.begin(), t.end(), [](char c) { return (c & 0xC0) != 0x80; }));
    };
    std::string n = plain(model);
    if (chars(n) <= max) return n;
    size_t common = n.size();
    for (const std::string& b : builds) {
        const std::string o = plain(b);
        size_t i = 0;
        while (i < common && i < o.size() && o[i] == n[i]) ++i;
        if (o != n) common = i;
    }
    if (common < n.size()) {  // another build's name shares it
        while (common > 0 && std::string_view("-_.").find(n[common - 1]) == std::string_view::npos) --common;
        if (common > 0) n = "…" + n.substr(common);
    }
    if (chars(n) <= max) return n;
    // Cut at character boundaries: the head and the tail around one "…".
    const size_t head = (max - 1) / 2, tail = max - 1 - head;
    size_t h = 0;
    for (size_t seen = 0; h < n.size(); ++h)
        if ((n[h] & 0xC0) != 0x80 && seen++ == head) break;
    size_t t = n.size();
    for (size_t seen = 0; t > 0;)
        if ((n[--t] & 0xC0) != 0x80 && ++seen == tail) break;
    return n.substr(0, h) + "…" + n.substr(t);
}

// The behaviour panel's legend, at x = `x`, from y = `y`: a swatch and a name per model, the source first.
std::string legend_svg(const std::vector<std::string>& models, double x, double y) {
    constexpr size_t kLegendChars = 22;  // at 12 px, what fits the right margin less the swatch
    std::string s;
    std::vector<std::string> builds(models.begin() + (models.empty() ? 0 : 1), models.end());
    for (size_t mi = 0; mi < models.size(); ++mi) {
        const double ly = y + 20 + 18.0 * static_cast<double>(mi);
        s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", x + 16,
                         ly - 10, kSvgColours[mi % std::size(kSvgColours)]);
        s += fmt::format("<text class=\"legend\" x=\"{}\" y=\"{}\">{}<title>{}</title></text>\n", x + 34, ly,
                         svg_escape(mi == 0 ? models[mi] : legend_name(models[mi], builds, kLegendChars)),
                         svg_escape(base_name(models[mi])));
    }
    return s;
}

// The behaviour panel's title.
std::string behaviour_title(const EvalResult& r) {
    const bool greedy_only = r.temperatures.size() == 1 && r.temperatures.front() == 0;
    const bool chat = std::any_of(r.behaviour.begin(), r.behaviour.end(),
                                  [](const EvalBehaviour& b) { return !b.chat_outcomes.empty(); });
    const char* rates = chat ? "Loop, natural-end, error, template-error and tool-call rates"
                             : "Loop, natural-end and error rates";
    return greedy_only
               ? fmt::format("{} per panel, {} greedy tokens", rates, r.gen_tokens)
               : fmt::format("{} per panel and temperature (T), up to {} tokens", rates, r.gen_tokens);
}

// How wide the behaviour panel is drawn: the KLD plot's width, or more, so that every measure of every group
// gets room for its label and a mark per model (72 px, 90 with chat lines, whose "template err." is the
// longest label) and the title fits (about 8 px per character at 14 px).
double behaviour_width(const EvalResult& r) {
    constexpr double L = 70, R = 200, kTitleChar = 8;
    const bool chat = std::any_of(r.behaviour.begin(), r.behaviour.end(),
                                  [](const EvalBehaviour& b) { return !b.chat_outcomes.empty(); });
    const double slots = static_cast<double>(r.panels.size() * r.temperatures.size() * (chat ? 5 : 3));
    return std::max({kKldW, L + R + slots * (chat ? 90.0 : 72.0),
                     L + kTitleChar * static_cast<double>(behaviour_title(r).size()) + 20});
}

// The behaviour panel: per panel (and temperature, with --temp), a group for each of the loop, natural-end
// and error rates, in it a mark per model (the source first) at its rate with its 95 % interval as a bar,
// so a rate of 0 is a mark on the axis with its interval above it. Drawn from y = top, `height` pixels tall,
// `width` wide.
std::string behaviour_svg(const EvalResult& r, double top, double width, double height) {
    constexpr double L = 70, R = 200, T = 48, B = 58;
    // A group per (panel, temperature), temperatures ascending within a panel.
    struct Group {
        const EvalPanelFacts* panel;
        double temperature;
    };
    std::vector<Group> groups;
    for (const EvalPanelFacts& p : r.panels)
        for (const double t : r.temperatures) groups.push_back({&p, t});
    const bool greedy_only = r.temperatures.size() == 1 && r.temperatures.front() == 0;
    const bool chat = std::any_of(r.behaviour.begin(), r.behaviour.end(),
                                  [](const EvalBehaviour& b) { return !b.chat_outcomes.empty(); });
    std::string s =
        fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\">{}</text>\n", L, top + 18, behaviour_title(r));
    s += fmt::format(
        "<text class=\"context\" x=\"{}\" y=\"{}\" fill=\"#444\">a mark per model at its rate, the bar its "
        "95 % Wilson interval; n: {}</text>\n",
        L, top + 36,
        greedy_only ? std::string("prompts per model")
                    : fmt::format("generations, {} per prompt at T &gt; 0", r.samples));
    const double y0 = top + height - B, y1 = top + T;
    const auto py = [&](double rate) { return y0 - (y0 - y1) * rate; };
    s += "<g class=\"grid\" stroke=\"#e4e4e4\">";
    for (int i = 1; i <= 4; ++i)
        s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/>", L, py(i / 4.0),
                         width - R);
    s += "</g>\n";
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", L, y0,
                     width - R);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", L, y0, y1);
    for (int i = 0; i <= 4; ++i)
        s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}%</text>\n", L - 6,
                         py(i / 4.0) + 4, 25 * i);
    std::vector<std::string> models;
    for (const EvalBehaviour& b : r.behaviour)
        if (std::find(models.begin(), models.end(), b.model) == models.end()) models.push_back(b.model);
    struct Measure {
        const char* label;
        const EvalRate EvalBehaviour::*rate;
    };
    // With chat lines, also their template errors and valid tool calls (docs/eval.md, "Chat and tools").
    std::vector<Measure> kMeasures = {{"loops", &EvalBehaviour::loops},
                                      {"ends", &EvalBehaviour::natural_ends},
                                      {"errors", &EvalBehaviour::errors}};
    if (chat)
        kMeasures.insert(kMeasures.end(), {{"template err.", &EvalBehaviour::template_errors},
                                           {"tool calls", &EvalBehaviour::tool_calls}});
    const double group = (width - L - R) / static_cast<double>(std::max<size_t>(1, groups.size()));
    const double sub = group * 0.9 / static_cast<double>(std::size(kMeasures));
    const double step = sub * 0.8 / static_cast<double>(std::max<size_t>(1, models.size()));
    for (size_t pi = 0; pi < groups.size(); ++pi) {
        const EvalPanelFacts& panel = *groups[pi].panel;
        const double temp = groups[pi].temperature;
        const double gx = L + group * static_cast<double>(pi) + group * 0.05;
        const int64_t n = temp > 0 ? panel.prompts * r.samples : panel.prompts;
        s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}{} (n = {})</text>\n",
                         gx + group * 0.45, y0 + 34, svg_escape(panel.name),
                         greedy_only ? std::string() : fmt::format(", T = {}", temp), n);
        if (pi > 0)
            s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#bbb\"/>\n",
                             L + group * static_cast<double>(pi), y0, y1);
        for (size_t k = 0; k < std::size(kMeasures); ++k) {
            const double sx = gx + sub * static_cast<double>(k) + sub * 0.1;
            s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n",
                             sx + sub * 0.4, y0 + 16, kMeasures[k].label);
            for (size_t mi = 0; mi < models.size(); ++mi)
                for (const EvalBehaviour& b : r.behaviour) {
                    if (b.model != models[mi] || b.panel != panel.name || b.temperature != temp) continue;
                    const EvalRate& x = b.*kMeasures[k].rate;
                    if (x.n == 0) continue;  // a chat measure of a panel without such lines
                    const char* colour = kSvgColours[mi % std::size(kSvgColours)];
                    const double cx = sx + step * (static_cast<double>(mi) + 0.5);
                    s += fmt::format(
                        "<line class=\"ci\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
                        "stroke=\"{3}\" stroke-width=\"2\"/>\n",
                        cx, py(x.lo), py(x.hi), colour);
                    s += fmt::format(
                        "<rect class=\"rate\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"8\" height=\"8\" fill=\"{}\" "
                        "stroke=\"black\" stroke-width=\"0.5\"><title>{}: {} {} of {}</title></rect>\n",
                        cx - 4, py(x.rate) - 4, colour, svg_escape(base_name(b.model)), kMeasures[k].label,
                        x.k, x.n);
                }
        }
    }
    s += legend_svg(models, width - R, top + T);
    return s;
}

}  // namespace

// The KLD plot (with --text, kKldW × kKldH) above the behaviour panel (with --prompts, kKldW × H).
std::string eval_svg(const EvalResult& r) {
    constexpr double H = 400;
    const double W = r.panels.empty() ? kKldW : behaviour_width(r);
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
    s += behaviour_svg(r, top, W, H);
    s += "</svg>\n";
    return s;
}

}  // namespace gguf_reap
