// What llama-imatrix and llama-tokenize print, read back (llama.cpp 34af94cd9, tools/imatrix/imatrix.cpp
// and tools/tokenize/tokenize.cpp). Pure text parsing; never prints. Tested on logs recorded from its CPU
// build (tests/data/llama-imatrix/).
//
// The lines of a llama-imatrix run it reads (stdout and stderr together):
//   1. "... compute_imatrix: computing over N chunks, n_ctx=C, batch_size=B, n_seq=S"
//   2. with perplexity on (no --no-ppl), one "[n]ppl," per chunk, ten to a line: "[1]107.8384,[2]50.0121,"
//   3. "Final estimate: PPL = v +/- e"
//   4. errors: "compute_imatrix: you need at least N tokens for a context of C" then "the data file you
//      provided tokenizes to only M tokens" (and exit 1).
// As with llama-perplexity, the logger thread may lose the last lines at exit: the imatrix file, not the
// log, says whether the run finished.
// llama-tokenize --ids prints the ids as one Python list: "[2, 198, 2, 383]".
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "format/perplexity_log.h"

namespace gguf_reap {

struct ImatrixLog {
    std::optional<PerplexityRunShape> shape;
    int64_t chunks_done = 0;      // the highest "[n]" printed
    std::optional<ValueErr> ppl;  // "Final estimate"
    std::optional<TooFewTokens> too_few_tokens;
};

ImatrixLog parse_imatrix_log(std::string_view text);
// The chunks printed so far ("[n]"), for progress while the run goes on.
int64_t imatrix_chunks_done(std::string_view text);

// The token ids of llama-tokenize --ids: the first line that is a bracketed list of integers. Null when
// there is none.
std::optional<std::vector<int32_t>> parse_token_ids(std::string_view text);

}  // namespace gguf_reap
