// The sweep plot: a linear K axis, a linear byte axis from 0, polylines with a marker per K.
#include "ops/estimate/sweep_svg.h"

#include <algorithm>

#include <fmt/format.h>

#include "io/output_file.h"
#include "io/units.h"
#include "services/svg.h"

namespace gguf_reap {

namespace {

constexpr double kWidth = 860, kHeight = 520, kLeft = 90, kRight = 210, kTop = 58, kBottom = 50;

struct Series {
    std::string name;
    std::vector<std::pair<int64_t, uint64_t>> points;
};

// Where a K and a byte count fall: bytes in the unit that fits them, on an axis that starts near the data;
// K from the smallest swept to the source's.
struct Frame {
    SvgByteUnit unit;
    SvgAxis xa, ya;
    double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
    double x(double k) const { return xa.at(k, kLeft, kLeft + pw); }
    double y(double bytes) const { return ya.at(bytes / unit.bytes, kTop + ph, kTop); }
};

// The curves (size on disk, then per GPU at each TP) and the frame that holds them and every line.
Frame make_frame(const SweepPlot& p, const std::vector<SweepRow>& rows, std::vector<Series>& series) {
    series.assign(1 + p.tp.size(), {});
    series[0].name = "size on disk";
    for (size_t t = 0; t < p.tp.size(); ++t) series[1 + t].name = fmt::format("per GPU at TP {}", p.tp[t]);
    double lo = 0, hi = 0;
    bool any = false;
    const auto see = [&](double v) {
        lo = any ? std::min(lo, v) : v;
        hi = any ? std::max(hi, v) : v;
        any = true;
    };
    int64_t k_lo = rows.empty() ? 1 : rows.front().k, k_hi = rows.empty() ? 1 : rows.back().k;
    for (const SweepRow& r : rows) {
        series[0].points.emplace_back(r.k, r.figures.file_bytes);
        for (size_t t = 0; t < p.tp.size(); ++t) series[1 + t].points.emplace_back(r.k, r.per_gpu[t].need());
        k_lo = std::min(k_lo, r.k);
        k_hi = std::max(k_hi, r.k);
    }
    for (const Series& x : series)
        for (const auto& pt : x.points) see(static_cast<double>(pt.second));
    for (const SweepLine& l : p.lines) see(static_cast<double>(l.bytes));
    if (p.source_bytes > 0 && p.expert_count > 0) {
        see(static_cast<double>(p.source_bytes));
        k_hi = std::max(k_hi, p.expert_count);
    }
    const SvgByteUnit unit = svg_byte_unit(hi);
    return Frame{unit, svg_axis(static_cast<double>(k_lo), static_cast<double>(k_hi), 8),
                 svg_axis(lo / unit.bytes, hi / unit.bytes, 8)};
}

// The header, the subtitle, the grid with even ticks, the axes and their labels.
std::string axes_svg(const SweepPlot& p, const Frame& f) {
    const double pw = f.pw, ph = f.ph;
    const auto x = [&](double k) { return f.x(k); };
    const auto y = [&](double bytes) { return f.y(bytes); };
    const SvgAxis &xa = f.xa, &ya = f.ya;
    const SvgByteUnit& unit = f.unit;
    std::string s = fmt::format(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" viewBox=\"0 "
        "0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n",
        kWidth, kHeight);
    s += fmt::format("<title>{}</title>\n", svg_escape(p.title));
    s += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"white\"/>\n", kWidth, kHeight);
    s += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"14\">{}</text>\n", kLeft, svg_escape(p.title));
    s += fmt::format(
        "<text class=\"context\" x=\"{}\" y=\"40\" fill=\"#444\">per GPU: weights + KV cache for {} tokens "
        "of "
        "context + overhead {}</text>\n",
        kLeft, with_commas(p.ctx), human_bytes(p.overhead));
    // Grid and even ticks.
    s += "<g class=\"grid\" stroke=\"#e4e4e4\">";
    for (double v : ya.ticks())
        s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/>", kLeft,
                         y(v * unit.bytes), kLeft + pw);
    for (double k : xa.ticks())
        s +=
            fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>", x(k), kTop, kTop + ph);
    s += "</g>\n";
    s += fmt::format(
        "<g class=\"axes\" stroke=\"black\"><line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>"
        "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\"/></g>\n",
        kLeft, kTop + ph, kLeft + pw, kTop);
    for (double v : ya.ticks())
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6,
                         y(v * unit.bytes) + 4, ya.label(v));
    for (double k : xa.ticks())
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x(k),
                         kTop + ph + 18, xa.label(k));
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">K: experts kept per MoE block</text>\n",
        kLeft + pw / 2, kHeight - 10);
    s += fmt::format(
        "<text x=\"18\" y=\"{0:.1f}\" transform=\"rotate(-90 18 {0:.1f})\" "
        "text-anchor=\"middle\">{1}</text>\n",
        kTop + ph / 2, unit.name);
    return s;
}

