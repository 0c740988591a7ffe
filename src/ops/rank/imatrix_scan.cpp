#include "ops/rank/imatrix_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/parallel.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "io/signals.h"
#include "ops/rank/row_extremes.h"

namespace gguf_reap {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Bytes read at a time: whole rows of one entry, through a SequentialReader that announces the next
// chunk to the kernel as each one lands.
constexpr size_t kChunkBytes = size_t{4} << 20;

struct RowStats {
    double sum = 0, max = 0, min = 0, restricted = 0, weighted = 0;
    bool any_nan = false, all_nan = true, all_equal_to = true;
};

// One pass over one expert's channel values: their sum (in double), largest and smallest
// (row_extremes.h: one portable vector build that gives the same bits on every CPU).
RowStats row_stats(const uint8_t* x, int64_t n, const int32_t* plan, int64_t k, const float* colnorm,
                   float equal_to) {
    // `x` points at n little-endian floats in the read buffer, possibly unaligned (legacy .dat): every
    // load is a memcpy.
    const auto ld = [x](int64_t i) {
        float f;
        std::memcpy(&f, x + 4 * i, 4);
        return f;
    };
    RowStats s;
    const RowExtremes r = row_extremes(x, n);
    s.sum = r.sum;
    s.max = r.max;
    s.min = r.min;
    if (std::isnan(s.sum)) {
        for (int64_t c = 0; c < n; ++c) {
            const bool nan = std::isnan(ld(c));
            s.any_nan |= nan;
            s.all_nan &= nan;
        }
    } else {
        s.all_nan = false;
    }
    if (!std::isnan(equal_to))
        for (int64_t c = 0; c < n && s.all_equal_to; ++c) s.all_equal_to = ld(c) == equal_to;
    else
        s.all_equal_to = false;
    if (plan) {
        double r = 0, w = 0;
        for (int64_t j = 0; j < k; ++j) {
            const double v = ld(plan[j]);
            r += v;
            if (colnorm) w += static_cast<double>(colnorm[j]) * v;
        }
        s.restricted = r;
        s.weighted = w;
    } else if (colnorm) {
        double w = 0;
        for (int64_t c = 0; c < n; ++c) w += static_cast<double>(colnorm[c]) * ld(c);
        s.weighted = w;
    }
    return s;
}

struct BlockJob {
    const ImatrixFile* im = nullptr;
    const ImatrixEntry* entry = nullptr;
    int64_t E = 0, ne0 = 0;
    const NeuronPlan* plan = nullptr;
    size_t block_index = 0;
    const std::vector<float>* colnorm = nullptr;  // [E][w] (w = k with a plan), weighted-energy only
    std::vector<float> counts;                    // GGUF counts (read up front)
    size_t domain = 0;
};

void init_stats(BlockStats& s, int64_t E, bool plan, bool weighted) {
    const size_t n = static_cast<size_t>(E);
    s.present = true;
    s.count.assign(n, kNaN);
    s.energy.assign(n, kNaN);
    s.mean.assign(n, kNaN);
    s.peak.assign(n, kNaN);
    s.dead.assign(n, 0);
    if (plan) {
        s.energy_full.assign(n, kNaN);
        s.mean_full.assign(n, kNaN);
    }
    if (weighted) s.weighted.assign(n, kNaN);
}

// Rows [e, e + n) of one block entry, whose values are at `rows`, into `s`.
void process_row_data(const BlockJob& job, BlockStats& s, int64_t e, int64_t n, const uint8_t* rows) {
    const ImatrixFile& im = *job.im;
    const ImatrixEntry& en = *job.entry;
    const bool legacy = im.kind() == ImatrixKind::kLegacy;
    const int64_t ne0 = job.ne0;
    const int64_t k = job.plan ? job.plan->k : 0;
    const int64_t w = job.plan ? k : ne0;
    const double ncall = en.ncall > 0 ? static_cast<double>(en.ncall) : 1.0;
    const float equal_to =
        legacy && en.ncall > 0 ? static_cast<float>(en.ncall) : std::numeric_limits<float>::quiet_NaN();
    for (int64_t r = 0; r < n; ++r, ++e) {
        const size_t ei = static_cast<size_t>(e);
        const int32_t* plan = job.plan ? job.plan->row(job.block_index, e) : nullptr;
        const float* cn = job.colnorm ? job.colnorm->data() + ei * static_cast<size_t>(w) : nullptr;
        const RowStats st = row_stats(rows + r * ne0 * 4, ne0, plan, k, cn, equal_to);
        const auto where = [&] { return fmt::format("entry '{}' expert {}", en.name, e); };
        const uint64_t row_off = en.sums_offset + static_cast<uint64_t>(e) * static_cast<uint64_t>(ne0) * 4;
        if (st.any_nan && !(legacy && st.all_nan))
            throw InputError(im.path(), row_off, where(), "holds NaN values");
        if (!st.any_nan && (!std::isfinite(st.sum) || st.min < 0))
            throw InputError(im.path(), row_off, where(),
                             "holds negative or infinite values (sums of squares cannot be)");
        if (legacy) {
            // Stored values are per-token means × ncall. A never-routed expert is NaN (writers before
            // 2024-06) or exactly ncall in every channel (the current writer stores value 1, count 1).
            if (st.all_nan || st.all_equal_to) {
                s.dead[ei] = 1;
                s.mean[ei] = 0;
                s.peak[ei] = 0;
                if (!s.mean_full.empty()) s.mean_full[ei] = 0;
                if (!s.weighted.empty()) s.weighted[ei] = 0;
                continue;
            }
            s.mean[ei] = (plan ? st.restricted : st.sum) / ncall;
            s.peak[ei] = st.max / ncall;
            if (!s.mean_full.empty()) s.mean_full[ei] = st.sum / ncall;
            if (!s.weighted.empty()) s.weighted[ei] = st.weighted / ncall;
            continue;
        }
        const double c = job.counts[ei];
        s.count[ei] = c;
        s.energy[ei] = plan ? st.restricted : st.sum;
        if (!s.energy_full.empty()) s.energy_full[ei] = st.sum;
        if (!s.weighted.empty()) s.weighted[ei] = st.weighted;
        if (c == 0) {
            if (st.sum != 0)
                throw InputError(
                    im.path(), row_off, where(),
                    fmt::format("has no routed tokens but energy {:.6g} (damaged imatrix?)", st.sum));
            s.dead[ei] = 1;
            s.mean[ei] = 0;
            s.peak[ei] = 0;
            if (!s.mean_full.empty()) s.mean_full[ei] = 0;
        } else {
            s.mean[ei] = s.energy[ei] / c;
            s.peak[ei] = st.max / c;
            if (!s.mean_full.empty()) s.mean_full[ei] = st.sum / c;
        }
    }
}

// Experts [e0, e1) of one block entry into `s`.
void process_rows(const BlockJob& job, BlockStats& s, int64_t e0, int64_t e1) {
    const uint64_t row_bytes = static_cast<uint64_t>(job.ne0) * 4;
    const int64_t rows_per_read = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / row_bytes));
    const uint64_t base = job.entry->sums_offset;
    const uint64_t end = base + static_cast<uint64_t>(e1) * row_bytes;
    SequentialReader reader(job.im->file(), std::max<size_t>(kChunkBytes, static_cast<size_t>(row_bytes)));
    for (int64_t e = e0; e < e1;) {
        check_interrupted();
        const int64_t n = std::min(rows_per_read, e1 - e);
        const auto rows = reader.span(base + static_cast<uint64_t>(e) * row_bytes,
                                      static_cast<size_t>(static_cast<uint64_t>(n) * row_bytes), end);
        process_row_data(job, s, e, n, rows.data());
        e += n;
    }
}

