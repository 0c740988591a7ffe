// card --eval: the "Measured against the source" section, from `gguf-reap eval -o` as services/eval_report
// reads it back (docs/eval.md): the section states the EvalResult's figures for this build.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gguf_reap/card.h"
#include "io/paths.h"
#include "io/units.h"
#include "model/shard_set.h"
#include "model/vocab_text.h"
#include "ops/card/card_steps.h"
#include "services/eval_report.h"
#include "services/llama_cpp/llama_tools.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;

// The runs of `model` (as the report names it) in `runs`, in text order.
std::vector<const EvalRun*> runs_of(const std::vector<EvalRun>& runs, const std::string& model) {
    std::vector<const EvalRun*> v;
    for (const EvalRun& r : runs)
        if (r.output == model) v.push_back(&r);
    return v;
}

const std::string& build_path(const CardEval& e) {
    return e.result.outputs[e.output].path;
}

std::string fixed(double v, int digits) {
    return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : std::string("–");
}

// A Markdown code span of `text`, whatever backticks it holds.
std::string code_span(const std::string& text) {
    return text.find('`') == std::string::npos ? fmt::format("`{}`", text) : fmt::format("`` {} ``", text);
}

// The text of token `i` of a generation; null when it ended before.
std::optional<std::string> token_at(const SmokeGeneration& g, int64_t i) {
    if (i < 0 || static_cast<size_t>(i) >= g.tokens.size()) return std::nullopt;
    return g.tokens[static_cast<size_t>(i)].text;
}

// "Smoke test: ... the first N greedy tokens are identical to the source's", or where they part.
void smoke_line(std::string& s, const EvalSmoke& m, const EvalSmokeOutput& o) {
    s += fmt::format("Smoke test: greedy decoding (`{}`) of {} tokens after the prompt {}: ",
                     llama_cpp::greedy_words(), m.source.tokens.size(), code_span(quoted_text(m.prompt)));
    if (!o.first_diff) {
        s += fmt::format("all {} tokens are identical to the source's.\n\n", o.identical);
        return;
    }
    const auto tok = [](const std::optional<std::string>& t) {
        return t ? code_span(quoted_text(*t)) : std::string("the end of generation");
    };
    s += fmt::format(
        "the first {} tokens are identical to the source's; token {} is {} where the source has {}.\n\n",
        o.identical, *o.first_diff + 1, tok(token_at(o.generation, *o.first_diff)),
        tok(token_at(m.source, *o.first_diff)));
}

std::string rate_text(const EvalRate& r) {
    return fmt::format("{} of {} ({:.1f} %, 95 % interval {:.1f}–{:.1f} %)", r.k, r.n, 100 * r.rate,
                       100 * r.lo, 100 * r.hi);
}

// The source's entry for the panel of `b` (eval_report_build checked that there is one).
const EvalBehaviour& source_entry(const EvalResult& r, const EvalBehaviour& b) {
    const EvalBehaviour* s = behaviour_source(r, b);
    return s ? *s : b;
}

// A p-value as the card prints it.
std::string p_text(double p) {
    return p < 0.001 ? std::string("p < 0.001") : fmt::format("p = {:.3f}", p);
}

// "1 prompt", "3 prompts"; above temperature 0 the pairs are generations: "3 generations".
std::string prompts_text(int64_t n, bool sampled) {
    return fmt::format("{} {}{}", n, sampled ? "generation" : "prompt", n == 1 ? "" : "s");
}

// The paired test's verdict on one outcome (docs/eval.md, "Uncertainty"): a difference is stated only
// when McNemar's exact test finds one at 5 %.
std::string paired_text(const PairedTest& t, bool sampled) {
    if (!t.differs())
        return fmt::format(
            "no difference measured at n = {} ({} only this build, {} only the source; "
            "McNemar {})",
            t.n, prompts_text(t.build_only, sampled), t.source_only, p_text(t.p));
    return fmt::format("{} than the source: {} only this build, {} only the source (McNemar {})",
                       t.build_only > t.source_only ? "more often" : "less often",
                       prompts_text(t.build_only, sampled), t.source_only, p_text(t.p));
}

struct Measure {
    const char* words;
    EvalRate EvalBehaviour::*rate;
    const char* key;  // eval.json's, services/eval_report's kBehaviourMeasures
    bool chat;        // counted over the chat lines only (docs/eval.md, "Chat and tools")
};
constexpr Measure kMeasures[] = {
    {"falls into a repetition loop", &EvalBehaviour::loops, "loops", false},
    {"ends naturally", &EvalBehaviour::natural_ends, "natural_ends", false},
    {"gets no generation (an error)", &EvalBehaviour::errors, "errors", false},
    {"gets a template error (HTTP 4xx/5xx, chat lines)", &EvalBehaviour::template_errors, "template_errors",
     true},
    {"makes a valid tool call (lines offering tools)", &EvalBehaviour::tool_calls, "tool_calls", true},
};

