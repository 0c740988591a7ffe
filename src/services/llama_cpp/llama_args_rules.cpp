// --llama-args: split, checked against the table of llama.cpp's tools (services/llama_cpp/llama_tools.h) and
// shared out between them by their --help (gguf_reap/llama_args.h).
#include "gguf_reap/llama_args.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "services/llama_cpp/llama_tools.h"

namespace gguf_reap {

namespace {

// A user's arguments are a line: a few dozen words. The caps keep a runaway variable from becoming argv.
constexpr size_t kMaxBytes = 64 * 1024;
constexpr size_t kMaxWords = 4096;

// Per tool, the options llama.cpp's --help lists for it that not every tool takes.
const std::map<LlamaTool, std::set<std::string, std::less<>>>& specific_options() {
    static const auto table = [] {
        const std::vector<std::pair<LlamaTool, std::string_view>> lists{
#include "services/llama_cpp/llama_args_table.inc"
        };
        std::map<LlamaTool, std::set<std::string, std::less<>>> m;
        for (const auto& [tool, list] : lists) {
            auto& s = m[tool];
            for (size_t at = 0; at < list.size();) {
                size_t end = list.find(' ', at);
                if (end == std::string_view::npos) end = list.size();
                if (end > at) s.emplace(list.substr(at, end - at));
                at = end + 1;
            }
        }
        return m;
    }();
    return table;
}

bool is_option(const std::string& w) {
    if (w.size() < 2 || w[0] != '-') return false;
    const char c = w[1];
    return !((c >= '0' && c <= '9') || c == '.');
}

// "--ctx-size=4096" is not an option llama.cpp parses, but it names -c all the same.
std::string_view option_name(const std::string& option) {
    const std::string_view s(option);
    return s.substr(0, s.find('='));
}

}  // namespace

LlamaArgs LlamaArgs::parse(std::string_view text, std::string origin) {
    LlamaArgs a;
    a.origin = std::move(origin);
    if (text.size() > kMaxBytes)
        throw UsageError(fmt::format("{}: {} bytes; give at most {} bytes of llama.cpp arguments", a.origin,
                                     text.size(), kMaxBytes));
    std::string word;
    bool in_word = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == ' ' || c == '\t' || c == '\n') {
            if (in_word) a.words.push_back(std::move(word));
            word.clear();
            in_word = false;
            continue;
        }
        in_word = true;
        if (c == '\'') {
            const size_t close = text.find('\'', i + 1);
            if (close == std::string_view::npos)
                throw UsageError(fmt::format("{}: the ' at character {} is never closed", a.origin, i + 1));
            word.append(text.substr(i + 1, close - i - 1));
            i = close;
        } else if (c == '"') {
            size_t j = i + 1;
            for (; j < text.size() && text[j] != '"'; ++j) {
                if (text[j] == '\\' && j + 1 < text.size() &&
                    std::string_view("\\\"$`\n").find(text[j + 1]) != std::string_view::npos) {
                    if (text[j + 1] != '\n') word.push_back(text[j + 1]);
                    ++j;
                } else {
                    word.push_back(text[j]);
                }
            }
            if (j == text.size())
                throw UsageError(fmt::format("{}: the \" at character {} is never closed", a.origin, i + 1));
            i = j;
        } else if (c == '\\') {
            if (i + 1 == text.size())
                throw UsageError(fmt::format("{}: it ends in a backslash that escapes nothing", a.origin));
            if (text[i + 1] != '\n') word.push_back(text[i + 1]);
            ++i;
        } else {
            word.push_back(c);
        }
        if (a.words.size() >= kMaxWords)
            throw UsageError(fmt::format("{}: give at most {} words", a.origin, kMaxWords));
    }
    if (in_word) a.words.push_back(std::move(word));
    return a;
}

std::vector<LlamaArg> LlamaArgs::grouped() const {
    std::vector<LlamaArg> out;
    for (const std::string& w : words) {
        if (is_option(w) || out.empty())
            out.push_back({is_option(w) ? w : std::string(),
                           is_option(w) ? std::vector<std::string>{} : std::vector<std::string>{w}});
        else
            out.back().values.push_back(w);
    }
    return out;
}

void LlamaArgs::check(LlamaTool tool) const {
    if (tool == LlamaTool::tokenize) return;  // it gets none of them
    for (const LlamaArg& a : grouped()) {
        const std::string_view name = option_name(a.option);
        const llama_cpp::Refusal* r = llama_cpp::refusal(tool, name);
        if (!r) continue;
        if (r->own_sentence) throw RequestError(Message{fmt::format("{} {}: ", origin, name)} + r->instead);
        throw RequestError(Message{fmt::format("{}: {} collides with an argument gguf-reap sets for {}: ",
                                               origin, name, llama_tool_name(tool))} +
                           r->instead);
    }
}

std::vector<std::string> LlamaArgs::for_tool(LlamaTool tool) const {
    std::vector<std::string> out;
    if (tool == LlamaTool::tokenize) return out;
    const auto& specific = specific_options();
    for (const LlamaArg& a : grouped()) {
        const std::string_view name = option_name(a.option);
        bool listed = false, mine = false;
        for (const auto& [t, names] : specific)
            if (names.find(name) != names.end()) {
                listed = true;
                mine = mine || t == tool;
            }
        if (listed && !mine) continue;
        if (!a.option.empty()) out.push_back(a.option);
        out.insert(out.end(), a.values.begin(), a.values.end());
    }
    return out;
}

std::string shell_join(const std::vector<std::string>& words) {
    std::string s;
    for (const std::string& w : words) {
        if (!s.empty()) s += ' ';
        const bool plain = !w.empty() && w.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos;
        if (plain) {
            s += w;
            continue;
        }
        s += '\'';
        for (char c : w) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
        s += '\'';
    }
    return s;
}

}  // namespace gguf_reap
