#include "format/perplexity_log.h"

#include <charconv>
#include <cmath>

namespace gguf_reap {

namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(at, end - at);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        lines.push_back(line);
        at = end + 1;
    }
    return lines;
}

std::vector<std::string_view> split_words(std::string_view line) {
    std::vector<std::string_view> words;
    size_t at = 0;
    while (at < line.size()) {
        while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
        size_t end = at;
        while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
        if (end > at) words.push_back(line.substr(at, end - at));
        at = end;
    }
    return words;
}

// A whole word as a number (llama.cpp prints with "%lf" in the C locale; "nan" and "inf" included).
std::optional<double> number(std::string_view w) {
    double v = 0;
    const auto r = std::from_chars(w.data(), w.data() + w.size(), v);
    if (r.ec != std::errc() || r.ptr != w.data() + w.size()) return std::nullopt;
    return v;
}

std::optional<int64_t> integer(std::string_view w) {
    int64_t v = 0;
    const auto r = std::from_chars(w.data(), w.data() + w.size(), v);
    if (r.ec != std::errc() || r.ptr != w.data() + w.size()) return std::nullopt;
    return v;
}

// "± " is U+00B1 in UTF-8.
constexpr std::string_view kPlusMinus = "\xc2\xb1";

// words[i] "±" words[i+2], advancing i past them.
std::optional<ValueErr> value_err(const std::vector<std::string_view>& words, size_t& i) {
    if (i + 2 >= words.size() || words[i + 1] != kPlusMinus) return std::nullopt;
    const auto v = number(words[i]);
    const auto e = number(words[i + 2]);
    if (!v || !e) return std::nullopt;
    i += 3;
    return ValueErr{*v, *e};
}

// A chunk row: N, then 5 "v ± e", the last two each followed by "%".
std::optional<KldChunkRow> chunk_row(std::string_view line) {
    const auto w = split_words(line);
    if (w.size() != 18) return std::nullopt;
    KldChunkRow r;
    const auto n = integer(w[0]);
    if (!n || *n < 1) return std::nullopt;
    r.chunk = *n;
    size_t i = 1;
    const auto ppl = value_err(w, i);
    const auto ln = value_err(w, i);
    const auto kld = value_err(w, i);
    const auto dp = value_err(w, i);
    if (!ppl || !ln || !kld || !dp || w[i] != "%") return std::nullopt;
    ++i;
    const auto top = value_err(w, i);
    if (!top || i != 17 || w[i] != "%") return std::nullopt;
    r.ppl = *ppl;
    r.ln_ratio = *ln;
    r.kld = *kld;
    r.rms_dp = *dp;
    r.same_top = *top;
    return r;
}

// The text after "<key>" and optional spaces and ":", when the line (prefix and all) contains key.
std::optional<std::string_view> after_key(std::string_view line, std::string_view key) {
    const size_t at = line.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view rest = line.substr(at + key.size());
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.empty() || rest.front() != ':') return std::nullopt;
    return rest.substr(1);
}

std::optional<ValueErr> summary_value_err(std::string_view rest) {
    auto w = split_words(rest);
    if (!w.empty() && w.back() == "%") w.pop_back();
    size_t i = 0;
    auto v = value_err(w, i);
    if (!v || i != w.size()) return std::nullopt;
    return v;
}

std::optional<double> summary_value(std::string_view rest) {
    const auto w = split_words(rest);
    if (w.size() != 1) return std::nullopt;
    return number(w[0]);
}

// "computing over N chunks, n_ctx=C, batch_size=B, n_seq=S" (both runs).
std::optional<PerplexityRunShape> run_shape(std::string_view line) {
    for (std::string_view lead :
         {"kl_divergence: computing over ", "perplexity: calculating perplexity over "}) {
        const size_t at = line.find(lead);
        if (at == std::string_view::npos) continue;
        std::string_view rest = line.substr(at + lead.size());
        PerplexityRunShape s;
        int64_t* fields[] = {&s.chunks, &s.n_ctx, &s.batch, &s.n_seq};
        std::string_view keys[] = {"", " chunks, n_ctx=", ", batch_size=", ", n_seq="};
        for (int k = 0; k < 4; ++k) {
            if (rest.substr(0, keys[k].size()) != keys[k]) return std::nullopt;
            rest.remove_prefix(keys[k].size());
            const auto r = std::from_chars(rest.data(), rest.data() + rest.size(), *fields[k]);
            if (r.ec != std::errc()) return std::nullopt;
            rest.remove_prefix(static_cast<size_t>(r.ptr - rest.data()));
        }
        return s;
    }
    return std::nullopt;
}

// "you need at least N tokens ..." and "... tokenizes to only M tokens".
void too_few(std::string_view line, std::optional<TooFewTokens>& t) {
    constexpr std::string_view need = "you need at least ";
    constexpr std::string_view only = "the data file you provided tokenizes to only ";
    for (auto [key, is_need] : {std::pair{need, true}, std::pair{only, false}}) {
        const size_t at = line.find(key);
        if (at == std::string_view::npos) continue;
        std::string_view rest = line.substr(at + key.size());
        int64_t v = 0;
        if (std::from_chars(rest.data(), rest.data() + rest.size(), v).ec != std::errc()) continue;
        if (!t) t = TooFewTokens{};
        (is_need ? t->needed : t->have) = v;
    }
}