// The chosen K, the budgets, the curves with their legend, and the source's point.
std::string marks_svg(const SweepPlot& p, const Frame& f, const std::vector<Series>& series) {
    const double pw = f.pw, ph = f.ph;
    const auto x = [&](double k) { return f.x(k); };
    const auto y = [&](double bytes) { return f.y(bytes); };
    std::string s;
    // The chosen K (--fit), a vertical line labelled inside the plot: right of the line in the plot's left
    // half, left of it in the right half (never into the legend's margin).
    if (p.chosen) {
        const double cx = x(static_cast<double>(*p.chosen));
        const bool left = cx > kLeft + pw / 2;
        s += fmt::format(
            "<g class=\"chosen\" data-k=\"{0}\"><line x1=\"{1:.1f}\" y1=\"{2}\" x2=\"{1:.1f}\" y2=\"{3}\" "
            "stroke=\"#555\" stroke-dasharray=\"2,3\"/><text x=\"{4:.1f}\" y=\"{5}\" fill=\"#333\" "
            "text-anchor=\"{7}\">K = {0} ({6})</text></g>\n",
            *p.chosen, cx, kTop, kTop + ph, left ? cx - 4 : cx + 4, kTop + 14, svg_escape(p.chosen_label),
            left ? "end" : "start");
    }
    // Budgets: dashed lines, each labelled above its left end (below it at the top of the plot, clear of
    // the subtitle); the legend keeps the right margin.
    for (const SweepLine& l : p.lines) {
        const double ly = y(static_cast<double>(l.bytes));
        s += fmt::format(
            "<g class=\"budget\" data-bytes=\"{0}\"><line x1=\"{1}\" y1=\"{2:.1f}\" x2=\"{3}\" "
            "y2=\"{2:.1f}\" "
            "stroke=\"gray\" stroke-dasharray=\"6,4\"/><text x=\"{4}\" y=\"{5:.1f}\" "
            "fill=\"#333\">{6}</text></g>\n",
            l.bytes, kLeft, ly, kLeft + pw, kLeft + 6, ly - kTop < 18 ? ly + 15 : ly - 5,
            svg_escape(l.label));
    }
    // Curves, and the legend in the right margin.
    for (size_t i = 0; i < series.size(); ++i) {
        const char* color = kSvgColours[i % std::size(kSvgColours)];
        std::string pts;
        for (const auto& pt : series[i].points)
            pts += fmt::format("{:.1f},{:.1f} ", x(static_cast<double>(pt.first)),
                               y(static_cast<double>(pt.second)));
        if (!pts.empty()) pts.pop_back();
        s += fmt::format("<g class=\"series\" data-series=\"{}\" stroke=\"{}\" fill=\"{}\">\n",
                         svg_escape(series[i].name), color, color);
        s += fmt::format("<polyline points=\"{}\" fill=\"none\"/>\n", pts);
        for (const auto& pt : series[i].points)
            s += fmt::format(
                "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" data-k=\"{}\" data-bytes=\"{}\"/>\n",
                x(static_cast<double>(pt.first)), y(static_cast<double>(pt.second)), pt.first, pt.second);
        const double ly = kTop + 6 + 18 * static_cast<double>(i);
        s += fmt::format(
            "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke-width=\"2\"/>"
            "<text x=\"{3}\" y=\"{4:.1f}\" stroke=\"none\">{5}</text>\n</g>\n",
            kLeft + pw + 12, ly, kLeft + pw + 30, kLeft + pw + 36, ly + 4, svg_escape(series[i].name));
    }
    // The source: every expert kept, its size on disk.
    if (p.source_bytes > 0 && p.expert_count > 0) {
        const double sx = x(static_cast<double>(p.expert_count)), sy = y(static_cast<double>(p.source_bytes));
        // Named in the legend only: a label beside the point would cross the curves that end there.
        s += fmt::format(
            "<g class=\"source\" data-k=\"{0}\" data-bytes=\"{1}\"><rect x=\"{2:.1f}\" y=\"{3:.1f}\" "
            "width=\"9\" "
            "height=\"9\" fill=\"black\"/></g>\n",
            p.expert_count, p.source_bytes, sx - 4.5, sy - 4.5);
        const double ly = kTop + 6 + 18 * static_cast<double>(series.size());
        s += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"9\" height=\"9\" fill=\"black\"/><text x=\"{}\" "
            "y=\"{:.1f}\">source (K = {})</text>\n",
            kLeft + pw + 16.5, ly - 4.5, kLeft + pw + 36, ly + 4, p.expert_count);
    }
    return s;
}

}  // namespace

std::string render_sweep_svg(const SweepPlot& p, const std::vector<SweepRow>& rows) {
    std::vector<Series> series;
    const Frame f = make_frame(p, rows, series);
    return axes_svg(p, f) + marks_svg(p, f, series) + "</svg>\n";
}

void write_text_file(const std::string& path, const std::string& text) {
    OutputFile f(path);
    f.write_at(0, text.data(), text.size());
    f.commit();
}

}  // namespace gguf_reap
