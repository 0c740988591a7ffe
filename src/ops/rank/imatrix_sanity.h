// Input sanity of rank's GGUF imatrices (docs/rank.md, "Input sanity"): does each file hold what it
// claims to? Per MoE block the routed-expert counts must sum to expert_used_count × the tokens the file
// says it saw (imatrix.chunk_count × imatrix.chunk_size): every token is routed to exactly top-k
// experts. A file made with another top-k, a partial or streamed run, or for another model breaks
// that. A block whose counts are all zero holds no routed-expert data. Files whose chunk sizes differ,
// or whose dataset lists overlap without being equal, measured different things.
//
// Each problem is a warning in the receipt and on stderr by default; `rank --strict` refuses the
// inputs instead (exit 2).
#pragma once

#include <vector>

#include "gguf_reap/sanity_problem.h"

namespace gguf_reap {

struct RankInput;

// Pure: the problems of `in`'s GGUF domains (legacy .dat files store no counts). With
// in.expert_used_count == 0 (no --model) the top-k is taken from the first block that has data, and
// every other block and file must agree with it.
std::vector<SanityProblem> check_imatrix_sanity(const RankInput& in);

// The same problems for the read step: with `strict`, the first is a refusal instead (InputError naming
// the file, the offset of the entry's counts and the field, or RequestError), saying how many there are.
std::vector<SanityProblem> imatrix_sanity_problems(const RankInput& in, bool strict);

}  // namespace gguf_reap