struct Summary {
    std::optional<ValueErr> ppl_q, ppl_base, ln_ratio, kld, rms_dp, same_top;
    std::optional<double> median, p99, p999, max;
};

void summary_line(std::string_view line, Summary& s) {
    struct Pair {
        std::string_view key;
        std::optional<ValueErr>* out;
    };
    const Pair pairs[] = {{"Mean PPL(Q)", &s.ppl_q},
                          {"Mean PPL(base)", &s.ppl_base},
                          {"Mean ln(PPL(Q)/PPL(base))", &s.ln_ratio},
                          {"Mean    KLD", &s.kld},
                          {"RMS \xce\x94p", &s.rms_dp},  // "RMS Δp"
                          {"Same top p", &s.same_top}};
    for (const auto& p : pairs)
        if (auto rest = after_key(line, p.key))
            if (auto v = summary_value_err(*rest)) *p.out = v;
    struct One {
        std::string_view key;
        std::optional<double>* out;
    };
    const One ones[] = {{"Maximum KLD", &s.max},
                        {"99.9%   KLD", &s.p999},
                        {"99.0%   KLD", &s.p99},
                        {"Median  KLD", &s.median}};
    for (const auto& o : ones)
        if (auto rest = after_key(line, o.key))
            if (auto v = summary_value(*rest)) *o.out = v;
}

}  // namespace

KldLog parse_kld_log(std::string_view text) {
    KldLog log;
    Summary s;
    for (std::string_view line : split_lines(text)) {
        if (auto shape = run_shape(line)) log.shape = shape;
        if (auto row = chunk_row(line)) log.rows.push_back(*row);
        summary_line(line, s);
        too_few(line, log.too_few_tokens);
    }
    log.summary_complete = s.ppl_q && s.ppl_base && s.ln_ratio && s.kld && s.median && s.p99 && s.p999 &&
                           s.max && s.rms_dp && s.same_top;
    KldFigures f;
    if (log.summary_complete) {
        f.from = "summary";
        f.chunks = log.rows.empty() ? (log.shape ? log.shape->chunks : 0) : log.rows.back().chunk;
        f.ppl_output = *s.ppl_q;
        f.ppl_source = s.ppl_base;
        f.ln_ppl_ratio = *s.ln_ratio;
        f.kld = *s.kld;
        f.rms_dp = *s.rms_dp;
        f.same_top = *s.same_top;
    } else if (!log.rows.empty()) {
        // The running means of the last row are the summary's means at 5 (PPL 4) decimals instead of
        // 6; the percentiles are only in the summary, so the ones that arrived are kept.
        const KldChunkRow& r = log.rows.back();
        f.from = "last chunk row";
        f.chunks = r.chunk;
        f.ppl_output = r.ppl;
        f.ln_ppl_ratio = r.ln_ratio;
        f.kld = r.kld;
        f.rms_dp = r.rms_dp;
        f.same_top = r.same_top;
    } else {
        return log;
    }
    f.kld_median = s.median;
    f.kld_p99 = s.p99;
    f.kld_p999 = s.p999;
    f.kld_max = s.max;
    log.figures = f;
    return log;
}

BaseLog parse_base_log(std::string_view text) {
    BaseLog log;
    constexpr std::string_view key = "Final estimate: PPL = ";
    for (std::string_view line : split_lines(text)) {
        if (auto shape = run_shape(line)) log.shape = shape;
        too_few(line, log.too_few_tokens);
        const size_t at = line.find(key);
        if (at == std::string_view::npos) continue;
        const auto w = split_words(line.substr(at + key.size()));
        if (w.size() != 3 || w[1] != "+/-") continue;
        const auto v = number(w[0]);
        const auto e = number(w[2]);
        if (v && e) log.ppl = ValueErr{*v, *e};
    }
    return log;
}

std::optional<int64_t> parse_token_count(std::string_view text) {
    constexpr std::string_view key = "Total number of tokens: ";
    std::optional<int64_t> count;
    for (std::string_view line : split_lines(text)) {
        if (line.substr(0, key.size()) != key) continue;
        if (auto v = integer(line.substr(key.size()))) count = v;
    }
    return count;
}

std::string last_lines(std::string_view text, size_t n) {
    std::vector<std::string_view> kept;
    for (std::string_view line : split_lines(text))
        if (line.find_first_not_of(" \t") != std::string_view::npos) kept.push_back(line);
    std::string out;
    const size_t from = kept.size() > n ? kept.size() - n : 0;
    for (size_t i = from; i < kept.size(); ++i) {
        if (!out.empty()) out += "\n";
        out += kept[i];
    }
    return out;
}

}  // namespace gguf_reap
