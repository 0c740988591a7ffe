// eval's behaviour runs (ops/eval/eval_behaviour.h, docs/eval.md "Behaviour").
#include "ops/eval/eval_behaviour.h"

#include <algorithm>
#include <chrono>
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

namespace gguf_reap::eval_detail {

namespace {

using json = nlohmann::json;
using namespace llama_cpp;

bool blank(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

// Valid UTF-8 (the request is JSON): the offset of the first bad byte, or npos.
size_t bad_utf8_at(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || i + n > s.size()) return i;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return i;
        // Overlong forms, surrogates and code points past U+10FFFF are refused as JSON parsers do.
        const uint32_t cp = n == 1   ? c
                            : n == 2 ? ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3F)
                            : n == 3 ? ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
                                     : ((c & 0x07u) << 18) | ((s[i + 1] & 0x3F) << 12) |
                                           ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        const uint32_t min = n == 1 ? 0 : n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += n;
    }
    return std::string_view::npos;
}

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
    const uint64_t need = longest + (q.chat ? kChatAllowance : 0) + q.gen_tokens + 8;
    return (need + 255) / 256 * 256;
}

struct PanelRun {
    std::vector<Generation> gens;
    std::vector<std::string> errors;  // per prompt: why the server gave no generation ("" when it did)
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

PanelRun run_panel(Ctx& c, LlamaServer& server, const std::string& model_name, const Panel& p,
                   uint64_t n_vocab, uint64_t slot) {
    const EvalRequest& q = c.q;
    std::vector<std::string> prompts = p.prompts;
    const auto reply_error = [&](std::string_view endpoint, size_t i, const HttpReply& h) {
        server.check_running(h.connected() ? 0 : 1000);
        if (!h.connected())
            server.fail(
                fmt::format("POST {} for prompt {} of {}: {}", endpoint, i + 1, p.facts.name, h.error));
        server.fail(fmt::format("POST {} for prompt {} of {}: HTTP {}: {}", endpoint, i + 1, p.facts.name,
                                h.status, snippet(h.body)));
    };
    if (q.chat) {
        // The server applies the model's own chat template (its /apply-template endpoint, which
        // /v1/chat/completions uses too) to one user message; the result is generated raw below.
        std::vector<std::string> bodies;
        for (const std::string& s : p.prompts) bodies.push_back(template_body(s));
        post_all(server, kApplyTemplatePath, bodies, q.parallel, [&](size_t i, HttpReply&& h) {
            if (!h.connected() || h.status != 200) reply_error(kApplyTemplatePath, i, h);
            std::optional<std::string> templated = parse_template_reply(h.body);
            if (!templated)
                server.fail(
                    fmt::format("POST {} for prompt {} of {}: not a JSON object with a \"prompt\" string: {}",
                                kApplyTemplatePath, i + 1, p.facts.name, snippet(h.body)));
            prompts[i] = std::move(*templated);
            if (prompts[i].size() + q.gen_tokens + 8 > slot)
                server.fail(fmt::format(
                    "the chat template makes prompt {} of {} {} bytes, more than the {} "
                    "its slot has room for with {} generated tokens",
                    i + 1, p.facts.name, prompts[i].size(), slot - q.gen_tokens - 8, q.gen_tokens));
        });
    }
    std::vector<std::string> bodies;
    bodies.reserve(prompts.size());
    for (const std::string& s : prompts) bodies.push_back(completion_body(s, q.gen_tokens));
    PanelRun run;
    run.gens.resize(prompts.size());
    run.errors.resize(prompts.size());
    std::optional<ProgressScope> scope;
    if (c.ev.on_progress)
        scope.emplace(c.ev, fmt::format("generating: {} on {}", model_name, p.facts.name),
                      static_cast<uint64_t>(prompts.size()));
    const auto t0 = std::chrono::steady_clock::now();
    post_all(server, kCompletionPath, bodies, q.parallel, [&](size_t i, HttpReply&& h) {
        run.errors[i] = prompt_error(h, q.server_timeout_s);
        if (run.errors[i].empty()) {
            if (!h.connected() || h.status != 200) reply_error(kCompletionPath, i, h);
            const std::string wrong = parse_completion(h.body, q.gen_tokens, n_vocab, run.gens[i]);
            if (!wrong.empty())
                server.fail(fmt::format("POST {} for prompt {} of {}: {}; the reply: {}", kCompletionPath,
                                        i + 1, p.facts.name, wrong, snippet(h.body)));
            if (run.gens[i].tokens.empty()) run.errors[i] = "an empty answer: no token generated";
        }
        if (c.ev.on_progress) c.ev.on_progress(1);
    });
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return run;
}

EvalBehaviour figures(const std::string& model, const Panel& p, const PanelRun& run, uint64_t gen_tokens,
                      const std::vector<std::string>& command) {
    EvalBehaviour b;
    b.model = model;
    b.panel = p.facts.name;
    b.prompts = static_cast<int64_t>(run.gens.size());
    b.gen_tokens = gen_tokens;
    b.server_command = command;
    b.seconds = run.seconds;
    int64_t loops = 0, ends = 0, errors = 0;
    Distinct4 d4;
    for (size_t i = 0; i < run.gens.size(); ++i) {
        const Generation& g = run.gens[i];
        // A prompt with an error counts in n and in no other outcome: its tokens are not looked at.
        if (!run.errors[i].empty()) {
            ++errors;
            b.outcomes.push_back(EvalOutcome::error);
            b.prompt_errors.push_back({static_cast<int64_t>(i), run.errors[i]});
            continue;
        }
        const bool loop = generation_loops(g.tokens, g.eog);
        if (g.eog) ++ends;
        if (loop) ++loops;
        b.outcomes.push_back(g.eog  ? EvalOutcome::natural_end
                             : loop ? EvalOutcome::loop
                                    : EvalOutcome::limit);
        d4.add(g.tokens);
        b.tokens += static_cast<int64_t>(g.tokens.size());
    }
    b.loops = wilson_rate(loops, b.prompts);
    b.natural_ends = wilson_rate(ends, b.prompts);
    b.errors = wilson_rate(errors, b.prompts);
    b.mean_tokens = static_cast<double>(b.tokens) / static_cast<double>(b.prompts);
    b.distinct_4 = d4.value();
    b.four_grams = d4.total();
    b.distinct_four_grams = d4.distinct();
    return b;
}

}  // namespace

