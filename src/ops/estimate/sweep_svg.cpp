// The sweep plot: a linear K axis, a linear byte axis from 0, polylines with a marker per K.
#include "ops/estimate/sweep_svg.h"

#include <algorithm>

#include <fmt/format.h>

#include "io/output_file.h"
#include "io/units.h"
#include "ops/svg.h"

namespace gguf_reap {

namespace {

constexpr double kWidth = 820, kHeight = 500, kLeft = 90, kRight = 200, kTop = 40, kBottom = 50;

struct Series {
    std::string name;
    std::vector<std::pair<int64_t, uint64_t>> points;
};

}  // namespace

std::string render_sweep_svg(const std::string& title, const std::vector<SweepRow>& rows,
                             const std::vector<uint64_t>& tp, const std::vector<SweepLine>& lines) {
    std::vector<Series> series(1 + tp.size());
    series[0].name = "size on disk";
    for (size_t t = 0; t < tp.size(); ++t) series[1 + t].name = fmt::format("per GPU at TP {}", tp[t]);
    uint64_t top = 1;
    int64_t k_lo = rows.empty() ? 0 : rows.front().k, k_hi = rows.empty() ? 1 : rows.back().k;
    for (const SweepRow& r : rows) {
        series[0].points.emplace_back(r.k, r.figures.file_bytes);
        for (size_t t = 0; t < tp.size(); ++t) series[1 + t].points.emplace_back(r.k, r.per_gpu[t].need());
        k_lo = std::min(k_lo, r.k);
        k_hi = std::max(k_hi, r.k);
    }
    for (const Series& s : series)
        for (const auto& p : s.points) top = std::max(top, p.second);
    for (const SweepLine& l : lines) top = std::max(top, l.bytes);
    const double y_max = static_cast<double>(top) * 1.05;
    if (k_hi == k_lo) ++k_hi;
    const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
    const auto x = [&](int64_t k) {
        return kLeft + pw * static_cast<double>(k - k_lo) / static_cast<double>(k_hi - k_lo);
    };
    const auto y = [&](uint64_t v) { return kTop + ph * (1 - static_cast<double>(v) / y_max); };

    std::string s = fmt::format(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" viewBox=\"0 "
        "0 {0} "
        "{1}\" font-family=\"sans-serif\" font-size=\"12\">\n",
        kWidth, kHeight);
    s += fmt::format("<title>{}</title>\n", svg_escape(title));
    s += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"white\"/>\n", kWidth, kHeight);
    s += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"14\">{}</text>\n", kLeft, svg_escape(title));
    // Axes, five ticks each.
    s += fmt::format(
        "<g class=\"axes\" stroke=\"black\"><line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>"
        "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\"/></g>\n",
        kLeft, kTop + ph, kLeft + pw, kTop);
    for (int i = 0; i <= 4; ++i) {
        const uint64_t v = static_cast<uint64_t>(y_max * i / 4);
        const int64_t k = k_lo + (k_hi - k_lo) * i / 4;
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6,
                         y(v) + 4, human_bytes(v));
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x(k),
                         kTop + ph + 18, k);
    }
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">K: experts kept per MoE block</text>\n",
        kLeft + pw / 2, kHeight - 10);
    // Budgets.
    for (const SweepLine& l : lines)
        s += fmt::format(
            "<g class=\"budget\" data-bytes=\"{0}\"><line x1=\"{1}\" y1=\"{2:.1f}\" x2=\"{3}\" "
            "y2=\"{2:.1f}\" "
            "stroke=\"gray\" stroke-dasharray=\"6,4\"/><text x=\"{4}\" y=\"{5:.1f}\">{6}</text></g>\n",
            l.bytes, kLeft, y(l.bytes), kLeft + pw, kLeft + pw + 6, y(l.bytes) + 4, svg_escape(l.label));
    // Curves and the legend.
    for (size_t i = 0; i < series.size(); ++i) {
        const char* color = kSvgColours[i % std::size(kSvgColours)];
        std::string pts;
        for (const auto& p : series[i].points) pts += fmt::format("{:.1f},{:.1f} ", x(p.first), y(p.second));
        if (!pts.empty()) pts.pop_back();
        s += fmt::format("<g class=\"series\" data-series=\"{}\" stroke=\"{}\" fill=\"{}\">\n",
                         svg_escape(series[i].name), color, color);
        s += fmt::format("<polyline points=\"{}\" fill=\"none\"/>\n", pts);
        for (const auto& p : series[i].points)
            s +=
                fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" data-k=\"{}\" data-bytes=\"{}\"/>\n",
                            x(p.first), y(p.second), p.first, p.second);
        s += fmt::format("<text x=\"{}\" y=\"{}\" stroke=\"none\">{}</text>\n</g>\n", kLeft + pw + 6,
                         kTop + 16 * static_cast<double>(i), svg_escape(series[i].name));
    }
    s += "</svg>\n";
    return s;
}

void write_text_file(const std::string& path, const std::string& text) {
    OutputFile f(path);
    f.write_at(0, text.data(), text.size());
    f.commit();
}

}  // namespace gguf_reap
