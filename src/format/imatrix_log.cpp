#include "format/imatrix_log.h"

#include <charconv>

namespace gguf_reap {

namespace {

template <typename T>
std::optional<T> whole(std::string_view w) {
    T v{};
    const auto r = std::from_chars(w.data(), w.data() + w.size(), v);
    if (w.empty() || r.ec != std::errc() || r.ptr != w.data() + w.size()) return std::nullopt;
    return v;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

template <typename F>
void each_line(std::string_view text, F f) {
    for (size_t at = 0; at < text.size();) {
        size_t end = text.find('\n', at);
        if (end == std::string_view::npos) end = text.size();
        f(text.substr(at, end - at));
        at = end + 1;
    }
}

// The integer that follows `key` in `line` up to the next non-digit.
std::optional<int64_t> after(std::string_view line, std::string_view key) {
    const size_t at = line.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view rest = line.substr(at + key.size());
    size_t n = 0;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
    return whole<int64_t>(rest.substr(0, n));
}

}  // namespace

int64_t imatrix_chunks_done(std::string_view text) {
    int64_t done = 0;
    for (size_t at = text.find('['); at != std::string_view::npos; at = text.find('[', at + 1)) {
        const size_t close = text.find(']', at);
        if (close == std::string_view::npos) break;
        // "[n]" followed by a number and a comma: a chunk's running perplexity.
        const auto n = whole<int64_t>(text.substr(at + 1, close - at - 1));
        const size_t comma = text.find(',', close);
        if (n && comma != std::string_view::npos && comma > close + 1 &&
            whole<double>(text.substr(close + 1, comma - close - 1)) && *n > done)
            done = *n;
    }
    return done;
}

ImatrixLog parse_imatrix_log(std::string_view text) {
    ImatrixLog log;
    each_line(text, [&](std::string_view line) {
        if (line.find("compute_imatrix: computing over ") != std::string_view::npos) {
            const auto chunks = after(line, "computing over ");
            const auto ctx = after(line, "n_ctx=");
            const auto batch = after(line, "batch_size=");
            const auto seq = after(line, "n_seq=");
            if (chunks && ctx && batch && seq) log.shape = PerplexityRunShape{*chunks, *ctx, *batch, *seq};
        }
        if (const auto need = after(line, "you need at least ")) log.too_few_tokens = TooFewTokens{*need, 0};
        if (const auto have = after(line, "tokenizes to only "); have && log.too_few_tokens)
            log.too_few_tokens->have = *have;
        constexpr std::string_view kFinal = "Final estimate: PPL = ";
        if (const size_t at = line.find(kFinal); at != std::string_view::npos) {
            const std::string_view rest = line.substr(at + kFinal.size());
            const size_t pm = rest.find(" +/- ");
            if (pm != std::string_view::npos) {
                const auto v = whole<double>(trim(rest.substr(0, pm)));
                const auto e = whole<double>(trim(rest.substr(pm + 5)));
                if (v && e) log.ppl = ValueErr{*v, *e};
            }
        }
    });
    log.chunks_done = imatrix_chunks_done(text);
    return log;
}

std::optional<std::vector<int32_t>> parse_token_ids(std::string_view text) {
    std::optional<std::vector<int32_t>> found;
    each_line(text, [&](std::string_view raw) {
        const std::string_view line = trim(raw);
        if (found || line.size() < 2 || line.front() != '[' || line.back() != ']') return;
        std::vector<int32_t> ids;
        std::string_view body = line.substr(1, line.size() - 2);
        while (!trim(body).empty()) {
            const size_t comma = body.find(',');
            const auto id = whole<int32_t>(trim(body.substr(0, comma)));
            if (!id) return;
            ids.push_back(*id);
            if (comma == std::string_view::npos) break;
            body = body.substr(comma + 1);
        }
        found = std::move(ids);
    });
    return found;
}

}  // namespace gguf_reap
