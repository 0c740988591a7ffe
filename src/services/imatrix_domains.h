// The imatrices rank and plan-width read, one per domain: which ffn_down_exps entry of each MoE block
// each one holds (the entry whose in_sum2 rows are the experts' intermediate-activation energies),
// checked against the model's MoE blocks or against each other. Both commands refuse the same inputs
// with the same words here; each checks the entries' shapes itself (rank derives a legacy file's expert
// count, plan-width needs one width everywhere).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "format/imatrix.h"
#include "gguf_reap/rank.h"

namespace gguf_reap {

// Refuses a domain without a name and a name given twice.
void check_domain_names(const std::vector<DomainSpec>& specs);

// Opens every imatrix (its directory only), `threads` at a time (0: one per core). An error is the one
// of the first file in the order given, as if they were opened one after the other.
std::vector<ImatrixFile> open_imatrices(const std::vector<DomainSpec>& specs, int threads);

struct ImatrixDomains {
    std::vector<int> blocks;  // the model's MoE blocks, or every block some imatrix has an entry for
    std::vector<std::map<int, const ImatrixEntry*>> down;  // per imatrix: block → ffn_down_exps entry
};

// What the caller checks while the domains are matched, so that its refusals come in file order.
struct ImatrixDomainChecks {
    // After imatrix d's entries are found, before the next imatrix's.
    std::function<void(size_t d, const std::map<int, const ImatrixEntry*>& down)> found;
    // Every entry of a block in `blocks` (block = blocks[bi]), imatrix by imatrix and block by block,
    // before the imatrix's missing blocks are judged.
    std::function<void(size_t d, size_t bi, int block, const ImatrixEntry& e)> entry;
};

// Finds the ffn_down_exps entries of `ims` (parallel to `specs`) and the blocks they are for:
// `model_blocks` (the MoE blocks of the model at `model_path`), or without a model (nullptr) the union
// of the entries' blocks. Refuses (UsageError) an imatrix without ffn_down_exps entries, an entry for a
// block that is not an MoE block of the model, a GGUF imatrix without an entry for one of the blocks, and
// a block no imatrix has. A legacy .dat without some blocks is noted in `notes` (its 2024-25 writer
// skipped every entry in which an expert was never routed), after what `checks` noted of its entries.
ImatrixDomains match_imatrix_domains(const std::vector<ImatrixFile>& ims,
                                     const std::vector<DomainSpec>& specs,
                                     const std::vector<int>* model_blocks, const std::string& model_path,
                                     std::vector<std::string>& notes, const ImatrixDomainChecks& checks = {});

}  // namespace gguf_reap
