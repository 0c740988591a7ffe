// eval.json, written (eval_report_json) and read back (read_eval_report) with the same key names: each
// part of the result has its writer and its reader side by side (services/eval_report.h, docs/eval.md).
// About 800 lines, and better whole: this is the one file that spells eval.json's keys, so a
// field added to the document is one change here (and its test), not a hunt.
#include "services/eval_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "format/json_input.h"
#include "gguf_reap/error.h"
#include "gguf_reap/eval.h"
#include "io/paths.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "io/upload_path.h"
#include "services/behaviour_stats.h"
#include "services/llama_cpp/llama_server.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;
using vt = json::value_t;
using JsonIn = BasicJsonIn<json>;
namespace fs = std::filesystem;

constexpr const char* kKind = "gguf-reap eval";
// An eval of a few builds on a few texts is a few kilobytes; the limits stop a hostile file.
constexpr uint64_t kFileLimit = uint64_t{64} << 20;
constexpr size_t kMaxValues = size_t{1} << 22;

// Figures that are not finite are written as null and read back as NaN.
json num(double v) {
    return std::isfinite(v) ? json(v) : json(nullptr);
}
json opt(const std::optional<double>& v) {
    return v && std::isfinite(*v) ? json(*v) : json(nullptr);
}
json str_or_null(const std::string& s) {
    return s.empty() ? json(nullptr) : json(s);
}
// A figure read back: NaN where the document has null.
double figure(const JsonIn& j, const char* key) {
    return j.number(key).value_or(NAN);
}

// --- the models ---------------------------------------------------------------------------------

json model_json(const EvalOutputFacts& m) {
    return {{"path", m.path}, {"shards", m.shards}, {"bytes", m.bytes}, {"expert_count", m.expert_count}};
}
EvalOutputFacts model_from(const JsonIn& j) {
    j.at("shards", vt::array);
    return {j.str("path"), j.words("shards"), j.count("bytes"), j.count_or("expert_count")};
}

// --- the KLD runs -------------------------------------------------------------------------------

json run_json(const EvalRun& r) {
    const KldFigures& f = r.figures;
    json j;
    j["output"] = r.output;
    j["text"] = r.text;
    j["tokens"] = r.tokens;
    j["chunks"] = f.chunks;
    j["from"] = f.from;
    j["kld"] = {{"mean", num(f.kld.value)}, {"mean_err", num(f.kld.err)}, {"median", opt(f.kld_median)},
                {"p99", opt(f.kld_p99)},    {"p999", opt(f.kld_p999)},    {"max", opt(f.kld_max)}};
    j["same_top"] = {{"mean", num(f.same_top.value)}, {"err", num(f.same_top.err)}};
    j["ppl"] = {{"source", f.ppl_source ? num(f.ppl_source->value) : json(nullptr)},
                {"source_err", f.ppl_source ? num(f.ppl_source->err) : json(nullptr)},
                {"output", num(f.ppl_output.value)},
                {"output_err", num(f.ppl_output.err)}};
    j["ln_ppl_ratio"] = {{"mean", num(f.ln_ppl_ratio.value)}, {"err", num(f.ln_ppl_ratio.err)}};
    j["rms_dp"] = num(f.rms_dp.value);
    j["rms_dp_err"] = num(f.rms_dp.err);
    j["command"] = r.command;
    return j;
}
EvalRun run_from(const JsonIn& j) {
    EvalRun r;
    r.output = j.str("output");
    r.text = j.str("text");
    r.tokens = j.integer("tokens");
    KldFigures& f = r.figures;
    f.chunks = j.integer_or("chunks");
    f.from = j.str_or("from");
    const JsonIn kld = j.at("kld", vt::object), ppl = j.at("ppl", vt::object);
    f.kld = {figure(kld, "mean"), figure(kld, "mean_err")};
    f.kld_median = kld.number("median");
    f.kld_p99 = kld.number("p99");
    f.kld_p999 = kld.number("p999");
    f.kld_max = kld.number("max");
    const JsonIn top = j.at("same_top", vt::object);
    f.same_top = {figure(top, "mean"), figure(top, "err")};
    if (const auto src = ppl.number("source")) f.ppl_source = ValueErr{*src, figure(ppl, "source_err")};
    f.ppl_output = {figure(ppl, "output"), figure(ppl, "output_err")};
    if (const auto l = j.maybe("ln_ppl_ratio", vt::object))
        f.ln_ppl_ratio = {figure(*l, "mean"), figure(*l, "err")};
    f.rms_dp = {figure(j, "rms_dp"), figure(j, "rms_dp_err")};
    r.command = j.words("command");
    return r;
}

// --- the texts and their base runs --------------------------------------------------------------