void check_behaviour_request(const EvalRequest& q) {
    if (q.panels.empty()) {
        if (q.chat)
            throw RequestError({RequestField::kChat, " needs ", RequestField::kPrompts,
                                " NAME=FILE: it changes how prompts are sent"});
        return;
    }
    if (q.gen_tokens < 1 || q.gen_tokens > kMaxGenTokens)
        throw RequestError(
            {RequestField::kGenTokens, fmt::format(" {}: give 1 to {} tokens", q.gen_tokens, kMaxGenTokens)});
    if (q.parallel < 1 || q.parallel > kMaxParallel)
        throw RequestError(
            {RequestField::kParallel, fmt::format(" {}: give 1 to {} slots", q.parallel, kMaxParallel)});
    if (q.server_timeout_s < 1 || q.server_timeout_s > 86400)
        throw RequestError(
            {RequestField::kServerTimeout, fmt::format(" {}: give 1 to 86400 seconds", q.server_timeout_s)});
    check_input_names(RequestField::kPrompts, q.panels, "panel");
}

Panel read_panel(const EvalPanel& p) {
    const std::string text = read_small_file(p.path, kMaxPanelBytes, "prompt panel");
    Panel panel;
    panel.facts.name = p.name;
    panel.facts.path = p.path;
    panel.facts.bytes = text.size();
    panel.facts.sha256 = sha256_hex(text.data(), text.size());
    const bool jsonl = p.path.size() >= 6 && p.path.compare(p.path.size() - 6, 6, ".jsonl") == 0;
    panel.facts.format = jsonl ? "jsonl" : "lines";
    size_t at = 0, line_no = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        ++line_no;
        std::string_view line(text.data() + at, end - at);
        const uint64_t offset = at;
        at = end + 1;
        if (blank(line)) continue;
        const std::string field = fmt::format("line {}", line_no);
        std::string prompt;
        if (jsonl) {
            // Values nested deeper than the prompt's object are dropped as they are parsed, so a hostile
            // line of a million '[' builds nothing deep.
            const json j = json::parse(
                line.begin(), line.end(), [](int depth, json::parse_event_t, json&) { return depth <= 2; },
                false);
            if (j.is_discarded() || !j.is_object())
                throw InputError(p.path, offset, field,
                                 "not a JSON object (a .jsonl panel has one per line)");
            if (!j.contains("prompt") || !j["prompt"].is_string())
                throw InputError(p.path, offset, field + ".prompt", "missing or not a string");
            prompt = j["prompt"].get<std::string>();
            if (prompt.empty()) throw InputError(p.path, offset, field + ".prompt", "an empty prompt");
        } else {
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            prompt = std::string(line);
            if (const size_t bad = bad_utf8_at(prompt); bad != std::string_view::npos)
                throw InputError(p.path, offset + bad, field, "not valid UTF-8");
        }
        if (prompt.size() > kMaxPromptBytes)
            throw InputError(
                p.path, offset, field,
                fmt::format("a prompt of {} bytes; at most {} are accepted", prompt.size(), kMaxPromptBytes));
        if (panel.prompts.size() == kMaxPanelPrompts)
            throw InputError(p.path, offset, field,
                             fmt::format("more than {} prompts; split the panel", kMaxPanelPrompts));
        panel.facts.max_prompt_bytes = std::max<uint64_t>(panel.facts.max_prompt_bytes, prompt.size());
        panel.prompts.push_back(std::move(prompt));
    }
    if (panel.prompts.empty())
        throw InputError(
            p.path, std::nullopt, "prompts",
            Message{RequestField::kPrompts,
                    fmt::format(" {}: the panel has no prompt (blank lines are skipped)", p.name)});
    panel.facts.prompts = static_cast<int64_t>(panel.prompts.size());
    return panel;
}

