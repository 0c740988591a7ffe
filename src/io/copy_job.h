// What the copy engine writes: an output file as a list of segments (literal bytes, zero padding, a
// range of a source file, or an element gather from one), and the check that a list is well formed.
// The planner (ops/splice) builds these; io/copy_engine.h runs them.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "io/input_file.h"

namespace gguf_reap {

// One contiguous run of an output file. `src` is an index into the engine's source list, or one of
// the two markers below; for literals, src_offset indexes CopyJob::literals. A segment with `gather`
// set (an index into CopyJob::gathers) is an element gather from source `src`, described there.
struct CopySegment {
    uint64_t dst_offset = 0;
    uint64_t length = 0;
    uint64_t src_offset = 0;
    uint32_t src = 0;
    uint32_t gather = std::numeric_limits<uint32_t>::max();  // kNoGather: a plain byte range
};
inline constexpr uint32_t kSegmentLiteral = std::numeric_limits<uint32_t>::max();
inline constexpr uint32_t kSegmentZeros = std::numeric_limits<uint32_t>::max() - 1;
inline constexpr uint32_t kNoGather = std::numeric_limits<uint32_t>::max();

// A gather: the source range [src_offset, src_offset + rows × row_bytes) holds `rows` rows of
// `row_bytes` bytes, each a sequence of elements of `elem_bytes` bytes; the output is, row after row,
// the elements `index` of each row (so length = rows × index.size() × elem_bytes). Selecting columns
// of a row-major matrix this way costs one pread per buffer of whole rows instead of one per element.
// `index` must be strictly ascending (the gather compacts rows in place) and may be shared by many
// segments.
struct CopyGather {
    uint64_t row_bytes = 0;
    uint32_t elem_bytes = 0;
    std::shared_ptr<const std::vector<uint32_t>> index;
};

// One output file: segments in ascending dst_offset, contiguous, covering exactly [0, size).
struct CopyJob {
    std::string path;  // final name
    uint64_t size = 0;
    std::vector<CopySegment> segments;
    std::vector<std::vector<uint8_t>> literals;
    std::vector<CopyGather> gathers;

    // Appends at the current end of the file. append_copy merges with the previous segment when it
    // continues the same source range (adjacent kept slabs become one extent).
    void append_literal(std::vector<uint8_t> bytes);
    void append_zeros(uint64_t n);
    void append_copy(uint32_t src, uint64_t src_offset, uint64_t n);
    // Appends the gather of `rows` rows starting at `src_offset` of source `src` (see CopyGather).
    void append_gather(uint32_t src, uint64_t src_offset, uint64_t rows, CopyGather gather);
};

// Checks that every job is well formed against `sources` (contiguous segments, source ranges inside
// their files, literal sizes). Throws std::logic_error: a malformed job is a planner bug.
void check_copy_jobs(const std::vector<const CopyJob*>& jobs, const std::vector<const InputFile*>& sources);

}  // namespace gguf_reap
