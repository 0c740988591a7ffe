// Matching imatrices to MoE blocks (services/imatrix_domains.h), for rank and plan-width.
#include "services/imatrix_domains.h"

#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/parallel.h"
#include "model/moe_layout.h"

namespace gguf_reap {

void check_domain_names(const std::vector<DomainSpec>& specs) {
    std::set<std::string> names;
    for (const auto& d : specs) {
        if (d.name.empty()) throw UsageError(fmt::format("the domain name for '{}' is empty", d.path));
        if (!names.insert(d.name).second)
            throw UsageError(
                fmt::format("domain '{}' is given twice: name each input with NAME=FILE", d.name));
    }
}

std::vector<ImatrixFile> open_imatrices(const std::vector<DomainSpec>& specs, int threads) {
    // Their directories are parsed in parallel (a few ms each for thousands of entries).
    std::vector<std::optional<ImatrixFile>> opened(specs.size());
    parallel_for(specs.size(), resolve_threads(threads),
                 [&](size_t d) { opened[d].emplace(ImatrixFile::open(specs[d].path)); });
    std::vector<ImatrixFile> ims;
    for (auto& f : opened) ims.push_back(std::move(*f));  // the entries live on the heap: pointers survive
    return ims;
}

ImatrixDomains match_imatrix_domains(const std::vector<ImatrixFile>& ims,
                                     const std::vector<DomainSpec>& specs,
                                     const std::vector<int>* model_blocks, const std::string& model_path,
                                     std::vector<std::string>& notes, const ImatrixDomainChecks& checks) {
    ImatrixDomains m;
    m.down.resize(ims.size());
    for (size_t d = 0; d < ims.size(); ++d) {
        for (const auto& e : ims[d].entries())
            if (auto b = down_projection_block(e.name)) m.down[d][*b] = &e;
        if (m.down[d].empty())
            throw UsageError(
                fmt::format("{}: has no ffn_down_exps entries: it is not an imatrix of an MoE model "
                            "(or was made with a filter that left the experts out)",
                            specs[d].path));
        if (checks.found) checks.found(d, m.down[d]);
    }
    if (model_blocks) {
        m.blocks = *model_blocks;
    } else {
        std::set<int> all;
        for (const auto& f : m.down)
            for (const auto& [b, e] : f) all.insert(b);
        m.blocks.assign(all.begin(), all.end());
    }

    for (size_t d = 0; d < ims.size(); ++d) {
        for (const auto& [b, e] : m.down[d])
            if (!std::binary_search(m.blocks.begin(), m.blocks.end(), b))
                throw UsageError(
                    fmt::format("{}: has expert data for block {} ({}), which is not an MoE block of {}: "
                                "was the imatrix made for another model?",
                                specs[d].path, b, e->name, model_path));
        std::vector<int> missing;
        for (size_t bi = 0; bi < m.blocks.size(); ++bi) {
            const auto it = m.down[d].find(m.blocks[bi]);
            if (it == m.down[d].end())
                missing.push_back(m.blocks[bi]);
            else if (checks.entry)
                checks.entry(d, bi, m.blocks[bi], *it->second);
        }
        if (missing.empty()) continue;
        if (ims[d].kind() != ImatrixKind::kLegacy)
            throw UsageError(fmt::format("{}: has no ffn_down_exps entry for MoE block(s) {}{}",
                                         specs[d].path, fmt::join(missing, ", "),
                                         model_blocks ? " of the model: was it made for another model?"
                                                      : " that other imatrices have"));
        notes.push_back(
            fmt::format("{}: no entry for block(s) {}: the 2024-25 .dat writer skipped every entry in which "
                        "some expert was never routed, so these blocks hold a dead expert that this file "
                        "cannot name; they are ranked from the other domains",
                        specs[d].name, fmt::join(missing, ", ")));
    }

    for (int b : m.blocks) {
        bool any = false;
        for (const auto& f : m.down) any |= f.count(b) > 0;
        if (!any)
            throw UsageError(
                fmt::format("no imatrix has data for MoE block {} (legacy files skip entries with "
                            "never-routed experts): add a GGUF imatrix",
                            b));
    }
    return m;
}

}  // namespace gguf_reap
