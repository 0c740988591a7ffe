// rank's read pass: the ffn_down_exps entry of every (domain, MoE block) imatrix, row by row (one row
// per expert: its channel energies), into each domain's BlockStats. Memory is O(domains × blocks ×
// experts) whatever the file size: rows are read through a SequentialReader of a few MiB.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "format/imatrix.h"
#include "gguf_reap/rank.h"
#include "gguf_reap/width.h"

namespace gguf_reap {

struct ImatrixScan {
    const std::vector<ImatrixFile>* ims = nullptr;
    std::vector<std::vector<const ImatrixEntry*>> entry;  // [domain][block index]; nullptr: no entry
    std::vector<int64_t> block_width;                     // ne0 of the block's entries
    int64_t expert_count = 0;
    const NeuronPlan* plan = nullptr;  // restrict energies to the kept channels
    // weighted-energy: the block's ||W_down[:, c]||², [E][width] (width = k with a plan); else empty.
    std::function<std::vector<float>(size_t block_index)> column_norms;
    bool hash = true;  // sha256 of every input, in the same pass where possible
    int threads = 1;
};

// What one imatrix holds: BlockStats for every block (present where the file has the block's entry),
// and with `hash` the file's sha256.
struct DomainScan {
    std::vector<BlockStats> blocks;  // parallel to ImatrixScan::block_width
    std::string sha256;
};

// One DomainScan per file of `scan.ims`. Throws InputError naming the file, offset and entry for values
// a sum of squares cannot hold (NaN, negative, infinite, energy without tokens); IoError; Interrupted.
std::vector<DomainScan> scan_imatrices(const ImatrixScan& scan);

}  // namespace gguf_reap
