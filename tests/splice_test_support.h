// Helpers shared by the splice tests: run the splice pipeline through its public API (as the CLI
// does), read a planned file's bytes without a disk, hash tensors of a written model.
#pragma once

#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "format/imatrix.h"
#include "io/copy_engine.h"
#include "model/keeplist.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "ops/splice.h"
#include "test_util.h"

namespace gguf_reap::test {

// Everything a plan borrows, kept alive together.
struct Spliced {
    ShardSet model;
    MoeLayout layout;
    KeepList keeplist;
    std::optional<ImatrixFile> imatrix;
    SplicePlan plan;
};

inline std::string write_text(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

// open → layout → keeplist → plan (→ preflight → execute when `execute`).
inline std::unique_ptr<Spliced> splice_api(const std::string& model, const std::string& keeplist,
                                           const std::string& out_prefix, SpliceOptions o = {},
                                           bool execute = true, const std::string& imatrix_in = "",
                                           bool force = false) {
    auto s = std::make_unique<Spliced>(Spliced{ShardSet::open(model), {}, {}, {}, {}});
    s->layout = build_moe_layout(s->model);
    s->keeplist = KeepList::load(keeplist);
    validate_keeplist(s->keeplist, s->layout, keeplist);
    if (!imatrix_in.empty()) s->imatrix = ImatrixFile::open(imatrix_in);
    o.out_prefix = out_prefix;
    if (o.tool_version.empty()) o.tool_version = "gguf-reap test";
    if (o.keeplist_sha256.empty()) o.keeplist_sha256 = std::string(64, '0');
    s->plan = plan_splice(s->model, s->layout, s->keeplist, o, s->imatrix ? &*s->imatrix : nullptr);
    if (execute) {
        SpliceInputs in;
        for (const Shard& sh : s->model.shards()) in.paths.push_back(sh.path);
        in.paths.push_back(keeplist);
        if (!imatrix_in.empty()) in.paths.push_back(imatrix_in);
        Preflight pf = preflight_splice(s->plan, in, out_prefix, force);
        ExecuteOptions eo;
        eo.copy.threads = 2;
        execute_splice(s->plan, pf, eo);
    }
    return s;
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
