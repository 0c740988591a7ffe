// One problem of rank's input sanity check (src/ops/rank/imatrix_sanity.h, docs/rank.md "Input
// sanity"): what rank and calibrate report of an imatrix whose counts or metadata contradict each other.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gguf_reap {

struct SanityProblem {
    std::string file;                // the imatrix at fault ("" for a disagreement between files)
    std::optional<uint64_t> offset;  // its counts tensor's data, where one entry is at fault
    std::string field;               // e.g. "entry 'blk.3.ffn_down_exps.weight' counts"
    std::string message;             // names the domain, the block and both numbers
};

}  // namespace gguf_reap
