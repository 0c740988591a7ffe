// rank's input sanity checks (ops/rank/imatrix_sanity.h).
#include "ops/rank/imatrix_sanity.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "io/upload_path.h"

namespace gguf_reap {

namespace {

std::string count_text(double v) {
    return fmt::format("{:.0f}", v);
}

}  // namespace

std::vector<SanityProblem> check_imatrix_sanity(const RankInput& in) {
    std::vector<SanityProblem> out;
    // The top-k every block must show: the model's, or the first one seen (named, for the message).
    uint64_t k = in.expert_used_count;
    std::string k_from = k ? fmt::format("expert_used_count {}", k) : std::string();
    for (const DomainData& d : in.domains) {
        if (d.format != "gguf") continue;
        for (size_t bi = 0; bi < in.blocks.size(); ++bi) {
            const BlockStats& s = d.blocks[bi];
            if (!s.present) continue;
            const int b = in.blocks[bi];
            const std::string field = fmt::format("entry 'blk.{}.ffn_down_exps.weight' counts", b);
            double sum = 0;
            for (double c : s.count) sum += std::isnan(c) ? 0 : c;
            if (sum == 0) {
                out.push_back(
                    {d.path, s.counts_offset, field,
                     fmt::format("domain {}: blk.{}: no token was routed to any expert (every count "
                                 "is 0): the file holds no routed-expert data for this block",
                                 d.name, b)});
                continue;
            }
            if (!d.tokens || *d.tokens == 0) continue;  // the file does not say what it saw
            const auto T = static_cast<double>(*d.tokens);
            const std::string tokens =
                fmt::format("{} tokens (imatrix.chunk_count {} × imatrix.chunk_size {})", *d.tokens,
                            d.chunks.value_or(0), d.chunk_size.value_or(0));
            if (k) {
                const double want = static_cast<double>(k) * T;
                if (sum != want)
                    out.push_back(
                        {d.path, s.counts_offset, field,
                         fmt::format("domain {}: blk.{}: the routed-expert counts sum to {}, but {} × "
                                     "{} is {}: made with another top-k, by a partial or streamed "
                                     "run, or for another model?",
                                     d.name, b, count_text(sum),
                                     k_from.empty() ? fmt::format("top-k {}", k) : k_from, tokens,
                                     count_text(want))});
                continue;
            }
            const double ratio = sum / T;
            if (ratio != std::floor(ratio)) {
                out.push_back(
                    {d.path, s.counts_offset, field,
                     fmt::format("domain {}: blk.{}: the routed-expert counts sum to {}, which is not a "
                                 "whole multiple of the {}: every token is routed to the same number "
                                 "of experts, so a partial or streamed run, or another model?",
                                 d.name, b, count_text(sum), tokens)});
                continue;
            }
            k = static_cast<uint64_t>(ratio);
            k_from = fmt::format("the top-k {} that {} blk.{} implies", k, d.name, b);
        }
    }
    // Between files: chunk sizes, and dataset lists that overlap without being equal (equal ones are
    // warned about by rank already: "computed on the same dataset(s)").
    const DomainData* first = nullptr;
    for (const DomainData& d : in.domains) {
        if (!d.chunk_size || *d.chunk_size == 0) continue;
        if (!first) {
            first = &d;
            continue;
        }
        if (*d.chunk_size != *first->chunk_size)
            out.push_back(
                {"", std::nullopt, "imatrix.chunk_size",
                 fmt::format("domains {} ({}) and {} ({}) were computed with chunk sizes {} and {}: "
                             "statistics from different context lengths are not comparable",
                             first->name, base_name(first->path), d.name, base_name(d.path),
                             *first->chunk_size, *d.chunk_size)});
    }
    for (size_t a = 0; a < in.domains.size(); ++a)
        for (size_t c = a + 1; c < in.domains.size(); ++c) {
            const DomainData& x = in.domains[a];
            const DomainData& y = in.domains[c];
            if (x.datasets == y.datasets) continue;
            const std::set<std::string> xs(x.datasets.begin(), x.datasets.end());
            std::vector<std::string> shared;
            for (const std::string& s : y.datasets)
                if (xs.count(s)) shared.push_back(s);
            if (!shared.empty())
                out.push_back({"", std::nullopt, "imatrix.datasets",
                               fmt::format("domains {} and {} share dataset(s) {}: that text is counted in "
                                           "both",
                                           x.name, y.name, fmt::join(upload_names(shared), ", "))});
        }
    return out;
}

std::vector<SanityProblem> imatrix_sanity_problems(const RankInput& in, bool strict) {
    std::vector<SanityProblem> found = check_imatrix_sanity(in);
    if (!strict || found.empty()) return found;
    const SanityProblem& p = found.front();
    const Message more =
        found.size() > 1
            ? Message{" (", RankOptions::kStrict,
                      fmt::format("; {} input problems in all, listed without it)", found.size())}
            : Message{" (", RankOptions::kStrict, ")"};
    if (!p.file.empty()) throw InputError(p.file, p.offset, p.field, Message{p.message} + more);
    throw RequestError(Message{p.message} + more);
}

}  // namespace gguf_reap
