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

// Loop rate per panel and model: a bar per model (the source first) with its 95 % interval, a group per
// panel. Drawn from y = top, `height` pixels tall, `width` wide.
std::string behaviour_svg(const EvalResult& r, double top, double width, double height) {
    constexpr double L = 70, R = 150, T = 30, B = 50;
    std::string s;
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-size=\"14\">Loop rate per panel (95 % Wilson interval), "
        "{} greedy tokens</text>\n",
        L, top + 18, r.gen_tokens);
    const double y0 = top + height - B, y1 = top + T;
    const auto py = [&](double rate) { return y0 - (y0 - y1) * rate; };
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", L, y0,
                     width - R);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", L, y0, y1);
    for (int i = 0; i <= 4; ++i)
        s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}%</text>\n", L - 6,
                         py(i / 4.0) + 4, 25 * i);
    std::vector<std::string> models;
    for (const EvalBehaviour& b : r.behaviour)
        if (std::find(models.begin(), models.end(), b.model) == models.end()) models.push_back(b.model);
    const double group = (width - L - R) / static_cast<double>(std::max<size_t>(1, r.panels.size()));
    const double bar = group * 0.8 / static_cast<double>(std::max<size_t>(1, models.size()));
    for (size_t pi = 0; pi < r.panels.size(); ++pi) {
        const double gx = L + group * static_cast<double>(pi) + group * 0.1;
        s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", gx + group * 0.4,
                         y0 + 16, svg_escape(r.panels[pi].name));
        for (size_t mi = 0; mi < models.size(); ++mi)
            for (const EvalBehaviour& b : r.behaviour) {
                if (b.model != models[mi] || b.panel != r.panels[pi].name) continue;
                const char* colour = kSvgColours[mi % std::size(kSvgColours)];
                const double x = gx + bar * static_cast<double>(mi);
                s += fmt::format(
                    "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n", x,
                    py(b.loops.rate), bar * 0.9, y0 - py(b.loops.rate), colour);
                const double cx = x + bar * 0.45;
                s += fmt::format(
                    "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"black\"/>\n",
                    cx, py(b.loops.lo), py(b.loops.hi));
            }
    }
    for (size_t mi = 0; mi < models.size(); ++mi) {
        const double ly = top + T + 20 + 18.0 * static_cast<double>(mi);
        s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", width - R + 16,
                         ly - 10, kSvgColours[mi % std::size(kSvgColours)]);
        s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", width - R + 34, ly,
                         svg_escape(mi == 0 ? models[mi] : base_name(models[mi])));
    }
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
    s += behaviour_svg(r, top, W, H);
    s += "</svg>\n";
    return s;
}

}  // namespace gguf_reap
