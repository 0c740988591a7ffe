// Helpers shared by the splice tests: run ops::splice (what the CLI runs), read a planned file's bytes
// without a disk, hash tensors of a written model.
#pragma once

#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "format/imatrix.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/splice.h"
#include "io/copy_engine.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "services/opened.h"
#include "services/splice_plan.h"
#include "test_util.h"

namespace gguf_reap::test {

inline std::string write_text(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

// The splice users run (ops::splice, as the CLI calls it), with its options given as the plan's:
// `execute` false is a dry run (plan and preflight only).
inline std::unique_ptr<ops::SpliceResult> splice_api(const std::string& model, const std::string& keeplist,
                                                     const std::string& out_prefix, SpliceOptions o = {},
                                                     bool execute = true, const std::string& imatrix_in = "",
                                                     bool force = false) {
    ops::SpliceRequest q;
    q.model = model;
    q.keeplist = keeplist;
    q.imatrix_in = imatrix_in;
    o.out_prefix = out_prefix;
    q.options = o;
    q.dry_run = !execute;
    q.force = force;
    return ops::splice(q);
}

// Bytes [off, off+n) of a planned file, assembled from its segments: what the engine would write.
inline std::vector<uint8_t> planned_bytes(const SplicePlan& plan, const CopyJob& job, uint64_t off,
                                          uint64_t n) {
    std::vector<uint8_t> out(n);
    for (const CopySegment& s : job.segments) {
        const uint64_t lo = std::max(off, s.dst_offset), hi = std::min(off + n, s.dst_offset + s.length);
        if (lo >= hi) continue;
        uint8_t* dst = out.data() + (lo - off);
        const uint64_t skip = lo - s.dst_offset;
        if (s.src == kSegmentZeros)
            std::memset(dst, 0, hi - lo);
        else if (s.src == kSegmentLiteral)
            std::memcpy(dst, job.literals[s.src_offset].data() + skip, hi - lo);
        else
            plan.sources[s.src]->read(s.src_offset + skip, dst, hi - lo);
    }
    return out;
}

// sha256 of a tensor's data in an opened model.
inline std::string tensor_sha(const ShardSet& m, const TensorRef& r) {
    return sha256_file_range(m.shards()[r.shard].path, r.abs_offset, r.nbytes);
}

inline std::string drop_spec(const std::string& name) {
    return fixture("prune_specs/tiny-deepseek2." + name + ".json");
}

}  // namespace gguf_reap::test
