// audit, step 3's pieces: an output shard planned as runs of bytes, and the findings about them
// (ops/audit/audit_pieces.h).
#include <algorithm>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "io/sha256.h"
#include "ops/audit/audit_pieces.h"

namespace gguf_reap::audit_detail {

std::vector<Piece> plan_shard(const OutShard& s, const std::vector<TensorExpect>* expect, bool read_all,
                              const std::vector<uint64_t>* slab_bytes) {
    std::vector<Piece> pieces;
    const uint64_t size = s.file->size();
    auto add = [&](Piece p) {
        if (p.length == 0 || p.offset >= size) return;  // truncation is named by the structure check
        p.length = std::min(p.length, size - p.offset);
        pieces.push_back(p);
    };
    if (!s.header) {
        // Nothing is known about the layout; a full pass still hashes the file.
        if (read_all) add({0, size, Check::kRead});
        return pieces;
    }
    const Header& h = *s.header;
    if (read_all) {
        Piece p{0, h.infos_end, Check::kRead};
        p.header = true;
        add(p);
    }
    add({h.infos_end, h.data_start - h.infos_end, Check::kZero});
    for (size_t i = 0; i < h.tensors.size(); ++i) {
        const TensorInfo& t = h.tensors[i];
        const auto ti = static_cast<int32_t>(i);
        const uint64_t abs = h.data_start + t.offset;  // the parser checked these sums for overflow
        const uint64_t slab = slab_bytes && i < slab_bytes->size() ? (*slab_bytes)[i] : 0;
        if (read_all) {
            const TensorExpect* te = expect && i < expect->size() ? &(*expect)[i] : nullptr;
            uint64_t total = 0;
            if (te)
                for (const SourceRun& r : te->runs) total += r.length;
            if (te && !te->runs.empty() && total == t.nbytes) {
                // Read-ahead in the source stops where a chain of adjacent kept slabs ends, so pruned
                // slabs are never read.
                std::vector<uint64_t> chain_end(te->runs.size());
                for (size_t k = te->runs.size(); k-- > 0;) {
                    const SourceRun& r = te->runs[k];
                    const uint64_t end = r.src_offset + r.length;
                    chain_end[k] = k + 1 < te->runs.size() && te->runs[k + 1].src_shard == r.src_shard &&
                                           te->runs[k + 1].src_offset == end
                                       ? chain_end[k + 1]
                                       : end;
                }
                uint64_t o = abs;
                for (size_t k = 0; k < te->runs.size(); ++k) {
                    const SourceRun& r = te->runs[k];
                    Piece p{o, r.length, r.sha256 ? Check::kHash : Check::kSource, ti, -1, &r, chain_end[k]};
                    // An output expert's run is its slab (kept whole, or cut to the plan's width).
                    if (slab > 0 && r.expert >= 0 && r.length == slab)
                        p.slab = static_cast<int32_t>(r.expert);
                    add(p);
                    o += r.length;
                }
            } else if (slab > 0 && t.nbytes % slab == 0) {
                for (uint64_t e = 0; e < t.nbytes / slab; ++e) {
                    Piece p{abs + e * slab, slab, Check::kRead, ti};
                    p.slab = static_cast<int32_t>(e);
                    add(p);
                }
            } else {
                add({abs, t.nbytes, Check::kRead, ti});
            }
        }
        const uint64_t padded = *pad_to(t.nbytes, h.alignment);
        add({abs + t.nbytes, padded - t.nbytes, Check::kZero, -1, ti});
    }
    const uint64_t end = h.data_start + h.data_size;
    if (read_all && size > end) add({end, size - end, Check::kRead});
    return pieces;
}

Finding tensor_finding(const OutShard& s, const Piece& p, uint64_t offset) {
    Finding f;
    f.kind = FindingKind::kData;
    f.file = s.path;
    f.tensor = s.header->tensors[static_cast<size_t>(p.tensor)].name;
    f.offset = offset;
    f.region = p.run->region;
    if (p.run->expert >= 0) {
        f.expert = p.run->expert;
        f.source_expert = p.run->source_expert;
    }
    return f;
}

Finding data_finding(const OutShard& s, const Piece& p, const std::string& src_path, uint64_t first,
                     uint64_t diffs) {
    const TensorInfo& t = s.header->tensors[static_cast<size_t>(p.tensor)];
    const SourceRun& run = *p.run;
    const uint64_t at = first - p.offset;
    Finding f = tensor_finding(s, p, first);
    if (run.expert >= 0) {
        f.subject = fmt::format("tensor '{}' expert {} (source expert {}) {}", t.name, run.expert,
                                run.source_expert, run.region);
        f.message = fmt::format(
            "differs from source expert {}: {} of {} bytes differ, the first at byte {} of the "
            "{} (source {} offset {})",
            run.source_expert, diffs, p.length, at, run.region, base_name(src_path), run.src_offset + at);
    } else {
        f.subject = fmt::format("tensor '{}' data", t.name);
        f.message = fmt::format(
            "differs from the source: {} of {} bytes differ, the first at byte {} of the tensor "
            "(source {} offset {})",
            diffs, p.length, at, base_name(src_path), run.src_offset + at);
    }
    return f;
}

Finding hash_finding(const OutShard& s, const Piece& p, const std::string& got) {
    const TensorInfo& t = s.header->tensors[static_cast<size_t>(p.tensor)];
    const SourceRun& run = *p.run;
    Finding f = tensor_finding(s, p, p.offset);
    const std::string where = fmt::format(
        "the bytes differ somewhere in [{}, +{}); an audit against the source names the first one", p.offset,
        p.length);
    if (run.expert >= 0) {
        f.subject = fmt::format("tensor '{}' expert {} (source expert {}) {}", t.name, run.expert,
                                run.source_expert, run.region);
        f.message = fmt::format("sha256 {} differs from the source manifest's {} for source expert {} ({})",
                                got, to_hex(*run.sha256), run.source_expert, where);
    } else {
        f.subject = fmt::format("tensor '{}' data", t.name);
        f.message = fmt::format("sha256 {} differs from the source manifest's {} ({})", got,
                                to_hex(*run.sha256), where);
    }
    return f;
}

Finding padding_finding(const OutShard& s, const Piece& p, uint64_t first, uint64_t diffs) {
    Finding f;
    f.kind = FindingKind::kPadding;
    f.file = s.path;
    f.offset = first;
    f.region = "padding";
    if (p.after >= 0) {
        f.tensor = s.header->tensors[static_cast<size_t>(p.after)].name;
        f.subject = fmt::format("padding after tensor '{}'", f.tensor);
    } else {
        f.subject = "header padding";
    }
    f.message = fmt::format("{} of {} padding bytes are not zero (ggml pads with zeros)", diffs, p.length);
    return f;
}

}  // namespace gguf_reap::audit_detail