// Whether the card shows measure `m` for entry `b`: the chat measures only when it has lines they count.
bool shown(const Measure& m, const EvalBehaviour& b) {
    return !m.chat || (b.*m.rate).n > 0;
}

// How one changed measure reads in the list of changed prompts: "loops on this build, not on the source".
std::string change_words(const EvalChange& c) {
    for (const Measure& m : kMeasures)
        if (c.measure == m.key) {
            const char* what = c.measure == "loops"             ? "loops"
                               : c.measure == "natural_ends"    ? "ends naturally"
                               : c.measure == "errors"          ? "gets no generation"
                               : c.measure == "template_errors" ? "gets a template error"
                                                                : "makes a valid tool call";
            return fmt::format(
                "{} {}", what,
                c.build ? "on this build, not on the source" : "on the source, not on this build");
        }
    return c.measure;
}

constexpr size_t kChangesShown = 10;

// The prompts whose behaviour changed, at most kChangesShown, each by its excerpt (a code span, so that
// Markdown shows it as written) and what changed.
void changes_list(std::string& s, const EvalBehaviour& b) {
    if (b.changes.empty()) return;
    std::vector<const EvalChange*> v;
    for (const EvalChange& c : b.changes) v.push_back(&c);
    std::stable_sort(v.begin(), v.end(), [](const EvalChange* x, const EvalChange* y) {
        return std::pair(x->index, x->sample) < std::pair(y->index, y->sample);
    });
    // One item per generation, its measures joined.
    std::vector<std::pair<const EvalChange*, std::string>> items;
    for (const EvalChange* c : v) {
        if (!items.empty() && items.back().first->index == c->index &&
            items.back().first->sample == c->sample)
            items.back().second += "; " + change_words(*c);
        else
            items.emplace_back(c, change_words(*c));
    }
    const bool sampled = b.temperature > 0;
    s += fmt::format(
        "The {} whose behaviour changed ({} in all{}):\n\n", sampled ? "generations" : "prompts",
        items.size(),
        items.size() > kChangesShown
            ? fmt::format(", the first {} shown; `changed` in the eval's JSON lists every one", kChangesShown)
            : std::string());
    for (size_t i = 0; i < items.size() && i < kChangesShown; ++i) {
        const EvalChange& c = *items[i].first;
        s += fmt::format("- prompt {}{} {}: {}\n", c.index + 1,
                         sampled ? fmt::format(" sample {}", c.sample + 1) : std::string(),
                         c.excerpt.empty() ? std::string("(empty)") : code_span(c.excerpt), items[i].second);
    }
    s += "\n";
}

// Per panel: loops, natural ends and errors of this build against the source's (with chat lines, template
// errors and valid tool calls too), each with its n and interval, and the paired test's verdict; the
// prompts whose behaviour changed; then this build's errors, if any, by prompt.
void behaviour_lines(std::string& s, const CardEval& e, const std::string& prompts) {
    for (const EvalBehaviour& b : e.result.behaviour) {
        if (b.model != build_path(e)) continue;
        const EvalBehaviour& src = source_entry(e.result, b);
        if (b.temperature == 0)
            s += fmt::format(
                "Generation on the prompt panel `{}` (greedy, up to {} tokens per prompt, {}; `gguf-reap "
                "eval {}`), the same {} prompts on this build and on the source; 95 % Wilson intervals, and "
                "McNemar's exact test on the prompts where the two differ:\n\n",
                b.panel, b.gen_tokens, llama_tool_name(LlamaTool::server), prompts, b.prompts);
        else
            s += fmt::format(
                "Generation on the prompt panel `{}` at temperature {} ({} sample{} per prompt, each with "
                "its own seed derived from the eval seed {}, up to {} tokens, {}; `gguf-reap eval {}`), the "
                "same {} prompts on this build and on the source, {} generations each, sample j of a prompt "
                "with the same seed on both; 95 % Wilson intervals, and McNemar's exact test on the "
                "(prompt, sample) pairs where the two differ:\n\n",
                b.panel, b.temperature, b.samples, b.samples == 1 ? "" : "s", b.seed.value_or(0),
                b.gen_tokens, llama_tool_name(LlamaTool::server), prompts, b.prompts, b.generations());
        const bool sampled = b.temperature > 0;
        s += fmt::format("| per {}, the model | this build | the source | this build against the source |\n",
                         sampled ? "generation" : "prompt");
        s += "| --- | --- | --- | --- |\n";
        for (const Measure& m : kMeasures)
            if (shown(m, b))
                s += fmt::format("| {} | {} | {} | {} |\n", m.words, rate_text(b.*m.rate),
                                 rate_text(src.*m.rate),
                                 paired_text(behaviour_paired_test(src, b, m.key), sampled));
        s += "\n";
        changes_list(s, b);
        if (!b.prompt_errors.empty()) {
            const EvalPromptError& f = b.prompt_errors.front();
            s += fmt::format(
                "{} gave this build no generation for {} of the {} {} (`prompt_errors` in the "
                "eval's JSON); the first, prompt {}{}: {}.\n\n",
                llama_tool_name(LlamaTool::server), b.prompt_errors.size(), b.generations(),
                sampled ? "generations" : "prompts", f.index + 1,
                sampled ? fmt::format(" sample {}", f.sample + 1) : std::string(), code_span(f.error));
        }
    }
}