json text_json(const EvalTextFacts& t) {
    json j = {{"name", t.name},
              {"path", t.path},
              {"sha256", t.sha256},
              {"bytes", t.bytes},
              {"tokens", t.tokens},
              {"chunks", t.chunks},
              {"scored_tokens", t.scored_tokens},
              {"source_ppl", t.base.ppl ? num(t.base.ppl->value) : json(nullptr)},
              {"base_file", t.base.file},
              {"base_bytes", t.base.bytes},
              {"base_cached", t.base.cached},
              {"base_command", t.base.command},
              {"tokenize_command", t.tokenize_command},
              {"held_out", t.held_out ? json(*t.held_out) : json(nullptr)},
              {"calibration_domain", str_or_null(t.calibration_domain)}};
    if (const auto& b = t.reference_base)
        j["reference_base"] = {{"ppl", b->ppl ? num(b->ppl->value) : json(nullptr)},
                               {"file", b->file},
                               {"bytes", b->bytes},
                               {"cached", b->cached},
                               {"command", b->command}};
    return j;
}
EvalTextFacts text_from(const JsonIn& j) {
    EvalTextFacts t;
    t.name = j.str("name");
    t.path = j.str_or("path");
    t.sha256 = j.str_or("sha256");
    t.bytes = j.count_or("bytes");
    t.tokens = j.integer_or("tokens");
    t.chunks = j.integer_or("chunks");
    t.scored_tokens = j.integer_or("scored_tokens");
    if (const auto p = j.number("source_ppl")) t.base.ppl = ValueErr{*p, 0};
    t.base.file = j.str_or("base_file");
    t.base.bytes = j.count_or("base_bytes");
    t.base.cached = j.flag("base_cached");
    t.base.command = j.words("base_command");
    t.tokenize_command = j.words("tokenize_command");
    if (j.maybe("held_out", vt::boolean)) t.held_out = j.flag("held_out");
    t.calibration_domain = j.str_or("calibration_domain");
    if (const auto b = j.maybe("reference_base", vt::object)) {
        EvalBase rb;
        if (const auto p = b->number("ppl")) rb.ppl = ValueErr{*p, 0};
        rb.file = b->str_or("file");
        rb.bytes = b->count_or("bytes");
        rb.cached = b->flag("cached");
        rb.command = b->words("command");
        t.reference_base = std::move(rb);
    }
    return t;
}

// eval --calibration: the calibrate.json and its texts (what a card needs to tell a held-out text).
json calibration_json(const EvalResult::Calibration& c) {
    json texts = json::array();
    for (const CalibrationText& t : c.texts)
        texts.push_back({{"name", t.name},
                         {"sha256", t.sha256},
                         {"used_sha256", t.used_sha256},
                         {"imatrix_sha256", t.imatrix_sha256}});
    return {{"path", c.path}, {"sha256", c.sha256}, {"texts", texts}};
}
EvalResult::Calibration calibration_from(const JsonIn& j) {
    EvalResult::Calibration c;
    c.path = j.str_or("path");
    c.sha256 = j.str_or("sha256");
    for (const JsonIn& t : j.items("texts"))
        c.texts.push_back({t.str("name"), t.str("sha256"), t.str_or("used_sha256"), t.str("imatrix_sha256")});
    return c;
}

// --- the smoke test -----------------------------------------------------------------------------

json token_json(const SmokeToken& t) {
    return {{"id", t.id}, {"text", t.text}};
}
json generation_json(const SmokeGeneration& g) {
    json tokens = json::array();
    std::string text;
    for (const SmokeToken& t : g.tokens) {
        tokens.push_back(token_json(t));
        text += t.text;
    }
    return {{"tokens", tokens}, {"text", text}, {"command", g.command}};
}
SmokeGeneration generation_from(const JsonIn& j) {
    SmokeGeneration g;
    for (const JsonIn& t : j.items("tokens", true))
        g.tokens.push_back({static_cast<int32_t>(t.integer("id")), t.str("text")});
    g.command = j.words("command");
    return g;
}

json smoke_json(const EvalSmoke& s) {
    return {{"prompt", s.prompt},
            {"tokens_requested", s.tokens_requested},
            {"prompt_tokens", s.prompt_tokens},
            {"llama_completion", s.completion_path},
            {"source", generation_json(s.source)}};
}

