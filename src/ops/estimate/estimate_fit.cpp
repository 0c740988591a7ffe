// estimate --fit / --sweep: the budget's answer and the sweep, over the model's legal K.
#include "gguf_reap/estimate_fit.h"

#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "io/output_file.h"
#include "io/output_lock.h"
#include "io/preflight.h"
#include "io/units.h"
#include "model/shard_set.h"
#include "ops/estimate/sweep_svg.h"
#include "services/budget_search.h"

namespace gguf_reap {

namespace ops {

EstimateFitResult estimate_fit(const EstimateFitRequest& q) {
    EstimateFitResult out;
    // --svg checked and locked before the model is read: its temporary is made now, so that a directory
    // nobody can write to fails first; the model may not be written over.
    // A missing directory is made (as rank and splice make theirs), and taken away again when the run
    // fails before the plot is written.
    std::optional<MadeDirectory> dir;
    std::optional<OutputLock> lock;
    std::optional<OutputFile> svg;
    if (!q.svg.empty()) {
        std::vector<std::string> inputs{q.model};
        if (!q.neuron_plan.empty()) inputs.push_back(q.neuron_plan);
        if (const std::string* in = same_file_as(q.svg, inputs))
            throw RequestError({EstimateFitRequest::kSvg,
                                fmt::format(" {} is an input ({}): refusing to write over it", q.svg, *in)});
        dir.emplace(parent_dir(q.svg));
        svg.emplace(q.svg);  // before the lock: its error names the path as given
        lock.emplace(q.svg);
    }
    const BudgetModel m(q.model, q.neuron_plan, q.drop_mtp, q.tool_version);
    out.model_path = m.model().shards().front().path;
    out.arch = m.layout().arch;
    out.expert_count = static_cast<int64_t>(m.layout().expert_count);
    out.rules = model_keep_rules(m.layout());
    if (!q.imatrices.empty()) {
        std::vector<DomainSpec> specs;
        for (const std::string& s : q.imatrices) specs.push_back(parse_domain_spec(s));
        std::vector<int> blocks;
        const auto dead = ops::dead_expert_counts(specs, q.model, blocks);
        apply_dead_rule(out.rules, blocks, dead);
        out.dead_only = out.rules.max_keep > 0 ? out.rules.max_keep : out.expert_count;
    }
    if (q.fit) out.fit = fit_budget(m, *q.fit, out.rules);
    if (!q.sweep) return out;
    std::set<uint64_t> tp(q.deployment.tp.begin(), q.deployment.tp.end());
    out.tp.assign(tp.begin(), tp.end());
    std::vector<int64_t> extra;
    if (out.dead_only && !out.rules.refusal(*out.dead_only)) extra.push_back(*out.dead_only);
    if (out.fit) extra.push_back(out.fit->at.k);
    out.sweep = sweep(m, sweep_counts(out.rules, extra), out.tp, q.deployment.ctx, q.deployment.overhead);
    if (!q.svg.empty()) {
        SweepPlot plot;
        if (q.deployment.gpu_mem)
            plot.lines.push_back({"GPU memory " + human_bytes(q.deployment.gpu_mem), q.deployment.gpu_mem});
        if (q.fit) plot.lines.push_back({"budget " + q.fit->text, q.fit->bytes});
        plot.title = fmt::format("{}: size and per-GPU memory against K (of {} experts)",
                                 std::filesystem::path(out.model_path).filename().string(), out.expert_count);
        plot.tp = out.tp;
        plot.expert_count = out.expert_count;
        plot.source_bytes = m.model().total_bytes();
        if (out.fit) {
            plot.chosen = out.fit->at.k;
            plot.chosen_label = "budget " + q.fit->text;
        }
        plot.ctx = q.deployment.ctx;
        plot.overhead = q.deployment.overhead;
        const std::string text = render_sweep_svg(plot, out.sweep);
        try {
            svg->write_at(0, text.data(), text.size());
            svg->commit();
            dir->keep();
        } catch (const Error&) {
            out.write_error = std::current_exception();
        }
    }
    return out;
}

}  // namespace ops

}  // namespace gguf_reap
