#include "io/copy_job.h"

#include <stdexcept>

#include <fmt/format.h>

#include "io/checked.h"

namespace gguf_reap {

void CopyJob::append_literal(std::vector<uint8_t> bytes) {
    if (bytes.empty()) return;
    const uint64_t n = bytes.size();
    literals.push_back(std::move(bytes));
    segments.push_back({size, n, literals.size() - 1, kSegmentLiteral});
    size += n;
}

void CopyJob::append_zeros(uint64_t n) {
    if (n == 0) return;
    if (!segments.empty() && segments.back().src == kSegmentZeros) {
        segments.back().length += n;
    } else {
        segments.push_back({size, n, 0, kSegmentZeros});
    }
    size += n;
}

void CopyJob::append_copy(uint32_t src, uint64_t src_offset, uint64_t n) {
    if (n == 0) return;
    if (!segments.empty()) {
        CopySegment& last = segments.back();
        if (last.src == src && last.src_offset + last.length == src_offset) {
            last.length += n;
            size += n;
            return;
        }
    }
    segments.push_back({size, n, src_offset, src});
    size += n;
}

void CopyJob::append_gather(uint32_t src, uint64_t src_offset, uint64_t rows, CopyGather gather) {
    const uint64_t n = rows * gather.index->size() * gather.elem_bytes;
    if (n == 0) return;
    gathers.push_back(std::move(gather));
    segments.push_back({size, n, src_offset, src, static_cast<uint32_t>(gathers.size() - 1)});
    size += n;
}

void check_copy_jobs(const std::vector<const CopyJob*>& jobs, const std::vector<const InputFile*>& sources) {
    for (const CopyJob* job : jobs) {
        uint64_t at = 0;
        for (const CopySegment& s : job->segments) {
            auto bad = [&](const std::string& what) {
                throw std::logic_error(
                    fmt::format("copy plan for {}: segment at {}: {}", job->path, s.dst_offset, what));
            };
            if (s.dst_offset != at) bad(fmt::format("expected to start at {}", at));
            if (s.length == 0) bad("is empty");
            if (s.src == kSegmentLiteral) {
                if (s.src_offset >= job->literals.size() || job->literals[s.src_offset].size() != s.length)
                    bad("literal does not match its length");
            } else if (s.src != kSegmentZeros) {
                if (s.src >= sources.size()) bad("names no source");
                uint64_t src_length = s.length;
                if (s.gather != kNoGather) {
                    if (s.gather >= job->gathers.size()) bad("names no gather");
                    const CopyGather& g = job->gathers[s.gather];
                    if (!g.index || g.index->empty() || g.elem_bytes == 0 || g.row_bytes % g.elem_bytes != 0)
                        bad("gather has no elements, or rows that are not whole elements");
                    for (size_t j = 1; j < g.index->size(); ++j)
                        if ((*g.index)[j] <= (*g.index)[j - 1]) bad("gather indices are not ascending");
                    if ((uint64_t{g.index->back()} + 1) * g.elem_bytes > g.row_bytes)
                        bad("gather index past the end of its row");
                    const uint64_t out_row = g.index->size() * uint64_t{g.elem_bytes};
                    if (s.length % out_row != 0) bad("gather length is not whole rows");
                    auto in = checked_mul(s.length / out_row, g.row_bytes);
                    if (!in) bad("gather overflows");
                    src_length = *in;
                }
                if (!range_inside(s.src_offset, src_length, sources[s.src]->size()))
                    bad(fmt::format("reads past the end of {}", sources[s.src]->path()));
            }
            auto end = checked_add(at, s.length);
            if (!end) bad("overflows");
            at = *end;
        }
        if (at != job->size)
            throw std::logic_error(
                fmt::format("copy plan for {}: covers {} of {} bytes", job->path, at, job->size));
    }
}

}  // namespace gguf_reap