// An OUT's generation against the source's: how many leading tokens agree, and the first that differs
// (a side is null when its generation ended there), counted from 1 as eval's table and the card count
// tokens (issue 33).
json output_smoke_json(const EvalSmoke& s, const EvalSmokeOutput& o) {
    json j = generation_json(o.generation);
    j["identical"] = o.identical;
    json diff = nullptr;
    if (o.first_diff) {
        const auto i = static_cast<size_t>(*o.first_diff);
        const auto side = [&](const SmokeGeneration& g) {
            return i < g.tokens.size() ? token_json(g.tokens[i]) : json(nullptr);
        };
        diff = {{"index", *o.first_diff + 1}, {"source", side(s.source)}, {"output", side(o.generation)}};
    }
    j["first_diff"] = diff;
    return j;
}
EvalSmokeOutput output_smoke_from(const JsonIn& j, const std::string& output) {
    EvalSmokeOutput o;
    o.output = output;
    o.generation = generation_from(j);
    o.identical = j.integer("identical");
    if (const auto d = j.maybe("first_diff", vt::object)) o.first_diff = d->integer("index") - 1;
    return o;
}

// --- the behaviour runs -------------------------------------------------------------------------

json rate_ci(const EvalRate& x) {
    return json::array({x.lo, x.hi});
}
EvalRate rate_from(const JsonIn& b, int64_t n, const char* count, const char* rate, const char* ci) {
    EvalRate r;
    r.k = b.integer(count);
    r.n = n;
    r.rate = b.at(rate, vt::number_float).value().get<double>();
    const json& c = b.at(ci, vt::array).value();
    if (c.size() != 2 || !c[0].is_number() || !c[1].is_number()) b.fail(ci, "is not [low, high]");
    r.lo = c[0].get<double>();
    r.hi = c[1].get<double>();
    return r;
}

constexpr std::pair<EvalOutcome, const char*> kOutcomeNames[] = {{EvalOutcome::limit, "limit"},
                                                                 {EvalOutcome::loop, "loop"},
                                                                 {EvalOutcome::natural_end, "eog"},
                                                                 {EvalOutcome::error, "error"}};

json outcomes_json(const std::vector<EvalOutcome>& v) {
    json a = json::array();
    for (EvalOutcome o : v)
        for (const auto& [k, name] : kOutcomeNames)
            if (k == o) a.push_back(name);
    return a;
}
std::vector<EvalOutcome> outcomes_from(const JsonIn& j, int64_t n) {
    std::vector<EvalOutcome> v;
    const json& a = j.at("outcomes", vt::array).value();
    for (const json& x : a) {
        const auto* it = std::find_if(std::begin(kOutcomeNames), std::end(kOutcomeNames), [&](const auto& n) {
            return x.is_string() && x.get<std::string>() == n.second;
        });
        if (it == std::end(kOutcomeNames))
            j.fail("outcomes", "holds a value other than limit, loop, eog or error");
        v.push_back(it->first);
    }
    if (v.size() != static_cast<size_t>(n))
        j.fail("outcomes",
               fmt::format("has {} entries for {} generations ({} prompts × {} samples)", v.size(), n,
                           j.integer("prompts"), n / std::max<int64_t>(1, j.integer("prompts"))));
    return v;
}

// The build against the source on one measure, as services/behaviour_stats computes it, and the
// generations where the two differ (EvalBehaviour::changes).
json paired_json(const EvalBehaviour& src, const EvalBehaviour& build, std::string_view measure) {
    const PairedTest t = behaviour_paired_test(src, build, measure);
    json changed = json::array();
    for (const EvalChange& c : build.changes) {
        if (c.measure != measure) continue;
        json one = {{"index", c.index}};
        if (build.temperature > 0) one["sample"] = c.sample;
        one["build"] = c.build;
        one["excerpt"] = c.excerpt;
        changed.push_back(one);
    }
    return {{"n", t.n}, {"build_only", t.build_only}, {"source_only", t.source_only},
            {"p", t.p}, {"differs", t.differs()},     {"changed", changed}};
}

json chat_outcomes_json(const std::vector<EvalChatOutcome>& v) {
    json a = json::array();
    for (EvalChatOutcome o : v)
        a.push_back(o == EvalChatOutcome::plain ? json(nullptr) : json(chat_outcome_name(o)));
    return a;
}
std::vector<EvalChatOutcome> chat_outcomes_from(const JsonIn& j, int64_t n) {
    std::vector<EvalChatOutcome> v;
    constexpr EvalChatOutcome kAll[] = {EvalChatOutcome::text, EvalChatOutcome::tool_call,
                                        EvalChatOutcome::bad_tool_call, EvalChatOutcome::template_error,
                                        EvalChatOutcome::error};
    for (const json& x : j.at("chat_outcomes", vt::array).value()) {
        if (x.is_null()) {
            v.push_back(EvalChatOutcome::plain);
            continue;
        }
        const auto* it = std::find_if(std::begin(kAll), std::end(kAll), [&](EvalChatOutcome o) {
            return x.is_string() && x.get<std::string>() == chat_outcome_name(o);
        });
        if (it == std::end(kAll))
            j.fail("chat_outcomes",
                   "holds a value other than null, text, tool_call, bad_tool_call, template_error or error");
        v.push_back(*it);
    }
    if (v.size() != static_cast<size_t>(n))
        j.fail("chat_outcomes", fmt::format("has {} entries for {} generations", v.size(), n));
    return v;
}