// One domain's file front to back in one pass: every byte goes to the sha256, and the bytes of the
// block entries (`jobs`, in file order) are also ranked from the same buffer, so a hashed run reads
// the entries once, not twice.
std::string hash_and_process(const InputFile& f, const std::vector<const BlockJob*>& jobs,
                             const std::function<BlockStats&(const BlockJob&)>& stats_of) {
    Sha256 h;
    f.advise_sequential(0, f.size());
    size_t cap = kChunkBytes;
    for (const BlockJob* job : jobs) cap = std::max(cap, static_cast<size_t>(job->ne0) * 4);
    SequentialReader reader(f, cap);
    const auto hash_to = [&](uint64_t& pos, uint64_t to) {
        while (pos < to) {
            check_interrupted();
            const auto v = reader.view(pos, to - pos, f.size());
            h.update(v);
            pos += v.size();
        }
    };
    uint64_t pos = 0;
    for (const BlockJob* job : jobs) {
        const uint64_t row_bytes = static_cast<uint64_t>(job->ne0) * 4;
        hash_to(pos, job->entry->sums_offset);
        const int64_t rows_per_read = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / row_bytes));
        for (int64_t e = 0; e < job->E;) {
            check_interrupted();
            const int64_t n = std::min(rows_per_read, job->E - e);
            const auto rows =
                reader.span(pos, static_cast<size_t>(static_cast<uint64_t>(n) * row_bytes), f.size());
            h.update(rows);
            process_row_data(*job, stats_of(*job), e, n, rows.data());
            pos += rows.size();
            e += n;
        }
    }
    hash_to(pos, f.size());
    return h.finish_hex();
}

}  // namespace

