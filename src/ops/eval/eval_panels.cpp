// eval's panels (ops/eval/eval_behaviour.h): a prompt file read and checked, a line at a time, plain or
// JSONL with prompts or chat messages and tools; and the excerpt that names a prompt in the card.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gguf_reap/error.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "ops/eval/eval_behaviour.h"

namespace gguf_reap::eval_detail {

namespace {

using json = nlohmann::json;

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

// A chat line's messages and tools, checked (read_panel); every other key of the line is left out.
json chat_line(const json& j, const std::string& path, uint64_t offset, const std::string& field) {
    const json& m = j["messages"];
    if (!m.is_array() || m.empty())
        throw InputError(path, offset, field + ".messages", "not a non-empty array of messages");
    for (size_t i = 0; i < m.size(); ++i)
        if (!m[i].is_object() || !m[i].contains("role") || !m[i]["role"].is_string())
            throw InputError(path, offset, fmt::format("{}.messages[{}].role", field, i),
                             "missing or not a string (a message is {\"role\": ..., \"content\": ...})");
    json c = {{"messages", m}};
    if (!j.contains("tools")) return c;
    const json& t = j["tools"];
    if (!t.is_array()) throw InputError(path, offset, field + ".tools", "not an array of tools");
    for (size_t i = 0; i < t.size(); ++i) {
        const std::string at = fmt::format("{}.tools[{}]", field, i);
        if (!t[i].is_object() || !t[i].contains("function") || !t[i]["function"].is_object())
            throw InputError(path, offset, at + ".function",
                             "missing or not an object (a tool is {\"type\": \"function\", \"function\": "
                             "{\"name\": ..., \"parameters\": {...}}})");
        const json& f = t[i]["function"];
        if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
            throw InputError(path, offset, at + ".function.name", "missing, empty or not a string");
        if (f.contains("parameters") && !f["parameters"].is_object() && !f["parameters"].is_boolean())
            throw InputError(path, offset, at + ".function.parameters", "not a JSON schema (an object)");
    }
    c["tools"] = t;
    return c;
}

// The text a chat line is shown by: its last user message's content (the text parts of one given as
// parts), else its last message's.
std::string last_user_text(const json& messages) {
    const json* pick = &messages.back();
    for (const json& m : messages)
        if (m["role"] == "user") pick = &m;
    const json content = pick->value("content", json());
    if (content.is_string()) return content.get<std::string>();
    std::string text;
    if (content.is_array())
        for (const json& part : content)
            if (part.is_object() && part.value("text", json()).is_string())
                text += (text.empty() ? "" : " ") + part["text"].get<std::string>();
    return text;
}

}  // namespace

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
            // A line nested deeper than kMaxLineDepth is refused; its deeper values are dropped as they
            // are parsed, so a hostile line of a million '[' builds nothing deep.
            // Raw bytes that are no UTF-8 are named at the bad byte, as in a plain panel; an escape that is
            // no character ("\ud800") makes the line invalid JSON, refused below at the line's start.
            if (const size_t bad = bad_utf8_at(line); bad != std::string_view::npos)
                throw InputError(p.path, offset + bad, field,
                                 "not valid UTF-8 (a .jsonl line is JSON, UTF-8)");
            bool too_deep = false;
            json j = json::parse(
                line.begin(), line.end(),
                [&](int depth, json::parse_event_t, json&) {
                    if (depth > kMaxLineDepth) too_deep = true;
                    return depth <= kMaxLineDepth;
                },
                false);
            if (j.is_discarded() || !j.is_object())
                throw InputError(p.path, offset, field,
                                 "not a JSON object (a .jsonl panel has one per line)");
            if (too_deep)
                throw InputError(p.path, offset, field,
                                 fmt::format("nested deeper than {} levels", kMaxLineDepth));
            if (j.contains("messages")) {
                if (j.contains("prompt"))
                    throw InputError(p.path, offset, field,
                                     "holds both \"prompt\" and \"messages\"; give one (a chat line "
                                     "has \"messages\")");
                json c = chat_line(j, p.path, offset, field);
                prompt = last_user_text(c["messages"]);
                const uint64_t bytes = c.dump().size();
                if (bytes > kMaxChatLineBytes)
                    throw InputError(p.path, offset, field,
                                     fmt::format("a chat line of {} bytes (its messages and tools); at most "
                                                 "{} are accepted",
                                                 bytes, kMaxChatLineBytes));
                ++panel.facts.chat_lines;
                if (c.contains("tools")) ++panel.facts.tool_lines;
                if (panel.prompts.size() == kMaxPanelPrompts)
                    throw InputError(p.path, offset, field,
                                     fmt::format("more than {} prompts; split the panel", kMaxPanelPrompts));
                panel.facts.max_prompt_bytes = std::max<uint64_t>(panel.facts.max_prompt_bytes, bytes);
                panel.prompts.push_back(std::move(prompt));
                panel.chat.emplace_back(std::move(c));
                continue;
            }
            if (j.contains("tools"))
                throw InputError(p.path, offset, field + ".tools",
                                 "given without \"messages\": tools are offered in a chat line");
            if (!j.contains("prompt") || !j["prompt"].is_string())
                throw InputError(p.path, offset, field + ".prompt",
                                 "missing or not a string (a chat line holds \"messages\" instead)");
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
        panel.chat.emplace_back();
    }
    if (panel.prompts.empty())
        throw InputError(
            p.path, std::nullopt, "prompts",
            Message{EvalRequest::kPrompts,
                    fmt::format(" {}: the panel has no prompt (blank lines are skipped)", p.name)});
    panel.facts.prompts = static_cast<int64_t>(panel.prompts.size());
    return panel;
}

std::string excerpt(std::string_view text) {
    std::string out;
    size_t chars = 0, i = 0;
    bool space = false;
    while (i < text.size() && chars < kExcerptChars) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            space = !out.empty();
            ++i;
            continue;
        }
        if (space) {
            if (chars + 1 == kExcerptChars) break;  // no space at the end
            out += ' ';
            space = false;
            ++chars;
        }
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
        out.append(text.substr(i, n));
        i += n;
        ++chars;
    }
    while (i < text.size() && std::string_view(" \t\n\r").find(text[i]) != std::string_view::npos) ++i;
    return i < text.size() ? out + "…" : out;
}

}  // namespace gguf_reap::eval_detail