std::vector<EvalPromptError> prompt_errors_from(const JsonIn& j, const char* key) {
    std::vector<EvalPromptError> v;
    for (const JsonIn& e : j.items(key, true))
        v.push_back({e.integer("index"), e.integer_or("sample"), e.str("error")});
    return v;
}

json prompt_errors_json(const EvalBehaviour& x, const std::vector<EvalPromptError>& v) {
    json errors = json::array();
    for (const EvalPromptError& e : v) {
        json one = {{"index", e.index}, {"error", e.error}};
        if (x.temperature > 0) one["sample"] = e.sample;
        errors.push_back(one);
    }
    return errors;
}

json behaviour_json(const EvalBehaviour& x, const EvalBehaviour* src) {
    const json errors = prompt_errors_json(x, x.prompt_errors);
    json j = {{"model", x.model},
              {"panel", x.panel},
              {"prompts", x.prompts},
              {"gen_tokens", x.gen_tokens},
              {"temperature", x.temperature},
              {"samples", x.samples},
              {"seed", x.seed ? json(*x.seed) : json(nullptr)},
              {"generations", x.generations()},
              {"loops", x.loops.k},
              {"loop_rate", x.loops.rate},
              {"loop_rate_ci", rate_ci(x.loops)},
              {"natural_ends", x.natural_ends.k},
              {"natural_end_rate", x.natural_ends.rate},
              {"natural_end_rate_ci", rate_ci(x.natural_ends)},
              {"errors", x.errors.k},
              {"error_rate", x.errors.rate},
              {"error_rate_ci", rate_ci(x.errors)},
              {"mean_tokens", x.mean_tokens},
              {"tokens", x.tokens},
              {"distinct_4", x.distinct_4 ? json(*x.distinct_4) : json(nullptr)},
              {"four_grams", x.four_grams},
              {"distinct_four_grams", x.distinct_four_grams},
              {"seconds", x.seconds},
              {"server_command", x.server_command},
              {"outcomes", outcomes_json(x.outcomes)},
              {"tokens_sha256", x.tokens_sha256},
              {"prompt_errors", errors}};
    // With chat lines only: an eval without them writes the document it wrote before.
    const bool chat = !x.chat_outcomes.empty();
    if (chat) {
        j["chat_generations"] = x.template_errors.n;
        j["template_errors"] = x.template_errors.k;
        j["template_error_rate"] = x.template_errors.rate;
        j["template_error_rate_ci"] = rate_ci(x.template_errors);
        j["tool_generations"] = x.tool_calls.n;
        j["tool_calls"] = x.tool_calls.k;
        j["tool_call_rate"] = x.tool_calls.rate;
        j["tool_call_rate_ci"] = rate_ci(x.tool_calls);
        j["chat_outcomes"] = chat_outcomes_json(x.chat_outcomes);
        j["tools_offered"] = x.tools_offered;
        j["bad_tool_calls"] = prompt_errors_json(x, x.bad_tool_calls);
    }
    if (src && src != &x) {
        json& v = j["versus_source"];
        for (const char* m : kBehaviourMeasures)
            if (chat || (std::string_view(m) != "template_errors" && std::string_view(m) != "tool_calls"))
                v[m] = paired_json(*src, x, m);
    }
    return j;
}
void changes_from(const JsonIn& j, EvalBehaviour& b) {
    const auto v = j.maybe("versus_source", vt::object);
    if (!v) return;
    for (const char* m : kBehaviourMeasures) {
        const auto p = v->maybe(m, vt::object);
        if (!p) continue;
        for (const JsonIn& c : p->items("changed", true))
            b.changes.push_back(
                {m, c.integer("index"), c.integer_or("sample"), c.flag("build"), c.str("excerpt")});
    }
}
EvalBehaviour behaviour_from(const JsonIn& j) {
    EvalBehaviour b;
    b.model = j.str("model");
    b.panel = j.str("panel");
    b.prompts = j.integer("prompts");
    b.gen_tokens = j.count("gen_tokens");
    // An eval from before --temp: greedy, one sample.
    if (const auto t = j.number("temperature")) b.temperature = *t;
    if (!std::isfinite(b.temperature) || b.temperature < 0)
        j.fail("temperature", "is not a temperature of 0 or more");
    if (j.maybe("samples", vt::number_integer)) b.samples = j.integer("samples");
    // Bounded so that prompts × samples, the rates' n, cannot overflow.
    if (b.samples < 1 || b.samples > (int64_t{1} << 31)) j.fail("samples", "is not a number of samples");
    if (b.prompts < 0 || b.prompts > (int64_t{1} << 31)) j.fail("prompts", "is not a number of prompts");
    if (j.maybe("seed", vt::number_unsigned)) b.seed = j.count("seed");
    const int64_t n = b.prompts * b.samples;
    b.loops = rate_from(j, n, "loops", "loop_rate", "loop_rate_ci");
    b.natural_ends = rate_from(j, n, "natural_ends", "natural_end_rate", "natural_end_rate_ci");
    b.errors = rate_from(j, n, "errors", "error_rate", "error_rate_ci");
    b.outcomes = outcomes_from(j, n);
    b.tokens_sha256 = j.str_or("tokens_sha256");
    b.prompt_errors = prompt_errors_from(j, "prompt_errors");
    if (j.maybe("chat_outcomes", vt::array)) {
        b.chat_outcomes = chat_outcomes_from(j, n);
        b.template_errors = rate_from(j, j.integer("chat_generations"), "template_errors",
                                      "template_error_rate", "template_error_rate_ci");
        b.tool_calls =
            rate_from(j, j.integer("tool_generations"), "tool_calls", "tool_call_rate", "tool_call_rate_ci");
        for (const json& t : j.at("tools_offered", vt::array).value()) {
            if (!t.is_boolean()) j.fail("tools_offered", "holds a value that is not true or false");
            b.tools_offered.push_back(t.get<bool>());
        }
        if (b.tools_offered.size() != b.chat_outcomes.size())
            j.fail("tools_offered",
                   fmt::format("has {} entries for {} generations", b.tools_offered.size(), n));
        b.bad_tool_calls = prompt_errors_from(j, "bad_tool_calls");
    }
    changes_from(j, b);
    b.mean_tokens = figure(j, "mean_tokens");
    b.tokens = j.integer_or("tokens");
    b.distinct_4 = j.number("distinct_4");
    b.four_grams = j.count_or("four_grams");
    b.distinct_four_grams = j.count_or("distinct_four_grams");
    b.seconds = figure(j, "seconds");
    b.server_command = j.words("server_command");
    return b;
}