std::vector<DomainScan> scan_imatrices(const ImatrixScan& scan) {
    // Read. Every (domain, block) entry becomes a job, split into expert ranges shared among the
    // threads. Jobs run in file order (domain, then offset: llama-imatrix sorts entries by name, so
    // blk.10 precedes blk.2), so that each file is read front to back. weighted-energy instead goes
    // block by block, to hold one block's weight norms at a time.
    const std::vector<ImatrixFile>& ims = *scan.ims;
    const auto& entry = scan.entry;
    const auto& block_width = scan.block_width;
    const NeuronPlan* plan = scan.plan;
    const int threads = scan.threads;
    const bool weighted = static_cast<bool>(scan.column_norms);
    const int64_t E = scan.expert_count;
    const size_t B = block_width.size();
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(threads, E));
    std::vector<DomainScan> out(ims.size());
    for (DomainScan& x : out) x.blocks.resize(B);
    struct Item {
        size_t job;
        int64_t e0, e1;
    };
    auto make_job = [&](size_t d, size_t bi, const std::vector<float>* colnorm) {
        BlockJob j;
        j.im = &ims[d];
        j.entry = entry[d][bi];
        j.E = E;
        j.ne0 = block_width[bi];
        j.plan = plan;
        j.block_index = bi;
        j.colnorm = colnorm;
        j.domain = d;
        return j;
    };
    // A job's counts (GGUF) are read and checked, and its statistics allocated, by the threads (for
    // hundreds of entries, several ms of small reads and page faults), in job order for the errors.
    auto prepare_job = [&](BlockJob& j) {
        const size_t d = j.domain;
        if (ims[d].kind() == ImatrixKind::kGguf) {
            const std::vector<float> c = ims[d].read_counts(*j.entry);
            for (size_t e = 0; e < c.size(); ++e)
                if (!std::isfinite(c[e]) || c[e] < 0)
                    throw InputError(ims[d].path(), j.entry->counts_offset + e * 4,
                                     fmt::format("entry '{}' count of expert {}", j.entry->name, e),
                                     fmt::format("{} is not a token count", c[e]));
            j.counts = c;
        }
        init_stats(out[d].blocks[j.block_index], E, plan != nullptr, weighted);
        out[d].blocks[j.block_index].counts_offset = j.entry->counts_offset;
    };
    // With `fused_hash`, each file is read once, front to back, by one thread that hashes every byte
    // and ranks the entries from the same buffer (the hash is serial per file anyway).
    auto run_jobs = [&](std::vector<BlockJob>& jobs, bool fused_hash) {
        parallel_for(jobs.size(), threads, [&](size_t i) { prepare_job(jobs[i]); });
        std::sort(jobs.begin(), jobs.end(), [](const BlockJob& a, const BlockJob& b) {
            return a.domain != b.domain ? a.domain < b.domain : a.entry->sums_offset < b.entry->sums_offset;
        });
        if (fused_hash) {
            std::vector<std::vector<const BlockJob*>> per_domain(ims.size());
            for (const BlockJob& j : jobs) per_domain[j.domain].push_back(&j);
            parallel_for(ims.size(), threads, [&](size_t d) {
                out[d].sha256 = hash_and_process(
                    ims[d].file(), per_domain[d],
                    [&](const BlockJob& j) -> BlockStats& { return out[j.domain].blocks[j.block_index]; });
            });
            return;
        }
        for (const BlockJob& j : jobs)  // opened for random access (header parsing); read front to back
            j.im->file().advise_sequential(j.entry->sums_offset, static_cast<uint64_t>(j.entry->nval) * 4);
        std::vector<Item> items;
        for (size_t j = 0; j < jobs.size(); ++j)
            for (int64_t c = 0; c < chunks; ++c) items.push_back({j, E * c / chunks, E * (c + 1) / chunks});
        parallel_for(items.size(), threads, [&](size_t i) {
            const BlockJob& j = jobs[items[i].job];
            process_rows(j, out[j.domain].blocks[j.block_index], items[i].e0, items[i].e1);
        });
    };
    if (!weighted) {
        std::vector<BlockJob> jobs;
        for (size_t d = 0; d < ims.size(); ++d)
            for (size_t bi = 0; bi < B; ++bi)
                if (entry[d][bi]) jobs.push_back(make_job(d, bi, nullptr));
        run_jobs(jobs, scan.hash);
    } else {
        for (size_t bi = 0; bi < B; ++bi) {
            check_interrupted();
            const std::vector<float> colnorm = scan.column_norms(bi);
            std::vector<BlockJob> jobs;
            for (size_t d = 0; d < ims.size(); ++d)
                if (entry[d][bi]) jobs.push_back(make_job(d, bi, &colnorm));
            run_jobs(jobs, false);
        }
    }

    if (scan.hash && weighted)  // otherwise hashed in the values pass
        parallel_for(ims.size(), threads, [&](size_t d) { out[d].sha256 = sha256_file(ims[d].file()); });
    return out;
}

}  // namespace gguf_reap
