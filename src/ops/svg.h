// What the two plots (estimate --sweep --svg, eval's eval.svg) share: text escaped for SVG and one
// palette, so that a series has the same colour in both.
#pragma once

#include <string>
#include <string_view>

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

inline constexpr const char* kSvgColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                              "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

}  // namespace gguf_reap