json panel_json(const EvalPanelFacts& p) {
    return {{"name", p.name},
            {"path", p.path},
            {"sha256", p.sha256},
            {"prompts", p.prompts},
            {"bytes", p.bytes},
            {"format", p.format},
            {"max_prompt_bytes", p.max_prompt_bytes}};
}
// "chat_lines" and "tool_lines" only for a panel with chat lines.
json panel_json_with_chat(const EvalPanelFacts& p) {
    json j = panel_json(p);
    if (p.chat_lines > 0) {
        j["chat_lines"] = p.chat_lines;
        j["tool_lines"] = p.tool_lines;
    }
    return j;
}
EvalPanelFacts panel_from(const JsonIn& j) {
    EvalPanelFacts p;
    p.name = j.str("name");
    p.path = j.str_or("path");
    p.sha256 = j.str_or("sha256");
    p.prompts = j.integer_or("prompts");
    p.bytes = j.count_or("bytes");
    p.format = j.str_or("format");
    p.max_prompt_bytes = j.count_or("max_prompt_bytes");
    p.chat_lines = j.integer_or("chat_lines");
    p.tool_lines = j.integer_or("tool_lines");
    return p;
}

// "panels", "generation" and "behaviour": written only with --prompts.
void add_behaviour(json& j, const EvalResult& r) {
    if (r.panels.empty()) return;
    json panels = json::array(), b = json::array();
    for (const EvalPanelFacts& p : r.panels) panels.push_back(panel_json_with_chat(p));
    j["panels"] = panels;
    j["generation"] = {{"llama_server", r.server_path},
                       {"endpoint", llama_cpp::endpoint_words(r.chat)},
                       {"chat", r.chat},
                       {"parallel", r.parallel},
                       {"gen_tokens", r.gen_tokens},
                       {"temperatures", r.temperatures},
                       {"samples", r.samples},
                       {"seed", r.seed}};
    json& g = j["generation"];
    const bool greedy = std::find(r.temperatures.begin(), r.temperatures.end(), 0.0) != r.temperatures.end();
    if (greedy || r.temperatures.empty())
        g["request"] = json::parse(llama_cpp::completion_request_settings(r.gen_tokens));
    // Above temperature 0, the request with its temperature and seed null: each generation has its own.
    if (std::any_of(r.temperatures.begin(), r.temperatures.end(), [](double t) { return t > 0; })) {
        json sampled =
            json::parse(llama_cpp::completion_request_settings(r.gen_tokens, llama_cpp::Sampling{}));
        sampled["temperature"] = nullptr;
        sampled["seed"] = nullptr;
        g["sampled_request"] = sampled;
    }
    // A chat line's request: the settings above without return_tokens, with its messages and tools.
    if (std::any_of(r.panels.begin(), r.panels.end(),
                    [](const EvalPanelFacts& p) { return p.chat_lines > 0; }))
        g["chat_endpoint"] = llama_cpp::kChatPath;
    for (const EvalBehaviour& x : r.behaviour) b.push_back(behaviour_json(x, behaviour_source(r, x)));
    j["behaviour"] = b;
}
void behaviour_from(const JsonIn& doc, EvalResult& r) {
    for (const JsonIn& p : doc.items("panels")) r.panels.push_back(panel_from(p));
    if (const auto g = doc.maybe("generation", vt::object)) {
        r.server_path = g->str_or("llama_server");
        r.chat = g->flag("chat");
        r.parallel = g->count_or("parallel");
        r.gen_tokens = g->count_or("gen_tokens");
        if (const auto t = g->maybe("temperatures", vt::array)) {
            r.temperatures.clear();
            for (const json& v : t->value()) {
                if (!v.is_number() || v.get<double>() < 0)
                    g->fail("temperatures", "holds a value that is not a temperature");
                r.temperatures.push_back(v.get<double>());
            }
        }
        if (g->maybe("samples", vt::number_integer)) r.samples = g->integer("samples");
        r.seed = g->count_or("seed");
    }
    if (r.temperatures.empty()) r.temperatures = {0};  // an eval from before --temp
    for (const JsonIn& b : doc.items("behaviour")) r.behaviour.push_back(behaviour_from(b));
}

