// estimate --fit / --sweep: the budget's answer and the sweep, over the model's legal K.
#include "gguf_reap/estimate_fit.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/units.h"
#include "ops/estimate/sweep_svg.h"
#include "ops/rank/rank_fit.h"

namespace gguf_reap {

namespace ops {

EstimateFitResult estimate_fit(const EstimateFitRequest& q) {
    EstimateFitResult out;
    const BudgetModel m(q.model, q.neuron_plan, q.drop_mtp, q.tool_version);
    out.model_path = m.model().shards().front().path;
    out.arch = m.layout().arch;
    out.expert_count = static_cast<int64_t>(m.layout().expert_count);
    out.rules = model_keep_rules(m.layout());
    if (!q.imatrices.empty()) {
        std::vector<DomainSpec> specs;
        for (const std::string& s : q.imatrices) specs.push_back(parse_domain_spec(s));
        std::vector<int> blocks;
        const auto dead = dead_counts(specs, q.model, blocks);
        apply_dead_rule(out.rules, blocks, dead);
        out.dead_only = out.rules.max_keep > 0 ? out.rules.max_keep : out.expert_count;
    }
    if (q.fit) out.fit = fit_budget(m, *q.fit, out.rules);
    if (!q.sweep) return out;
    std::set<uint64_t> tp(q.tp.begin(), q.tp.end());
    out.tp.assign(tp.begin(), tp.end());
    std::vector<int64_t> extra;
    if (out.dead_only && !out.rules.refusal(*out.dead_only)) extra.push_back(*out.dead_only);
    if (out.fit) extra.push_back(out.fit->at.k);
    out.sweep = sweep(m, sweep_counts(out.rules, extra), out.tp, q.ctx, q.overhead);
    if (!q.svg.empty()) {
        std::vector<SweepLine> lines;
        if (q.gpu_mem) lines.push_back({"--gpu-mem " + human_bytes(q.gpu_mem), q.gpu_mem});
        if (q.fit) lines.push_back({"--fit " + q.fit->text, q.fit->bytes});
        const std::string title =
            fmt::format("{}: size and per-GPU memory against K (of {} experts)",
                        std::filesystem::path(out.model_path).filename().string(), out.expert_count);
        write_text_file(q.svg, render_sweep_svg(title, out.sweep, out.tp, lines));
    }
    return out;
}

}  // namespace ops

}  // namespace gguf_reap