// A mean KLD with llama-perplexity's own ± ("0.8657 ± 0.0283"; the figure alone when it printed none).
std::string kld_with_err(const ValueErr& kld) {
    return std::isfinite(kld.err) ? fmt::format("{} ± {}", fixed(kld.value, 4), fixed(kld.err, 4))
                                  : fixed(kld.value, 4);
}

// One text's row; `held_out` is the last column of the table against the source ("" in the reference
// table, which has none).
std::string kld_row(const EvalRun& t, const std::string& label, const std::string& held_out = "") {
    const KldFigures& f = t.figures;
    return fmt::format("| {} |{} {} | {} → {} | {} | {} | {} % |{}\n", t.text,
                       label.empty() ? "" : " " + label + " |", with_commas(static_cast<uint64_t>(t.tokens)),
                       f.ppl_source ? fixed(f.ppl_source->value, 3) : std::string("–"),
                       fixed(f.ppl_output.value, 3), kld_with_err(f.kld),
                       f.kld_p99 ? fixed(*f.kld_p99, 4) : std::string("–"), fixed(f.same_top.value, 2),
                       held_out.empty() ? "" : " " + held_out + " |");
}

// The table's last column: "yes", "no: calibration text of c", "not known".
std::string held_out_cell(const TextOrigin& o) {
    if (!o.held_out) return "not known";
    return *o.held_out ? "yes" : fmt::format("no: calibration text of {}", o.domain);
}

void kld_table(std::string& s, const CardFacts& c, const std::vector<const EvalRun*>& runs) {
    s += fmt::format(
        "KL divergence of this build's next-token distribution from the source's, over the full vocabulary, "
        "and "
        "how often both rank the same token first: `{}` on the source, then `{}` on this build, on each "
        "text below (`gguf-reap eval`); ± is {}'s uncertainty of the mean over the tokens "
        "scored. The headline's words for a mean KLD (nats): up to 0.05 nearly "
        "identical to the source, up to 0.2 close, up to 0.5 noticeably different, above that often predicts "
        "something else.\n\n",
        llama_cpp::kld_base_words(), llama_cpp::kld_words(), llama_tool_name(LlamaTool::perplexity));
    s += "| text | tokens | PPL source → build | mean KLD | 99 % KLD | same top token | held out |\n";
    s += "| --- | ---: | --- | ---: | ---: | ---: | --- |\n";
    std::vector<std::string> unrecorded;
    for (const EvalRun* t : runs) {
        const TextOrigin o = text_origin(c.method, c.eval->result, t->text);
        s += kld_row(*t, "", held_out_cell(o));
        for (const std::string& d : o.unrecorded)
            if (std::find(unrecorded.begin(), unrecorded.end(), d) == unrecorded.end())
                unrecorded.push_back(d);
    }
    s += "\n";
    s += fmt::format(
        "Held out: the text's sha256 is none of the calibration texts' (each domain's text and the part of "
        "it {} read, as `gguf-reap calibrate` recorded them in keeplist.json); a text that shares only some "
        "of its lines with a calibration text is not detected.",
        llama_tool_name(LlamaTool::imatrix));
    if (!unrecorded.empty()) {
        std::string names;
        for (const std::string& d : unrecorded) names += fmt::format("{}{}", names.empty() ? "" : ", ", d);
        s += fmt::format(
            " Not known: the calibration {} of {} {} not recorded ({} not made by `gguf-reap calibrate`), so "
            "a "
            "text may be one of them.",
            unrecorded.size() == 1 ? "text" : "texts", names, unrecorded.size() == 1 ? "is" : "are",
            unrecorded.size() == 1 ? "its imatrix was" : "their imatrices were");
    }
    s += "\n\n";
    for (const EvalRun* t : runs)
        if (t->figures.from == "last chunk row")
            s += fmt::format(
                "{}: {}'s summary was cut off; its figures are the last chunk row's running means (no 99 % "
                "KLD).\n\n",
                t->text, llama_tool_name(LlamaTool::perplexity));
}