// --- local paths --------------------------------------------------------------------------------

// eval.json is meant for upload beside the card: no absolute local path in it. Every string that is one
// (a path, or a word of a recorded command) becomes upload_path's name for it (io/paths.h); the same path
// always maps to the same name, so the card still matches runs to builds.
// Every path in the document, relative or a base name. Values that are texts, not paths, are left as they
// are, even when they start with "/": generated text and prompts ("text", "prompt"), the server endpoint
// and request ("endpoint", "request").
void drop_local_paths(json& j, const fs::path& base) {
    if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) {
            const std::string& k = it.key();
            if (k == "text" || k == "prompt" || k == "endpoint" || k == "request" || k == "excerpt" ||
                k == "chat_endpoint")
                continue;
            drop_local_paths(it.value(), base);
        }
        return;
    }
    if (j.is_array()) {
        for (auto& v : j) drop_local_paths(v, base);
        return;
    }
    if (j.is_string()) j = upload_path(j.get<std::string>(), base);
}

}  // namespace

std::string path_for_upload(const std::string& path, const std::string& json_out) {
    return upload_path(path, document_dir(json_out));
}

// --- the document -------------------------------------------------------------------------------

json eval_report_json(const EvalResult& r) {
    json j;
    j["tool"] = r.tool;
    j["kind"] = kKind;
    j["llama_cpp"] = {{"build", r.llama_build}, {"llama_perplexity", r.perplexity_path}};
    // Only when given: an eval without them writes the document it wrote before --llama-args.
    if (!r.llama_args.empty()) j["llama_cpp"]["args"] = r.llama_args;
    j["source"] = model_json(r.source_facts());
    j["source"]["identity"] = r.source_identity;
    j["source"]["main_type"] = r.source_main_type;
    // With --reference only: the model the source and every build were also measured against.
    if (r.reference) {
        j["reference"] = model_json(r.reference->model);
        j["reference"]["identity"] = r.reference->identity;
        j["reference"]["main_type"] = r.reference->main_type;
    }
    j["settings"] = {{"ctx", r.ctx},
                     {"batch", r.batch},
                     {"chunks", r.chunks_requested ? json(*r.chunks_requested) : json(nullptr)},
                     {"scored_per_chunk", r.ctx - 1 - r.ctx / 2}};
    j["texts"] = json::array();
    for (const EvalTextFacts& t : r.texts) j["texts"].push_back(text_json(t));
    j["calibration"] = r.calibration ? calibration_json(*r.calibration) : json(nullptr);
    j["outputs"] = json::array();
    for (size_t i = 0; i < r.outputs.size(); ++i) {
        json o = model_json(r.outputs[i]);
        if (r.smoke) o["smoke"] = output_smoke_json(*r.smoke, r.smoke->outputs[i]);
        j["outputs"].push_back(o);
    }
    j["runs"] = json::array();
    for (const EvalRun& run : r.runs) j["runs"].push_back(run_json(run));
    if (r.reference) {
        j["reference_runs"] = json::array();
        for (const EvalRun& run : r.reference_runs) j["reference_runs"].push_back(run_json(run));
    }
    if (r.smoke) j["smoke"] = smoke_json(*r.smoke);  // absent without --smoke-prompt
    add_behaviour(j, r);
    j["files"] = {{"json", r.json_written.empty() ? json(nullptr) : json(base_name(r.json_written))},
                  {"svg", r.svg_written.empty() ? json(nullptr) : json(base_name(r.svg_written))},
                  {"svg_sha256", str_or_null(r.svg_sha256)},
                  {"generations",
                   r.generations_written.empty() ? json(nullptr) : json(base_name(r.generations_written))}};
    if (!r.json_written.empty()) drop_local_paths(j, document_dir(r.json_written));
    return j;
}

