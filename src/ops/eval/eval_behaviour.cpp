// eval's behaviour runs (ops/eval/eval_behaviour.h, docs/eval.md "Behaviour").
#include "ops/eval/eval_behaviour.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/perplexity_log.h"
#include "gguf_reap/error.h"
#include "io/child_process.h"
#include "io/paths.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "ops/eval/behaviour_metrics.h"
#include "services/eval_report.h"
#include "services/llama_cpp/llama_server.h"
#include "services/tool_call_check.h"

namespace gguf_reap::eval_detail {

namespace {

using json = nlohmann::json;
using namespace llama_cpp;

std::string snippet(const std::string& s) {
    std::string t = s.substr(0, 200);
    for (char& ch : t)
        if (ch == '\n' || ch == '\r') ch = ' ';
    return s.size() > 200 ? t + "…" : t;
}

// Sized so that every prompt (at most one token per byte, plus BOS) and N generated tokens fit one slot;
// llama.cpp rounds each slot up to a multiple of 256 anyway.
uint64_t slot_ctx(const EvalRequest& q, const std::vector<Panel>& panels) {
    uint64_t longest = 0;
    for (const Panel& p : panels) longest = std::max(longest, p.facts.max_prompt_bytes);
    bool chat_lines = false;
    for (const Panel& p : panels) chat_lines = chat_lines || p.facts.chat_lines > 0;
    const uint64_t need = longest + (q.chat || chat_lines ? kChatAllowance : 0) + q.gen_tokens + 8;
    return (need + 255) / 256 * 256;
}

struct PanelRun {
    double temperature = 0;
    size_t samples = 1;                          // per prompt
    std::vector<Generation> gens;                // prompt-major, then sample
    std::vector<std::string> errors;             // per generation: why the server gave none ("" when it did)
    std::vector<std::optional<uint32_t>> seeds;  // per generation; null when greedy
    // Per generation of a chat line (plain for a plain prompt's): what the reply was, its token count,
    // its tool calls (null when none), why a tool call was invalid.
    std::vector<EvalChatOutcome> chat;
    std::vector<int64_t> chat_tokens;
    std::vector<json> tool_calls;
    std::vector<std::string> tool_errors;
    double seconds = 0;
};

// What makes a /completion reply the prompt's error rather than the eval's failure (docs/eval.md,
// "Behaviour"): a server error (HTTP 5xx: llama-server answers 500 when, for one, a pruned build's output
// is not valid UTF-8), no reply in time, or an answer with no token (checked once the reply is read).
// Empty when the reply is a generation or fails the eval.
std::string prompt_error(const HttpReply& h, uint64_t timeout_s) {
    if (h.timed_out) return fmt::format("no reply within {} s (--server-timeout)", timeout_s);
    if (h.connected() && h.status >= 500 && h.status <= 599)
        return fmt::format("HTTP {}: {}", h.status, snippet(h.body));
    return {};
}

// A reply that fails the eval: what it was, the server stopped, its log's last lines.
[[noreturn]] void reply_failed(LlamaServer& server, std::string_view endpoint, std::string_view what,
                               const Panel& p, const HttpReply& h) {
    server.check_running(h.connected() ? 0 : 1000);
    if (!h.connected())
        server.fail(fmt::format("POST {} for {} of {}: {}", endpoint, what, p.facts.name, h.error));
    server.fail(fmt::format("POST {} for {} of {}: HTTP {}: {}", endpoint, what, p.facts.name, h.status,
                            snippet(h.body)));
}

// The prompts as generated: as they are, or with --chat each rendered by the server's chat template (its
// /apply-template endpoint, which /v1/chat/completions uses too) as one user message.
std::vector<std::string> rendered_prompts(Ctx& c, LlamaServer& server, const Panel& p, uint64_t slot) {
    const EvalRequest& q = c.q;
    std::vector<std::string> prompts = p.prompts;
    if (!q.chat) return prompts;
    std::vector<std::string> bodies;
    std::vector<size_t> plain;  // a chat line is sent to the chat endpoint as it is
    for (size_t i = 0; i < p.prompts.size(); ++i)
        if (!p.chat[i]) {
            plain.push_back(i);
            bodies.push_back(template_body(p.prompts[i]));
        }
    post_all(server, kApplyTemplatePath, bodies, q.parallel, [&](size_t b, HttpReply&& h) {
        const size_t i = plain[b];
        const std::string what = fmt::format("prompt {}", i + 1);
        if (!h.connected() || h.status != 200) reply_failed(server, kApplyTemplatePath, what, p, h);
        std::optional<std::string> templated = parse_template_reply(h.body);
        if (!templated)
            server.fail(
                fmt::format("POST {} for prompt {} of {}: not a JSON object with a \"prompt\" string: {}",
                            kApplyTemplatePath, i + 1, p.facts.name, snippet(h.body)));
        prompts[i] = std::move(*templated);
        if (prompts[i].size() + q.gen_tokens + 8 > slot)
            server.fail(
                fmt::format("the chat template makes prompt {} of {} {} bytes, more than the {} "
                            "its slot has room for with {} generated tokens",
                            i + 1, p.facts.name, prompts[i].size(), slot - q.gen_tokens - 8, q.gen_tokens));
    });
    return prompts;
}

// A chat line's reply (docs/eval.md, "Chat and tools"): a template error (HTTP 4xx or 5xx, or a reply
// that is not a chat completion), another error (no reply in time, an empty answer), or a reply, with or
// without tool calls, each checked against the line's tools. Only a dropped connection fails the eval.
void chat_reply(LlamaServer& server, const Panel& p, const json& line, const std::string& what,
                const EvalRequest& q, HttpReply&& h, PanelRun& run, size_t g) {
    if (h.timed_out) {
        run.errors[g] = fmt::format("no reply within {} s (--server-timeout)", q.server_timeout_s);
        run.chat[g] = EvalChatOutcome::error;
        return;
    }
    if (!h.connected() || (h.status != 200 && h.status < 400)) reply_failed(server, kChatPath, what, p, h);
    if (h.status >= 400) {
        run.errors[g] = fmt::format("HTTP {}: {}", h.status, snippet(h.body));
        run.chat[g] = EvalChatOutcome::template_error;
        return;
    }
    ChatReply r;
    if (const std::string wrong = parse_chat(h.body, q.gen_tokens, r); !wrong.empty()) {
        run.errors[g] = fmt::format("not a chat completion ({}): {}", wrong, snippet(h.body));
        run.chat[g] = EvalChatOutcome::template_error;
        return;
    }
    const ToolCallVerdict v = check_tool_calls(r.message, line.value("tools", json::array()));
    if (r.tokens == 0 && v.kind == ToolCallVerdict::kNone) {
        run.errors[g] = "an empty answer: no token generated";
        run.chat[g] = EvalChatOutcome::error;
        return;
    }
    run.gens[g].eog = r.eog;
    run.gens[g].text = r.text;
    run.chat_tokens[g] = r.tokens;
    if (v.kind != ToolCallVerdict::kNone) run.tool_calls[g] = r.message["tool_calls"];
    run.tool_errors[g] = v.reason;
    run.chat[g] = v.kind == ToolCallVerdict::kValid     ? EvalChatOutcome::tool_call
                  : v.kind == ToolCallVerdict::kInvalid ? EvalChatOutcome::bad_tool_call
                                                        : EvalChatOutcome::text;
}

// Every prompt generated at `temperature`: once greedily at 0, else --samples times, sample j of prompt i
// with the seed sample_seed(--seed, temperature, i, j).
PanelRun run_panel(Ctx& c, LlamaServer& server, const std::string& model_name, const Panel& p,
                   const std::vector<std::string>& prompts, double temperature, uint64_t n_vocab) {
    const EvalRequest& q = c.q;
    PanelRun run;
    run.temperature = temperature;
    run.samples = temperature > 0 ? static_cast<size_t>(q.samples.value_or(1)) : 1;
    std::vector<std::string> bodies;
    std::vector<std::string_view> paths;
    bodies.reserve(prompts.size() * run.samples);
    for (size_t i = 0; i < prompts.size(); ++i)
        for (size_t j = 0; j < run.samples; ++j) {
            std::optional<Sampling> s;
            if (temperature > 0) s = Sampling{temperature, sample_seed(q.seed_value(), temperature, i, j)};
            run.seeds.push_back(s ? std::optional<uint32_t>(s->seed) : std::nullopt);
            bodies.push_back(p.chat[i] ? chat_body(*p.chat[i], q.gen_tokens, s)
                                       : completion_body(prompts[i], q.gen_tokens, s));
            paths.push_back(p.chat[i] ? kChatPath : kCompletionPath);
        }
    run.gens.resize(bodies.size());
    run.errors.resize(bodies.size());
    run.chat.assign(bodies.size(), EvalChatOutcome::plain);
    run.chat_tokens.assign(bodies.size(), 0);
    run.tool_calls.assign(bodies.size(), json());
    run.tool_errors.resize(bodies.size());
    std::optional<ProgressScope> scope;
    if (c.ev.on_progress)
        scope.emplace(c.ev,
                      temperature > 0 ? fmt::format("generating: {} on {} at temperature {}", model_name,
                                                    p.facts.name, temperature)
                                      : fmt::format("generating: {} on {}", model_name, p.facts.name),
                      static_cast<uint64_t>(bodies.size()));
    const auto what = [&](size_t g) {
        return run.samples == 1
                   ? fmt::format("prompt {}", g / run.samples + 1)
                   : fmt::format("prompt {} sample {}", g / run.samples + 1, g % run.samples + 1);
    };
    const auto t0 = std::chrono::steady_clock::now();
    post_all(server, paths, bodies, q.parallel, [&](size_t g, HttpReply&& h) {
        if (const std::optional<json>& line = p.chat[g / run.samples]) {
            chat_reply(server, p, *line, what(g), q, std::move(h), run, g);
            if (c.ev.on_progress) c.ev.on_progress(1);
            return;
        }
        run.errors[g] = prompt_error(h, q.server_timeout_s);
        if (run.errors[g].empty()) {
            if (!h.connected() || h.status != 200) reply_failed(server, kCompletionPath, what(g), p, h);
            const std::string wrong = parse_completion(h.body, q.gen_tokens, n_vocab, run.gens[g]);
            if (!wrong.empty())
                server.fail(fmt::format("POST {} for {} of {}: {}; the reply: {}", kCompletionPath, what(g),
                                        p.facts.name, wrong, snippet(h.body)));
            if (run.gens[g].tokens.empty()) run.errors[g] = "an empty answer: no token generated";
        }
        if (c.ev.on_progress) c.ev.on_progress(1);
    });
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return run;
}

// The SHA-256 of the JSON text [[ids of generation 1],[ids of 2],…] (no spaces; [] for an error), in
// outcomes' order (docs/eval.md, "Sampling"): equal on a rerun that generated the same tokens.
std::string tokens_sha256(const PanelRun& run) {
    json all = json::array();
    for (size_t g = 0; g < run.gens.size(); ++g)
        all.push_back(run.errors[g].empty() ? json(run.gens[g].tokens) : json::array());
    const std::string text = all.dump();
    return sha256_hex(text.data(), text.size());
}

EvalBehaviour figures(const std::string& model, const Panel& p, const PanelRun& run, const EvalRequest& q,
                      const std::vector<std::string>& command) {
    EvalBehaviour b;
    b.model = model;
    b.panel = p.facts.name;
    b.prompts = static_cast<int64_t>(p.prompts.size());
    b.gen_tokens = q.gen_tokens;
    b.temperature = run.temperature;
    b.samples = static_cast<int64_t>(run.samples);
    if (run.temperature > 0) b.seed = q.seed_value();
    b.server_command = command;
    b.seconds = run.seconds;
    b.tokens_sha256 = tokens_sha256(run);
    int64_t loops = 0, ends = 0, errors = 0;
    int64_t chat_n = 0, template_errors = 0, tool_n = 0, tool_calls = 0;
    Distinct4 d4;
    for (size_t i = 0; i < run.gens.size(); ++i) {
        const Generation& g = run.gens[i];
        const std::optional<json>& line = p.chat[i / run.samples];
        if (p.facts.chat_lines > 0) {
            b.chat_outcomes.push_back(run.chat[i]);
            b.tools_offered.push_back(line && line->contains("tools"));
        }
        if (line) {
            ++chat_n;
            template_errors += run.chat[i] == EvalChatOutcome::template_error;
            if (line->contains("tools")) {
                ++tool_n;
                tool_calls += run.chat[i] == EvalChatOutcome::tool_call;
            }
            if (run.chat[i] == EvalChatOutcome::bad_tool_call)
                b.bad_tool_calls.push_back({static_cast<int64_t>(i / run.samples),
                                            static_cast<int64_t>(i % run.samples), run.tool_errors[i]});
        }
        // A generation with an error counts in n and in no other outcome: its tokens are not looked at.
        if (!run.errors[i].empty()) {
            ++errors;
            b.outcomes.push_back(EvalOutcome::error);
            b.prompt_errors.push_back({static_cast<int64_t>(i / run.samples),
                                       static_cast<int64_t>(i % run.samples), run.errors[i]});
            continue;
        }
        // A chat reply has no token ids (the chat endpoint returns none): never a loop, its length the
        // server's count.
        const bool loop = !line && generation_loops(g.tokens, g.eog);
        if (g.eog) ++ends;
        if (loop) ++loops;
        b.outcomes.push_back(g.eog  ? EvalOutcome::natural_end
                             : loop ? EvalOutcome::loop
                                    : EvalOutcome::limit);
        d4.add(g.tokens);
        b.tokens += line ? run.chat_tokens[i] : static_cast<int64_t>(g.tokens.size());
    }
    const int64_t n = b.generations();
    b.loops = wilson_rate(loops, n);
    b.natural_ends = wilson_rate(ends, n);
    b.errors = wilson_rate(errors, n);
    b.template_errors = wilson_rate(template_errors, chat_n);
    b.tool_calls = wilson_rate(tool_calls, tool_n);
    b.mean_tokens = static_cast<double>(b.tokens) / static_cast<double>(n);
    b.distinct_4 = d4.value();
    b.four_grams = d4.total();
    b.distinct_four_grams = d4.distinct();
    return b;
}

// One generations-file line per generation of `run` (docs/eval.md, "Output").
void write_generations(const std::string& model, const Panel& p, const PanelRun& run, const EvalRequest& q,
                       const std::function<void(const std::string&)>& write_line) {
    for (size_t g = 0; g < run.gens.size(); ++g) {
        const Generation& gen = run.gens[g];
        const bool error = !run.errors[g].empty();
        nlohmann::ordered_json l = {{"model", path_for_upload(model, q.json_out)},
                                    {"panel", p.facts.name},
                                    {"index", g / run.samples},
                                    {"tokens", error ? std::vector<int32_t>{} : gen.tokens},
                                    {"end", error     ? "error"
                                            : gen.eog ? "eog"
                                                      : "limit"},
                                    {"text", error ? std::string() : gen.text}};
        if (error) l["error"] = run.errors[g];
        if (p.chat[g / run.samples]) {
            l["chat"] = chat_outcome_name(run.chat[g]);
            l["completion_tokens"] = run.chat_tokens[g];
            if (!run.tool_calls[g].is_null()) l["tool_calls"] = run.tool_calls[g];
            if (!run.tool_errors[g].empty()) l["tool_call_error"] = run.tool_errors[g];
        }
        l["temperature"] = run.temperature;
        l["sample"] = g % run.samples;
        l["seed"] = run.seeds[g] ? nlohmann::ordered_json(*run.seeds[g]) : nlohmann::ordered_json(nullptr);
        // The server's text may end inside a character split across tokens: kept, not refused.
        write_line(l.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
    }
}

// One warning per (model, panel, temperature) with errors, naming the first.
void warn_errors(Ctx& c, const std::string& shown, const EvalBehaviour& b) {
    if (b.prompt_errors.empty()) return;
    const EvalPromptError& f = b.prompt_errors.front();
    if (b.temperature == 0)
        c.ev.warn(
            fmt::format("{} on {}: {} of {} prompts got no generation (prompt {}: {}); each is recorded as "
                        "an error",
                        shown, b.panel, b.prompt_errors.size(), b.prompts, f.index + 1, f.error));
    else
        c.ev.warn(
            fmt::format("{} on {} at temperature {}: {} of {} generations failed (prompt {} sample {}: {}); "
                        "each is recorded as an error",
                        shown, b.panel, b.temperature, b.prompt_errors.size(), b.generations(), f.index + 1,
                        f.sample + 1, f.error));
}

// Each build's generations whose outcome differs from the source's on a measure, with its prompt's
// excerpt (docs/eval.md, "Chat and tools", "Where they differ").
void add_changes(EvalResult& r, const std::vector<Panel>& panels) {
    for (EvalBehaviour& b : r.behaviour) {
        if (b.model == "source") continue;
        const EvalBehaviour* src = behaviour_source(r, b);
        const auto panel = std::find_if(panels.begin(), panels.end(),
                                        [&](const Panel& p) { return p.facts.name == b.panel; });
        if (!src || panel == panels.end()) continue;
        for (const char* m : kBehaviourMeasures) {
            const std::vector<std::optional<bool>> x = behaviour_marks(*src, m), y = behaviour_marks(b, m);
            for (size_t g = 0; g < x.size() && g < y.size(); ++g)
                if (x[g] && y[g] && *x[g] != *y[g]) {
                    const auto i = static_cast<int64_t>(g) / b.samples;
                    b.changes.push_back({m, i, static_cast<int64_t>(g) % b.samples, *y[g],
                                         excerpt(panel->prompts[static_cast<size_t>(i)])});
                }
        }
    }
}

}  // namespace

// --temp, --samples and --seed: each a number in range; the last two only with a temperature above 0.
void check_sampling(const EvalRequest& q) {
    for (const double t : q.temperatures) {
        if (!std::isfinite(t) || t < 0)
            throw RequestError({EvalRequest::kTemp,
                                fmt::format(" {}: give a finite temperature of 0 or more (0 is greedy)", t)});
        if (std::count(q.temperatures.begin(), q.temperatures.end(), t) > 1)
            throw RequestError(
                {EvalRequest::kTemp, fmt::format(" {} is given twice; give each temperature once", t)});
    }
    if (q.samples && (*q.samples < 1 || *q.samples > kMaxSamples))
        throw RequestError({EvalRequest::kSamples, fmt::format(" {}: give 1 to {} generations per prompt",
                                                               *q.samples, kMaxSamples)});
    const bool sampled =
        std::any_of(q.temperatures.begin(), q.temperatures.end(), [](double t) { return t > 0; });
    const auto greedy_only = [&](RequestField f, uint64_t v) {
        throw RequestError(
            {f,
             fmt::format(" {}: only a temperature above 0 is sampled, and none is given; greedy "
                         "decoding (temperature 0) is one generation per prompt; give ",
                         v),
             EvalRequest::kTemp, " T"});
    };
    if (q.samples && !sampled) greedy_only(EvalRequest::kSamples, *q.samples);
    if (q.seed && !sampled) greedy_only(EvalRequest::kSeed, *q.seed);
}

void check_behaviour_request(const EvalRequest& q) {
    if (q.panels.empty()) {
        if (q.chat)
            throw RequestError({EvalRequest::kChat, " needs ", EvalRequest::kPrompts,
                                " NAME=FILE: it changes how prompts are sent"});
        for (const auto& [f, given] : {std::pair{EvalRequest::kTemp, !q.temperatures.empty()},
                                       std::pair{EvalRequest::kSamples, q.samples.has_value()},
                                       std::pair{EvalRequest::kSeed, q.seed.has_value()}})
            if (given)
                throw RequestError(
                    {f, " needs ", EvalRequest::kPrompts, " NAME=FILE: it sets how prompts are generated"});
        return;
    }
    check_sampling(q);
    if (q.gen_tokens < 1 || q.gen_tokens > kMaxGenTokens)
        throw RequestError(
            {EvalRequest::kGenTokens, fmt::format(" {}: give 1 to {} tokens", q.gen_tokens, kMaxGenTokens)});
    if (q.parallel < 1 || q.parallel > kMaxParallel)
        throw RequestError(
            {EvalRequest::kParallel, fmt::format(" {}: give 1 to {} slots", q.parallel, kMaxParallel)});
    if (q.server_timeout_s < 1 || q.server_timeout_s > 86400)
        throw RequestError(
            {EvalRequest::kServerTimeout, fmt::format(" {}: give 1 to 86400 seconds", q.server_timeout_s)});
    check_input_names(EvalRequest::kPrompts, q.panels, "panel");
}

void check_generations(const EvalRequest& q, const Panel& p) {
    const uint64_t samples = q.samples.value_or(1), prompts = p.prompts.size();
    if (prompts * samples > kMaxGenerations)
        throw RequestError({EvalRequest::kSamples,
                            fmt::format(" {}: panel {} has {} prompts, so {} generations per "
                                        "temperature, more than the {} eval runs at most",
                                        samples, p.facts.name, prompts, prompts * samples, kMaxGenerations)});
}

std::string find_llama_server(const EvalRequest& q) {
    return llama_cpp::find_llama_tool(LlamaTool::server, llama_bin(q), {EvalRequest::kPrompts, " runs it"});
}

void run_behaviour(Ctx& c, const std::string& server_bin, const EvalModel& src,
                   const std::vector<EvalModel>& outs, const std::vector<Panel>& panels, EvalResult& r,
                   const std::function<void(const std::string&)>& write_line) {
    const uint64_t slot = slot_ctx(c.q, panels);
    std::vector<std::pair<std::string, const EvalModel*>> models{{"source", &src}};
    for (const EvalModel& o : outs) models.emplace_back(o.path, &o);
    for (size_t mi = 0; mi < models.size(); ++mi) {
        const auto& [name, m] = models[mi];
        llama_cpp::ServerOptions so;
        so.binary = server_bin;
        so.model = m->path;
        so.parallel = c.q.parallel;
        so.ctx = slot * c.q.parallel;
        so.threads = c.q.threads;
        so.jinja =
            std::any_of(panels.begin(), panels.end(), [](const Panel& p) { return p.facts.chat_lines > 0; });
        so.extra = c.q.llama_args;
        so.log_path = fmt::format("{}/{}.{}.log", c.cache_dir, llama_tool_name(LlamaTool::server), mi);
        so.timeout_s = c.q.server_timeout_s;
        llama_cpp::LlamaServer server(so, c.ev);  // loaded once for every panel
        const std::string shown = mi == 0 ? "source" : base_name(m->path);
        for (const Panel& p : panels) {
            const std::vector<std::string> prompts = rendered_prompts(c, server, p, slot);
            for (const double t : c.q.temperature_list()) {
                const PanelRun run = run_panel(c, server, shown, p, prompts, t, m->n_vocab);
                r.behaviour.push_back(figures(name, p, run, c.q, server.command()));
                warn_errors(c, shown, r.behaviour.back());
                if (write_line) write_generations(name, p, run, c.q, write_line);
            }
        }
        server.stop();
    }
    add_changes(r, panels);
}

}  // namespace gguf_reap::eval_detail

namespace gguf_reap {

const char* chat_outcome_name(EvalChatOutcome o) {
    switch (o) {
        case EvalChatOutcome::plain:
            return nullptr;
        case EvalChatOutcome::text:
            return "text";
        case EvalChatOutcome::tool_call:
            return "tool_call";
        case EvalChatOutcome::bad_tool_call:
            return "bad_tool_call";
        case EvalChatOutcome::template_error:
            return "template_error";
        case EvalChatOutcome::error:
            return "error";
    }
    return nullptr;
}

std::vector<double> EvalRequest::temperature_list() const {
    std::vector<double> t = temperatures.empty() ? std::vector<double>{0} : temperatures;
    std::sort(t.begin(), t.end());
    return t;
}

}  // namespace gguf_reap