// eval --reference: per text, the source (its quantisation alone) and this build (quantisation and
// pruning) against the unpruned reference, each row labelled.
void reference_table(std::string& s, const CardEval& e, const std::string& reference) {
    const EvalResult& r = e.result;
    const std::string name = r.reference->model.shards.empty() ? "" : r.reference->model.shards.front();
    const std::string& type = r.reference->main_type;
    s += fmt::format(
        "The same measures against the unpruned reference `{}` ({}) instead of the source "
        "(`gguf-reap eval {}`): the source's row is what its {} quantisation costs, this "
        "build's is what the whole build costs, quantisation and pruning together.\n\n",
        name, type, reference, r.source_main_type);
    s += fmt::format(
        "| text | against {} | tokens | PPL {} → model | mean KLD | 99 % KLD | same top token |\n", type,
        type);
    s += "| --- | --- | ---: | --- | ---: | ---: | ---: |\n";
    const auto source = runs_of(r.reference_runs, r.source);
    for (const EvalRun* b : runs_of(r.reference_runs, build_path(e))) {
        for (const EvalRun* t : source)
            if (t->text == b->text) s += kld_row(*t, fmt::format("the source ({})", r.source_main_type));
        s += kld_row(*b, "this build");
    }
    s += "\n";
}

json run_json(const EvalRun& t) {
    const KldFigures& f = t.figures;
    const auto finite = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
    return {{"name", t.text},
            {"tokens", t.tokens},
            {"ppl_source", f.ppl_source ? json(f.ppl_source->value) : json(nullptr)},
            {"ppl_output", finite(f.ppl_output.value)},
            {"kld_mean", finite(f.kld.value)},
            {"kld_mean_err", finite(f.kld.err)},
            {"kld_p99", f.kld_p99 ? json(*f.kld_p99) : json(nullptr)},
            {"same_top", finite(f.same_top.value)},
            {"from", f.from}};
}

json runs_json(const std::vector<const EvalRun*>& runs) {
    json a = json::array();
    for (const EvalRun* t : runs) a.push_back(run_json(*t));
    return a;
}

}  // namespace

CardEval read_card_eval(const std::string& path, const ShardSet& output, const std::string& source_identity) {
    const EvalReport report = read_eval_report(path);
    std::vector<std::string> names;
    for (const Shard& s : output.shards()) names.push_back(base_name(s.path));
    CardEval e;
    e.output = eval_report_build(report, names, output.total_bytes(), source_identity);
    e.file = base_name(path);
    e.sha256 = report.sha256;
    if (const auto plot = eval_report_plot(report)) {
        e.svg = plot->name;
        e.svg_bytes = plot->bytes;
    }
    e.result = report.result;
    return e;
}

std::vector<const EvalRun*> card_runs(const CardEval& e) {
    return runs_of(e.result.runs, build_path(e));
}

TextOrigin text_origin(const CardMethod& m, const EvalResult& r, const std::string& text) {
    std::string sha;
    for (const EvalTextFacts& t : r.texts)
        if (t.name == text) sha = t.sha256;
    std::vector<CalibrationText> calibration;
    for (const CardDomain& d : m.domains)
        calibration.push_back({d.name, d.text_sha256, d.used_sha256, d.imatrix_sha256});
    return text_origin(calibration, sha);
}

size_t add_calibration_texts(CardMethod& m, const std::vector<CalibrationText>& calibration) {
    size_t filled = 0;
    for (CardDomain& d : m.domains) {
        if (!d.text_sha256.empty() || d.imatrix_sha256.empty()) continue;
        for (const CalibrationText& c : calibration)
            if (c.imatrix_sha256 == d.imatrix_sha256 && !c.sha256.empty()) {
                d.text_sha256 = c.sha256;
                d.used_sha256 = c.used_sha256;
                ++filled;
                break;
            }
    }
    return filled;
}

std::string origin_words(const TextOrigin& o) {
    if (!o.held_out) return "";
    return *o.held_out ? "held-out text" : fmt::format("calibration text of {}", o.domain);
}