EvalReport read_eval_report(const std::string& path) {
    const std::string text = read_small_file(path, kFileLimit, "gguf-reap eval report");
    const json doc = parse_json_input<json>(text, path, 16, kMaxValues, "an eval report");
    if (!doc.is_object() || doc.value("kind", "") != kKind)
        throw InputError(path, std::nullopt, "kind",
                         Message{"not a `gguf-reap eval ", EvalRequest::kOut, "` report"});
    const Message missing{"missing (is this `gguf-reap eval ", EvalRequest::kOut, "` output?)"};
    const JsonIn d(doc, path, "", missing);
    EvalReport rep{{}, path, sha256_hex(text.data(), text.size())};
    EvalResult& r = rep.result;
    r.tool = d.str_or("tool");
    const JsonIn llama = d.at("llama_cpp", vt::object);
    r.llama_build = llama.str("build");
    r.perplexity_path = llama.str_or("llama_perplexity");
    r.llama_args = llama.words("args");
    const JsonIn src = d.at("source", vt::object);
    const EvalOutputFacts s = model_from(src);
    r.source = s.path;
    r.source_shards = s.shards;
    r.source_bytes = s.bytes;
    r.source_expert_count = s.expert_count;
    r.source_identity = src.str("identity");
    r.source_main_type = src.str_or("main_type");
    if (const auto ref = d.maybe("reference", vt::object))
        r.reference = EvalReferenceFacts{model_from(*ref), ref->str_or("identity"), ref->str("main_type")};
    if (const auto st = d.maybe("settings", vt::object)) {
        r.ctx = st->count_or("ctx");
        r.batch = st->count_or("batch");
        if (st->maybe("chunks", vt::number_unsigned)) r.chunks_requested = st->count("chunks");
    }
    for (const JsonIn& t : d.items("texts")) r.texts.push_back(text_from(t));
    if (const auto c = d.maybe("calibration", vt::object)) r.calibration = calibration_from(*c);
    const std::vector<JsonIn> outputs = d.items("outputs", true);
    for (const JsonIn& o : outputs) r.outputs.push_back(model_from(o));
    for (const JsonIn& run : d.items("runs")) r.runs.push_back(run_from(run));
    if (r.reference)
        for (const JsonIn& run : d.items("reference_runs", true)) r.reference_runs.push_back(run_from(run));
    if (const auto sm = d.maybe("smoke", vt::object)) {
        EvalSmoke& e = r.smoke.emplace();
        e.prompt = sm->str("prompt");
        e.tokens_requested = sm->count_or("tokens_requested");
        e.prompt_tokens = sm->integer_or("prompt_tokens");
        e.completion_path = sm->str_or("llama_completion");
        e.source = generation_from(sm->at("source", vt::object));
        for (size_t i = 0; i < outputs.size(); ++i)
            e.outputs.push_back(output_smoke_from(outputs[i].at("smoke", vt::object), r.outputs[i].path));
    }
    behaviour_from(d, r);
    if (const auto f = d.maybe("files", vt::object)) {
        r.json_written = f->str_or("json");
        r.svg_written = f->str_or("svg");
        r.svg_sha256 = f->str_or("svg_sha256");
        r.generations_written = f->str_or("generations");
    }
    return rep;
}

// --- what card checks ---------------------------------------------------------------------------

