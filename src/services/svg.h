// What the two plots (estimate --sweep --svg, eval's eval.svg) share: text escaped for SVG, one palette
// (a series has the same colour in both), and the axes: even ticks at 1, 2 or 5 × 10^n that start near
// the data, and a byte unit that fits it (MiB for files of MiB). docs/estimate.md, "The plots".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace gguf_reap {

inline std::string svg_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

// An axis from `lo` to `hi` with ticks every `step`, all three multiples of the step.
struct SvgAxis {
    double lo = 0, hi = 1, step = 1;
    std::vector<double> ticks() const {
        std::vector<double> t;
        for (int i = 0; lo + step * i <= hi + step * 1e-9; ++i) t.push_back(lo + step * i);
        return t;
    }
    double at(double v, double from_px, double to_px) const {  // v's pixel between from_px and to_px
        return from_px + (to_px - from_px) * (v - lo) / (hi - lo);
    }
    // A tick's label with as many decimals as the step needs ("0.25", "12", "1.5").
    std::string label(double v) const {
        int decimals = 0;
        for (double s = step; decimals < 6 && std::fabs(s - std::round(s)) > 1e-9 * std::max(1.0, s); s *= 10)
            ++decimals;
        return fmt::format("{:.{}f}", std::fabs(v) < step * 1e-9 ? 0.0 : v, decimals);
    }
};

// About `target` even ticks covering [data_lo, data_hi], the step 1, 2 or 5 × 10^n, the ends on ticks.
// With `from_zero`, the axis starts at 0 (a divergence, whose zero means "the same").
inline SvgAxis svg_axis(double data_lo, double data_hi, int target = 5, bool from_zero = false) {
    if (from_zero) data_lo = std::min(0.0, data_lo);
    if (!(data_hi > data_lo)) {
        const double pad = data_hi != 0 ? std::fabs(data_hi) * 0.1 : 1;
        data_lo -= pad;
        data_hi += pad;
        if (from_zero) data_lo = std::min(0.0, data_lo);
    }
    const double raw = (data_hi - data_lo) / std::max(1, target);
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (raw <= m * mag * (1 + 1e-9)) {
            step = m * mag;
            break;
        }
    SvgAxis a;
    a.step = step;
    a.lo = std::floor(data_lo / step + 1e-9) * step;
    a.hi = std::ceil(data_hi / step - 1e-9) * step;
    if (a.hi <= a.lo) a.hi = a.lo + step;
    return a;
}

// The binary unit in which the largest value reads between 1 and 1024: "MiB" for files of MiB.
struct SvgByteUnit {
    const char* name = "B";
    double bytes = 1;
};
inline SvgByteUnit svg_byte_unit(double max_bytes) {
    static constexpr const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    SvgByteUnit u;
    for (int i = 1; i < 6 && max_bytes >= std::pow(1024.0, i); ++i) u = {names[i], std::pow(1024.0, i)};
    return u;
}

inline constexpr const char* kSvgColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                              "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

}  // namespace gguf_reap