std::string find_llama_server(const EvalRequest& q) {
    return llama_cpp::find_llama_tool(LlamaTool::server, llama_bin(q), {RequestField::kPrompts, " runs it"});
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
        so.extra = c.q.llama_args;
        so.log_path = fmt::format("{}/{}.{}.log", c.cache_dir, llama_tool_name(LlamaTool::server), mi);
        so.timeout_s = c.q.server_timeout_s;
        llama_cpp::LlamaServer server(so, c.ev);  // loaded once for every panel
        for (const Panel& p : panels) {
            const PanelRun run =
                run_panel(c, server, mi == 0 ? "source" : base_name(m->path), p, m->n_vocab, slot);
            r.behaviour.push_back(figures(name, p, run, c.q.gen_tokens, server.command()));
            if (const EvalBehaviour& b = r.behaviour.back(); !b.prompt_errors.empty())
                c.ev.warn(fmt::format(
                    "{} on {}: {} of {} prompts got no generation (prompt {}: {}); each is recorded as an "
                    "error",
                    mi == 0 ? "source" : base_name(m->path), p.facts.name, b.prompt_errors.size(), b.prompts,
                    b.prompt_errors.front().index + 1, b.prompt_errors.front().error));
            if (!write_line) continue;
            for (size_t i = 0; i < run.gens.size(); ++i) {
                const Generation& g = run.gens[i];
                const bool error = !run.errors[i].empty();
                nlohmann::ordered_json l = {{"model", path_for_upload(name, c.q.json_out)},
                                            {"panel", p.facts.name},
                                            {"index", i},
                                            {"tokens", error ? std::vector<int32_t>{} : g.tokens},
                                            {"end", error   ? "error"
                                                    : g.eog ? "eog"
                                                            : "limit"},
                                            {"text", error ? std::string() : g.text}};
                if (error) l["error"] = run.errors[i];
                // The server's text may end inside a character split across tokens: kept, not refused.
                write_line(l.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
            }
        }
        server.stop();
    }
}

}  // namespace gguf_reap::eval_detail
