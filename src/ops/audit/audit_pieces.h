// audit, step 3's pieces (audit_bytes.cpp runs the pass): the runs an output shard is read in, each with
// what its bytes must be, and the findings a piece gives when they are not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/audit/audit_internal.h"

namespace gguf_reap::audit_detail {

enum class Check : uint8_t {
    kRead,    // read (and hash when hashing); nothing to compare
    kSource,  // must equal `run`
    kZero,    // padding: must be zero
    kHash,    // --source-manifest: must hash to run->sha256
};

// A run of output bytes and what it must be. Pieces of a shard are disjoint and ascending; in a full
// pass they cover the whole file, so the file hash sees every byte in order.
struct Piece {
    uint64_t offset = 0;
    uint64_t length = 0;
    Check check = Check::kRead;
    int32_t tensor = -1;  // tensor data: index in the shard's header
    int32_t after = -1;   // padding after this tensor
    const SourceRun* run = nullptr;
    uint64_t src_limit = 0;
    int32_t slab = -1;    // hashing slabs: which expert's slab of `tensor` this piece is
    bool header = false;  // the bytes before the header padding
};

// `slab_bytes`: per tensor, the bytes of one expert's slab when each slab gets its own hash.
std::vector<Piece> plan_shard(const OutShard& s, const std::vector<TensorExpect>* expect, bool read_all,
                              const std::vector<uint64_t>* slab_bytes);

// A data finding about piece `p` of a tensor, at `offset`: file, tensor, region and, for an expert's
// run, the output and source expert (subject and message are the caller's).
Finding tensor_finding(const OutShard& s, const Piece& p, uint64_t offset);

Finding data_finding(const OutShard& s, const Piece& p, const std::string& src_path, uint64_t first,
                     uint64_t diffs);

Finding hash_finding(const OutShard& s, const Piece& p, const std::string& got);

Finding padding_finding(const OutShard& s, const Piece& p, uint64_t first, uint64_t diffs);

}  // namespace gguf_reap::audit_detail
