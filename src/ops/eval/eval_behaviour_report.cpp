// eval's behaviour results in eval.json and eval.svg (ops/eval/eval_behaviour.h; schema in docs/eval.md).
#include <cmath>

#include <fmt/format.h>

#include "gguf_reap/eval.h"
#include "io/paths.h"
#include "ops/eval/eval_behaviour.h"
#include "services/svg.h"

namespace gguf_reap::eval_detail {

using json = nlohmann::ordered_json;

namespace {

json ci(const EvalRate& x) {
    return json::array({x.lo, x.hi});
}

}  // namespace

void add_behaviour_json(json& j, const EvalResult& r) {
    if (r.panels.empty()) return;  // absent without --prompts
    json panels = json::array();
    for (const EvalPanelFacts& p : r.panels)
        panels.push_back({{"name", p.name},
                          {"path", p.path},
                          {"sha256", p.sha256},
                          {"prompts", p.prompts},
                          {"bytes", p.bytes},
                          {"format", p.format},
                          {"max_prompt_bytes", p.max_prompt_bytes}});
    j["panels"] = panels;
    j["generation"] = {{"llama_server", r.server_path},
                       {"endpoint", r.chat ? "/apply-template, then /completion" : "/completion"},
                       {"chat", r.chat},
                       {"parallel", r.parallel},
                       {"gen_tokens", r.gen_tokens},
                       {"request", json::parse(completion_request_settings(r.gen_tokens))}};
    json b = json::array();
    for (const EvalBehaviour& x : r.behaviour)
        b.push_back({{"model", x.model},
                     {"panel", x.panel},
                     {"prompts", x.prompts},
                     {"gen_tokens", x.gen_tokens},
                     {"loops", x.loops.k},
                     {"loop_rate", x.loops.rate},
                     {"loop_rate_ci", ci(x.loops)},
                     {"natural_ends", x.natural_ends.k},
                     {"natural_end_rate", x.natural_ends.rate},
                     {"natural_end_rate_ci", ci(x.natural_ends)},
                     {"mean_tokens", x.mean_tokens},
                     {"tokens", x.tokens},
                     {"distinct_4", x.distinct_4 ? json(*x.distinct_4) : json(nullptr)},
                     {"four_grams", x.four_grams},
                     {"distinct_four_grams", x.distinct_four_grams},
                     {"seconds", x.seconds},
                     {"server_command", x.server_command}});
    j["behaviour"] = b;
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

}  // namespace gguf_reap::eval_detail