size_t eval_report_build(const EvalReport& report, const std::vector<std::string>& shards, uint64_t bytes,
                         const std::string& source_identity) {
    const EvalResult& r = report.result;
    const std::string& path = report.path;
    if (r.source_identity != source_identity)
        throw InputError(
            path, std::nullopt, "source.identity",
            fmt::format("{} (source {}), but the card's source has identity {}: this eval measured "
                        "builds of another source",
                        r.source_identity, r.source.empty() ? "?" : r.source, source_identity));
    std::string listed;
    std::optional<size_t> mine;
    for (size_t i = 0; i < r.outputs.size(); ++i) {
        listed += fmt::format("{}{}", listed.empty() ? "" : ", ", r.outputs[i].path);
        if (r.outputs[i].shards == shards && r.outputs[i].bytes == bytes) mine = i;
    }
    if (!mine)
        throw InputError(path, std::nullopt, "outputs",
                         fmt::format("measured {}, not this build ({}, {} bytes): run `gguf-reap eval` on it",
                                     listed.empty() ? "no build" : listed, shards.front(), bytes));
    const std::string& build = r.outputs[*mine].path;
    if (r.reference) {
        const auto has = [&](const std::string& m) {
            return std::any_of(r.reference_runs.begin(), r.reference_runs.end(),
                               [&](const EvalRun& x) { return x.output == m; });
        };
        if (!has(r.source) || !has(build))
            throw InputError(path, std::nullopt, "reference_runs",
                             fmt::format("has no run of {} against the reference",
                                         !has(r.source) ? std::string("the source") : build));
    }
    for (const EvalBehaviour& b : r.behaviour) {
        if (b.model != build) continue;
        if (!behaviour_source(r, b))
            throw InputError(path, std::nullopt, "behaviour[]",
                             b.temperature == 0
                                 ? fmt::format("panel {} has no entry for the source", b.panel)
                                 : fmt::format("panel {} has no entry for the source at temperature {}",
                                               b.panel, b.temperature));
    }
    return *mine;
}

std::optional<EvalPlot> eval_report_plot(const EvalReport& report) {
    const EvalResult& r = report.result;
    if (r.svg_written.empty()) return std::nullopt;
    const fs::path beside = fs::path(report.path).parent_path() / r.svg_written;
    std::error_code ec;
    if (!fs::is_regular_file(beside, ec)) return std::nullopt;
    // The plot must be this eval's: another eval (or anything else) may have written a file of that name
    // since. Evals from before files.svg_sha256 are taken as they are.
    if (!r.svg_sha256.empty() && sha256_file(beside.string()) != r.svg_sha256)
        throw InputError(
            beside.string(), std::nullopt, "files.svg_sha256",
            fmt::format("the plot's sha256 is not the {} that {} records: it is not this eval's plot "
                        "(written over by another eval?)",
                        r.svg_sha256, base_name(report.path)));
    return EvalPlot{r.svg_written, fs::file_size(beside, ec)};
}

const EvalBehaviour* behaviour_source(const EvalResult& r, const EvalBehaviour& b) {
    for (const EvalBehaviour& s : r.behaviour)
        if (s.model == "source" && s.panel == b.panel && s.temperature == b.temperature) return &s;
    return nullptr;
}

std::vector<std::optional<bool>> behaviour_marks(const EvalBehaviour& b, std::string_view measure) {
    std::vector<std::optional<bool>> v;
    const auto outcome = [&](EvalOutcome o) {
        for (EvalOutcome x : b.outcomes) v.emplace_back(x == o);
        return v;
    };
    if (measure == "loops") return outcome(EvalOutcome::loop);
    if (measure == "natural_ends") return outcome(EvalOutcome::natural_end);
    if (measure == "errors") return outcome(EvalOutcome::error);
    const bool tools = measure == "tool_calls";
    if (!tools && measure != "template_errors")
        throw std::logic_error(fmt::format("behaviour_marks: no measure {}", measure));
    for (size_t g = 0; g < b.chat_outcomes.size(); ++g) {
        const EvalChatOutcome o = b.chat_outcomes[g];
        const bool counted =
            tools ? g < b.tools_offered.size() && b.tools_offered[g] : o != EvalChatOutcome::plain;
        if (!counted)
            v.emplace_back();
        else
            v.emplace_back(o == (tools ? EvalChatOutcome::tool_call : EvalChatOutcome::template_error));
    }
    return v;
}

PairedTest behaviour_paired_test(const EvalBehaviour& src, const EvalBehaviour& build,
                                 std::string_view measure) {
    const std::vector<std::optional<bool>> x = behaviour_marks(src, measure),
                                           y = behaviour_marks(build, measure);
    std::vector<bool> a, b;
    for (size_t g = 0; g < x.size() && g < y.size(); ++g)
        if (x[g] && y[g]) {
            a.push_back(*x[g]);
            b.push_back(*y[g]);
        }
    return paired_test(a, b);
}

PairedTest behaviour_paired_test(const EvalBehaviour& src, const EvalBehaviour& build, EvalOutcome o) {
    const auto has = [o](const EvalBehaviour& b) {
        std::vector<bool> v;
        for (EvalOutcome x : b.outcomes) v.push_back(x == o);
        return v;
    };
    return paired_test(has(src), has(build));
}

}  // namespace gguf_reap