void measured_section(std::string& s, const CardFacts& f) {
    if (!f.eval) return;
    const CardEval& e = *f.eval;
    const EvalResult& r = e.result;
    s += "## Measured against the source\n\n";
    const auto runs = card_runs(e);
    if (!runs.empty()) kld_table(s, f, runs);
    if (r.reference) reference_table(s, e, card_option(f, EvalRequest::kReference));
    if (r.smoke) smoke_line(s, *r.smoke, r.smoke->outputs[e.output]);
    behaviour_lines(s, e, card_option(f, EvalRequest::kPrompts));
    std::string build;
    for (char c : r.llama_build) build += c == '\n' ? std::string("; ") : std::string(1, c);
    std::string cmd;
    if (!runs.empty())
        for (const std::string& a : runs.front()->command)
            cmd += fmt::format("{}{}", cmd.empty() ? "" : " ", base_name(a));
    s += fmt::format("llama.cpp: `{}`. ", build);
    if (!cmd.empty()) s += fmt::format("Command (first text): `{}`. ", cmd);
    s += fmt::format("From {}, sha256 `{}`.\n\n", file_ref(f, e.file), e.sha256);
}

json card_eval_json(const CardEval& e, const CardMethod& m) {
    const EvalResult& r = e.result;
    const auto runs = card_runs(e);
    json texts = runs_json(runs);
    for (json& t : texts) {
        const TextOrigin o = text_origin(m, r, t["name"].get<std::string>());
        t["held_out"] = o.held_out ? json(*o.held_out) : json(nullptr);
        t["calibration_domain"] = o.domain.empty() ? json(nullptr) : json(o.domain);
    }
    json j = {{"file", e.file},
              {"sha256", e.sha256},
              {"llama_build", r.llama_build},
              {"command", runs.empty() ? std::vector<std::string>{} : runs.front()->command},
              {"texts", texts},
              {"svg", e.svg.empty() ? json(nullptr) : json(e.svg)}};
    const auto rate = [](const EvalRate& x) {
        return json{{"k", x.k}, {"n", x.n}, {"rate", x.rate}, {"ci", {x.lo, x.hi}}};
    };
    json beh = json::array();
    for (const EvalBehaviour& b : r.behaviour) {
        if (b.model != build_path(e)) continue;
        const EvalBehaviour& src = source_entry(r, b);
        json x = {{"panel", b.panel},
                  {"gen_tokens", b.gen_tokens},
                  {"temperature", b.temperature},
                  {"samples", b.samples}};
        for (const Measure& m : kMeasures) {
            if (!shown(m, b)) continue;
            const PairedTest t = behaviour_paired_test(src, b, m.key);
            x[m.key] = rate(b.*m.rate);
            x[fmt::format("source_{}", m.key)] = rate(src.*m.rate);
            x[fmt::format("{}_versus_source", m.key)] = {{"n", t.n},
                                                         {"build_only", t.build_only},
                                                         {"source_only", t.source_only},
                                                         {"p", t.p},
                                                         {"differs", t.differs()}};
        }
        json changed = json::array();
        for (const EvalChange& c : b.changes) {
            if (changed.size() == kChangesShown) break;
            changed.push_back({{"measure", c.measure},
                               {"index", c.index + 1},
                               {"sample", c.sample + 1},
                               {"build", c.build},
                               {"excerpt", c.excerpt}});
        }
        x["changed"] = changed;
        beh.push_back(x);
    }
    if (!beh.empty()) j["behaviour"] = beh;
    if (r.reference)
        j["reference"] = {
            {"name", r.reference->model.shards.empty() ? "" : r.reference->model.shards.front()},
            {"main_type", r.reference->main_type},
            {"source_type", r.source_main_type},
            {"source", runs_json(runs_of(r.reference_runs, r.source))},
            {"build", runs_json(runs_of(r.reference_runs, build_path(e)))}};
    if (r.smoke) {
        const EvalSmokeOutput& o = r.smoke->outputs[e.output];
        const auto text = [](const std::optional<std::string>& t) { return t ? json(*t) : json(nullptr); };
        const int64_t at = o.first_diff.value_or(-1);
        j["smoke"] = {{"prompt", r.smoke->prompt},
                      {"generated", r.smoke->source.tokens.size()},
                      {"identical", o.identical},
                      {"first_diff", o.first_diff ? json(*o.first_diff + 1) : json(nullptr)},
                      {"source_token", text(token_at(r.smoke->source, at))},
                      {"build_token", text(token_at(o.generation, at))}};
    }
    return j;
}

}  // namespace gguf_reap
