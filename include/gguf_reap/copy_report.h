// How splice moves its bytes (--copy-method) and what the copy engine reports it did
// (src/io/copy_engine.h): part of the splice request and result.
#pragma once

#include <cstdint>

namespace gguf_reap {

enum class CopyMethod {
    kAuto,       // copy_file_range for large extents, the buffer for small ones and where the kernel refuses
    kKernel,     // copy_file_range for every extent (an error when the kernel refuses)
    kReadWrite,  // pread into the bounded buffer, then pwritev, for every extent
};
const char* copy_method_name(CopyMethod m);

struct CopyReport {
    uint64_t kernel_bytes = 0;      // moved by copy_file_range
    uint64_t buffered_bytes = 0;    // moved by pread + pwritev
    uint64_t literal_bytes = 0;     // headers and other literal bytes
    uint64_t zero_bytes = 0;        // padding
    uint64_t gathered_bytes = 0;    // written by gather segments (whole rows are read, these bytes kept)
    uint64_t copy_calls = 0;        // copy_file_range, pread and pwritev calls
    uint64_t writeback_ranges = 0;  // early writeback requests the writeback thread started
    uint64_t writeback_bytes = 0;   // the bytes they covered
    double seconds = 0;             // copy and flush, wall clock
    uint64_t bytes_read() const { return kernel_bytes + buffered_bytes + gathered_bytes; }
    uint64_t bytes_written() const { return bytes_read() + literal_bytes + zero_bytes; }
};

}  // namespace gguf_reap
