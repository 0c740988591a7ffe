// rank, step 1: read the inputs. Only the ffn_down_exps entry of each MoE block is read from an
// imatrix (its in_sum2 rows hold each expert's intermediate-activation energy per channel, its counts
// the routed tokens), 4 MiB at a time, mapped where it is or copied into a reused buffer (with_bytes),
// so memory is O(domains × blocks × experts) whatever the file size.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <csetjmp>
#include <csignal>
#include <mutex>
#include <new>
#include <optional>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/ggml_types.h"
#include "format/imatrix.h"
#include "io/checked.h"
#include "io/error.h"
#include "io/preflight.h"
#include "io/sha256.h"
#include "io/signals.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "ops/neuron_plan.h"
#include "ops/npz.h"
#include "ops/parallel.h"
#include "ops/rank.h"
#include "ops/row_extremes.h"

namespace gguf_reap {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr size_t kChunkBytes = size_t{4} << 20;  // bytes read at a time (measured best of 256 KiB..64 MiB)
constexpr uint64_t kPrefetchBytes = uint64_t{16} << 20;  // announced ahead of the pass (Prefetcher)
constexpr uint64_t kMaxScoresJson = uint64_t{256} << 20;

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif

// Values computed straight from a populated mapping can still fault if the file is truncated after the
// populate (llama-imatrix saves its output again every --output-frequency chunks): the kernel then takes
// the pages away and the next load raises SIGBUS. A per-thread guard turns that into an error: while a
// thread computes from a mapping, a SIGBUS at an address inside it jumps back to with_bytes, which
// throws. The code run under the guard (row_stats, process_row_data, sha256 updates) holds nothing
// that needs a destructor at the points where it loads from the mapping. Any other SIGBUS gets the
// disposition it had before.
struct MappingGuard {
    sigjmp_buf env;
    const uint8_t* lo = nullptr;
    const uint8_t* hi = nullptr;
    volatile sig_atomic_t active = 0;
};
thread_local MappingGuard t_guard;
struct sigaction g_previous_sigbus;

void on_sigbus(int sig, siginfo_t* info, void* context) {
    MappingGuard& g = t_guard;
    const auto* at = static_cast<const uint8_t*>(info->si_addr);
    if (g.active && at >= g.lo && at < g.hi) {
        g.active = 0;
        siglongjmp(g.env, 1);
    }
    // Not a fault in a guarded mapping: as if this handler had never been installed.
    if (g_previous_sigbus.sa_flags & SA_SIGINFO) {
        g_previous_sigbus.sa_sigaction(sig, info, context);
    } else if (g_previous_sigbus.sa_handler != SIG_IGN && g_previous_sigbus.sa_handler != SIG_DFL) {
        g_previous_sigbus.sa_handler(sig);
    } else {
        ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);  // returning re-executes the faulting load
    }
}

void install_sigbus_guard() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGBUS, &sa, &g_previous_sigbus);
    });
}

// A thread's buffer for copied chunks, in transparent huge pages where the kernel gives them: a few
// MiB touched for the first time would otherwise cost a page fault every 4 KiB.
class ChunkBuffer {
  public:
    ChunkBuffer() = default;
    ChunkBuffer(const ChunkBuffer&) = delete;
    ChunkBuffer& operator=(const ChunkBuffer&) = delete;
    ~ChunkBuffer() {
        if (p_) ::munmap(p_, cap_);
    }
    uint8_t* get(size_t n) {
        if (n <= cap_) return p_;
        constexpr size_t kHuge = size_t{2} << 20;
        const size_t cap = (n + kHuge - 1) / kHuge * kHuge;
        void* p = ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        ::madvise(p, cap, MADV_HUGEPAGE);  // advice only: without it, ordinary pages
        if (p_) ::munmap(p_, cap_);
        p_ = static_cast<uint8_t*>(p);
        cap_ = cap;
        return p_;
    }

  private:
    uint8_t* p_ = nullptr;
    size_t cap_ = 0;
};

// PAGEMAP_SCAN (Linux 6.7; <linux/fs.h> of older systems lacks it): asks which pages of a range of the
// process's own address space are mapped by huge-page (PMD) entries.
struct PageRegion {
    uint64_t start, end, categories;
};
struct PmScanArg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
        category_anyof_mask, return_mask;
};
constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);
constexpr uint64_t kPageIsHuge = uint64_t{1} << 6;
constexpr uint64_t kHugeBytes = uint64_t{2} << 20;  // one PMD entry maps this much (x86-64, arm64 4K)

// /proc/self/pagemap, opened once, and whether the kernel answers PAGEMAP_SCAN on it.
int pagemap_fd() {
    static const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    return fd;
}
std::atomic<bool> g_pagemap_scan_unsupported{false};

// Whether the kernel can say how a range is mapped (Linux 6.7+, /proc mounted). Where it cannot, chunks
// are never mapped first: the copy is the safe choice without knowing the folios.
bool can_tell_pmd_mapping() {
    return pagemap_fd() >= 0 && !g_pagemap_scan_unsupported.load(std::memory_order_relaxed);
}

// Whether every page of [p, p + n) (page-aligned) is mapped by a PMD entry; false where the kernel
// cannot tell.
bool all_pmd_mapped(const uint8_t* p, size_t n) {
    const int fd = pagemap_fd();
    if (fd < 0) return false;
    PageRegion region{};
    PmScanArg a{};
    a.size = sizeof a;
    a.start = reinterpret_cast<uintptr_t>(p);
    a.end = a.start + n;
    a.vec = reinterpret_cast<uintptr_t>(&region);
    a.vec_len = 1;
    a.category_inverted = a.category_mask = a.return_mask = kPageIsHuge;  // regions that are NOT huge
    const int found = ::ioctl(fd, kPagemapScan, &a);
    if (found < 0 && (errno == ENOTTY || errno == EINVAL || errno == EOPNOTSUPP))
        g_pagemap_scan_unsupported.store(true, std::memory_order_relaxed);  // before Linux 6.7
    return found == 0;
}

// How one thread last found one file's cached pages: in PMD-sized folios (map them: no copy), or not
// (copy them), and from where to try mapping again. Keyed by the InputFile's address: a later file at
// the same address inherits a stale preference, which only decides which of two ways the same bytes
// are read. (A file read in from the disk starts in small folios, as its readahead window grows, and
// so is copied for its first 128 MiB: the pass is memory-bound, and mapping those too measured the same
// in 2 MiB folios and 5-10 ms slower in 4 KiB pages, where it is tried more often.)
struct MapPreference {
    const InputFile* file = nullptr;
    bool map = false;
    uint64_t retry_at = 0;
};
constexpr uint64_t kRetryMapBytes = uint64_t{128} << 20;

MapPreference& map_preference(const InputFile& f) {
    thread_local std::vector<MapPreference> prefs;
    for (auto& p : prefs)
        if (p.file == &f) return p;
    if (prefs.size() >= 64) prefs.erase(prefs.begin());
    prefs.push_back({&f, false, 0});
    return prefs.back();
}

// Maps the 2 MiB-aligned window around [offset, offset + n) of `f`, populates [offset, offset + n)
// and calls fn on it under the SIGBUS guard. Returns false when the kernel cannot map or populate
// (the caller then reads); sets `huge` when every populated page is mapped by a PMD entry (the page
// cache held PMD-sized folios there and the mapping could use them whole).
template <typename Fn>
bool with_mapping(const InputFile& f, uint64_t offset, size_t n, Fn& fn, bool& huge) {
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t start = offset / kHugeBytes * kHugeBytes;
    const uint64_t file_end = (f.size() + page - 1) / page * page;
    const uint64_t stop = std::min((offset + n + kHugeBytes - 1) / kHugeBytes * kHugeBytes, file_end);
    const size_t len = static_cast<size_t>(stop - start);
    void* m = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, f.fd(), static_cast<off_t>(start));
    if (m == MAP_FAILED) return false;
    struct Unmap {
        void* p;
        size_t len;
        ~Unmap() { ::munmap(p, len); }
    } unmap{m, len};
    const auto* p = static_cast<const uint8_t*>(m);
    const uint64_t pop_from = offset / page * page;
    const size_t pop_len = static_cast<size_t>((offset + n + page - 1) / page * page - pop_from);
    if (::madvise(const_cast<uint8_t*>(p) + (pop_from - start), pop_len, MADV_POPULATE_READ) != 0) {
        if (errno == EFAULT) throw IoError(f.path(), "the file shrank while it was read", EFAULT);
        return false;
    }
    huge = all_pmd_mapped(p + (pop_from - start), pop_len);
    install_sigbus_guard();
    if (sigsetjmp(t_guard.env, 1) != 0)  // a SIGBUS inside [p, p + len): the file shrank
        throw IoError(f.path(), "the file shrank while it was read", EFAULT);
    // Disarmed however fn leaves (an exception for bad values too): the range is unmapped next, and a
    // later fault at an address reused there must not jump into this frame.
    struct Disarm {
        ~Disarm() { t_guard.active = 0; }
    } disarm;
    t_guard.lo = p;
    t_guard.hi = p + len;
    t_guard.active = 1;
    fn(p + (offset - start));
    return true;
}

// Calls fn(p) with p pointing at the bytes [offset, offset + n) of `f`, by the cheapest way:
//  - where this thread last found the file's pages in PMD-sized folios (the kernel's readahead caches
//    what it reads in them), the bytes are mapped where they are, a PMD entry per 2 MiB, with no
//    copy: on the warm benchmark this and the copy below took 0.087 s and 0.098 s. Where mapping
//    found small folios it is tried again 128 MiB further on (MapPreference), and never where the
//    kernel cannot tell (before 6.7);
//  - bytes already in the page cache are copied into a per-thread buffer by one preadv2(RWF_NOWAIT),
//    which fails instead of waiting for the disk. Warm, with two threads and the pages in 4 KiB
//    folios, this took 0.135 s for the benchmark's 1.69 GB where mapping took 0.21 s: mapping and
//    unmapping page by page in two threads of one process contend on the address space (its lock and
//    TLB shootdowns), a copy does not;
//  - other bytes are mapped and populated in one call (MADV_POPULATE_READ), then unmapped: from a cold
//    cache this reads ahead better than pread (1.06-1.13 s against 1.26-1.29 s on the same benchmark,
//    and 1.40-1.46 s for populating and then copying with pread). A range that cannot be populated
//    (the file shrank: the call reports what would be a SIGBUS) is an error, and so is one truncated
//    while it is computed (MappingGuard);
//  - where the kernel can do none of these, plain pread.
template <typename Fn>
void with_bytes(const InputFile& f, uint64_t offset, size_t n, Fn&& fn) {
    if (!range_inside(offset, n, f.size()))
        throw IoError(f.path(), "read past the end of the file (was it truncated?)");
    if (n == 0) return;
    thread_local ChunkBuffer buf;
    thread_local bool nowait_works = true, populate_works = true;
    MapPreference& pref = map_preference(f);
    // Maps and computes, noting what the page cache held there; false when the kernel cannot map.
    const auto mapped = [&] {
        bool huge = false;
        if (!with_mapping(f, offset, n, fn, huge)) return populate_works = false;
        pref.map = huge;
        if (!huge) pref.retry_at = offset + kRetryMapBytes;
        return true;
    };
    if (populate_works && can_tell_pmd_mapping() && (pref.map || offset >= pref.retry_at) && mapped()) return;
    if (nowait_works) {
        iovec v{buf.get(n), n};
        const ssize_t got = ::preadv2(f.fd(), &v, 1, static_cast<off_t>(offset), RWF_NOWAIT);
        if (got == static_cast<ssize_t>(n)) {
            fn(static_cast<const uint8_t*>(v.iov_base));
            return;
        }
        // EAGAIN or a short read: not all cached (or the file shrank, which the paths below report).
        if (got < 0 && errno != EAGAIN && errno != EINTR) {
            if (errno != EOPNOTSUPP && errno != EINVAL && errno != ENOSYS)
                throw IoError(f.path(), "read", errno);
            nowait_works = false;
        }
    }
    if (populate_works && mapped()) return;
    uint8_t* p = buf.get(n);
    f.read(offset, p, n);
    fn(p);
}

// Keeps the kernel reading ahead of a front-to-back pass over [start, stop) of `f`: at(pos) makes sure
// that [pos, pos + kPrefetchBytes) has been announced (POSIX_FADV_WILLNEED), in steps of at least a
// quarter of that, so that every byte is announced once. From a cold cache the disk then works on the
// next chunks while this one is computed; reading a chunk otherwise waits for it, a readahead window at
// a time (2.0× `cat` without, 1.0-1.4× with; docs/perf/rank.md). A step whose last byte is already in
// the page cache is not announced: the kernel would look up every page of it (about a tenth of the
// warm pass's time on the benchmark) to find nothing to read.
class Prefetcher {
  public:
    Prefetcher(const InputFile& f, uint64_t start, uint64_t stop)
        : f_(f), ahead_(start), stop_(std::min(stop, f.size())) {}
    void at(uint64_t pos) {
        ahead_ = std::max(ahead_, pos);
        const uint64_t want = std::min(stop_, pos + kPrefetchBytes);
        if (want <= ahead_ || (want < stop_ && want - ahead_ < kPrefetchBytes / 4)) return;
        if (!cached(want - 1))
            ::posix_fadvise(f_.fd(), static_cast<off_t>(ahead_), static_cast<off_t>(want - ahead_),
                            POSIX_FADV_WILLNEED);
        ahead_ = want;
    }

  private:
    // Whether the byte at `pos` is in the page cache: a one-byte read that fails rather than waits.
    bool cached(uint64_t pos) const {
        char byte;
        iovec v{&byte, 1};
        return ::preadv2(f_.fd(), &v, 1, static_cast<off_t>(pos), RWF_NOWAIT) == 1;
    }
    const InputFile& f_;
    uint64_t ahead_, stop_;
};

// Feeds [from, to) of `f` to `h`.
void hash_range(const InputFile& f, Prefetcher& pf, Sha256& h, uint64_t from, uint64_t to) {
    while (from < to) {
        check_interrupted();
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, to - from));
        pf.at(from);
        with_bytes(f, from, n, [&](const uint8_t* p) { h.update(p, n); });
        from += n;
    }
}

float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h >> 15) << 31;
    const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    if (exp == 0) {
        const float v = std::ldexp(static_cast<float>(mant), -24);
        return sign ? -v : v;
    }
    const uint32_t bits =
        exp == 31 ? (sign | 0x7F800000u | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Dequantises one row of ne0 elements of an F32/F16/BF16/Q8_0 tensor.
void dequantize_row(int32_t type, const uint8_t* src, int64_t ne0, float* dst) {
    switch (type) {
        case kGgmlF32:
            std::memcpy(dst, src, static_cast<size_t>(ne0) * 4);
            break;
        case kGgmlF16:
            for (int64_t i = 0; i < ne0; ++i) {
                uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                dst[i] = half_to_float(h);
            }
            break;
        case kGgmlBF16:
            for (int64_t i = 0; i < ne0; ++i) {
                uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                const uint32_t bits = static_cast<uint32_t>(h) << 16;
                std::memcpy(dst + i, &bits, 4);
            }
            break;
        case kGgmlQ8_0:
            // block_q8_0: f16 scale d, then 32 int8 quants; x = d * q.
            for (int64_t blk = 0; blk < ne0 / 32; ++blk) {
                const uint8_t* b = src + blk * 34;
                uint16_t h;
                std::memcpy(&h, b, 2);
                const float d = half_to_float(h);
                for (int j = 0; j < 32; ++j)
                    dst[blk * 32 + j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
            }
            break;
        default:
            break;
    }
}

// ---- per-row statistics ------------------------------------------------------------------------

struct RowStats {
    double sum = 0, max = 0, min = 0, restricted = 0, weighted = 0;
    bool any_nan = false, all_nan = true, all_equal_to = true;
};

// One pass over one expert's channel values: their sum (in double), largest and smallest
// (row_extremes.h, built for AVX-512, AVX2 and any x86-64; all give the same bits).
RowStats row_stats(const uint8_t* x, int64_t n, const int32_t* plan, int64_t k, const float* colnorm,
                   float equal_to) {
    // `x` points at n little-endian floats, possibly unaligned (legacy .dat) and possibly inside the
    // file mapping: every load is a memcpy.
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

// ---- one domain, one block --------------------------------------------------------------------

struct BlockJob {
    const ImatrixFile* im = nullptr;
    const ImatrixEntry* entry = nullptr;
    int block = 0;
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
    Prefetcher pf(job.im->file(), base + static_cast<uint64_t>(e0) * row_bytes,
                  base + static_cast<uint64_t>(e1) * row_bytes);
    for (int64_t e = e0; e < e1;) {
        check_interrupted();
        const int64_t n = std::min(rows_per_read, e1 - e);
        pf.at(base + static_cast<uint64_t>(e) * row_bytes);
        with_bytes(job.im->file(), base + static_cast<uint64_t>(e) * row_bytes,
                   static_cast<size_t>(static_cast<uint64_t>(n) * row_bytes),
                   [&](const uint8_t* rows) { process_row_data(job, s, e, n, rows); });
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
    Prefetcher pf(f, 0, f.size());
    uint64_t pos = 0;
    for (const BlockJob* job : jobs) {
        const uint64_t row_bytes = static_cast<uint64_t>(job->ne0) * 4;
        hash_range(f, pf, h, pos, job->entry->sums_offset);
        pos = job->entry->sums_offset;
        const int64_t rows_per_read = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / row_bytes));
        for (int64_t e = 0; e < job->E;) {
            check_interrupted();
            const int64_t n = std::min(rows_per_read, job->E - e);
            const size_t bytes = static_cast<size_t>(static_cast<uint64_t>(n) * row_bytes);
            pf.at(pos);
            with_bytes(f, pos, bytes, [&](const uint8_t* rows) {
                h.update(rows, bytes);
                process_row_data(*job, stats_of(*job), e, n, rows);
            });
            pos += bytes;
            e += n;
        }
    }
    hash_range(f, pf, h, pos, f.size());
    return h.finish_hex();
}

// ---- the model side ----------------------------------------------------------------------------

struct ModelInfo {
    std::optional<ShardSet> set;
    MoeLayout layout;
    std::map<int, const TensorRef*> down;  // block → ffn_down_exps.weight
};

// ||W_down[:, c]||² for every expert of one block: [E][ne0].
std::vector<float> column_norms(const ModelInfo& m, int block) {
    const TensorRef* r = m.down.at(block);
    const TensorInfo& t = m.set->info(*r);
    const InputFile& f = *m.set->shards()[r->shard].file;
    const int64_t ne0 = t.ne[0], ne1 = t.ne[1], E = t.ne[2];
    const uint64_t row_bytes = *ggml_row_size(t.type, ne0);
    std::vector<float> out(static_cast<size_t>(E * ne0), 0.0f);
    std::vector<uint8_t> raw;
    std::vector<float> row(static_cast<size_t>(ne0));
    const int64_t rows_per_read = std::max<int64_t>(1, static_cast<int64_t>((size_t{4} << 20) / row_bytes));
    for (int64_t e = 0; e < E; ++e) {
        check_interrupted();
        std::vector<double> acc(static_cast<size_t>(ne0), 0.0);
        for (int64_t r0 = 0; r0 < ne1; r0 += rows_per_read) {
            const int64_t n = std::min(rows_per_read, ne1 - r0);
            raw.resize(static_cast<size_t>(n) * row_bytes);
            f.read(r->abs_offset +
                       (static_cast<uint64_t>(e) * static_cast<uint64_t>(ne1) + static_cast<uint64_t>(r0)) *
                           row_bytes,
                   raw.data(), raw.size());
            for (int64_t i = 0; i < n; ++i) {
                dequantize_row(t.type, raw.data() + static_cast<size_t>(i) * row_bytes, ne0, row.data());
                for (int64_t c = 0; c < ne0; ++c)
                    acc[static_cast<size_t>(c)] +=
                        static_cast<double>(row[static_cast<size_t>(c)]) * row[static_cast<size_t>(c)];
            }
        }
        for (int64_t c = 0; c < ne0; ++c)
            out[static_cast<size_t>(e * ne0 + c)] = static_cast<float>(acc[static_cast<size_t>(c)]);
    }
    return out;
}

// ---- external scores ---------------------------------------------------------------------------

struct ExternalFile {
    std::map<int, nlohmann::json> blocks;  // block → object of fields (or {"score": [...]})
};

ExternalFile load_external(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(path, "open", errno);
    in.seekg(0, std::ios::end);
    const auto size = static_cast<uint64_t>(in.tellg());
    if (size > kMaxScoresJson)
        throw InputError(path, std::nullopt, "file",
                         fmt::format("{} bytes is too large for a score file (limit 256 MiB)", size));
    in.seekg(0);
    std::string text(size, '\0');
    in.read(text.data(), static_cast<std::streamsize>(size));
    nlohmann::json j;
    try {
        // A score file nests 3 levels; refusing depth 32 in the parser's callback (the parser itself
        // does not recurse) keeps 100k nested brackets from overflowing the stack of the recursive
        // copies and destructors of the DOM.
        // 16 million values (a few fields × 1,024 experts × 512 blocks is 3 million) bound the DOM, at
        // 16+ bytes a value, to a few hundred MB whatever the 256 MiB of text hold.
        constexpr int kMaxScoresDepth = 32;
        constexpr size_t kMaxScoresValues = size_t{16} << 20;
        size_t values = 0;
        j = nlohmann::json::parse(
            text,
            [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
                if (depth > kMaxScoresDepth)
                    throw InputError(path, std::nullopt, "json",
                                     fmt::format("nested deeper than {} levels", kMaxScoresDepth));
                if (event == nlohmann::json::parse_event_t::value && ++values > kMaxScoresValues)
                    throw InputError(path, std::nullopt, "json",
                                     fmt::format("holds more than {} values, more than a score file needs",
                                                 kMaxScoresValues));
                return true;
            },
            true, false);
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError(path, e.byte > 0 ? e.byte - 1 : 0, "json", "not valid JSON");
    } catch (const nlohmann::json::exception& e) {
        // Valid syntax the parser still refuses, e.g. a number beyond double range (out_of_range.406).
        throw InputError(path, std::nullopt, "json", fmt::format("not valid JSON ({})", e.what()));
    }
    if (!j.is_object()) throw InputError(path, std::nullopt, "json", "a score file must be a JSON object");
    const nlohmann::json& blocks = j.contains("blocks") ? j["blocks"] : j;
    if (!blocks.is_object())
        throw InputError(path, std::nullopt, "blocks", "must be an object {\"BLOCK\": {...}}");
    ExternalFile out;
    for (const auto& [key, val] : blocks.items()) {
        int b = -1;
        auto [p, ec] = std::from_chars(key.data(), key.data() + key.size(), b);
        if (ec != std::errc() || p != key.data() + key.size() || b < 0) {
            if (&blocks == &j && (key == "format" || key == "version")) continue;
            throw InputError(path, std::nullopt, fmt::format("\"{}\"", key.substr(0, 40)),
                             "is not a block number");
        }
        if (val.is_array())
            out.blocks[b] = nlohmann::json{{"score", val}};
        else if (val.is_object())
            out.blocks[b] = val;
        else
            throw InputError(path, std::nullopt, fmt::format("block {}", b),
                             "must be an object of per-expert arrays or an array of scores");
    }
    if (out.blocks.empty()) throw InputError(path, std::nullopt, "blocks", "holds no blocks");
    return out;
}

std::vector<double> external_array(const nlohmann::json& v, const std::string& path, const std::string& field,
                                   int64_t E) {
    if (!v.is_array())
        throw InputError(path, std::nullopt, field, "must be an array with one number per expert");
    if (E > 0 && static_cast<int64_t>(v.size()) != E)
        throw InputError(path, std::nullopt, field,
                         fmt::format("has {} values but the model has {} experts", v.size(), E));
    std::vector<double> out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_number())
            throw InputError(path, std::nullopt, fmt::format("{}[{}]", field, i), "must be a number");
        const double x = v[i].get<double>();
        if (!std::isfinite(x))
            throw InputError(path, std::nullopt, fmt::format("{}[{}]", field, i), "must be finite");
        out.push_back(x);
    }
    return out;
}

void load_external_domains(const RankOptions& opts, RankInput& in, bool have_model) {
    std::vector<ExternalFile> files;
    for (const auto& d : opts.score_files) files.push_back(load_external(d.path));
    if (!have_model) {
        std::set<int> all;
        for (const auto& f : files)
            for (const auto& [b, v] : f.blocks) all.insert(b);
        in.blocks.assign(all.begin(), all.end());
    }
    // The field: as asked, else "reap" (llama-expert-profile), else "score".
    const nlohmann::json& first = files.front().blocks.begin()->second;
    std::string field = opts.score_field;
    if (field.empty()) field = first.contains("reap") ? "reap" : "score";
    in.score_field = field;
    for (size_t d = 0; d < files.size(); ++d) {
        const std::string& path = opts.score_files[d].path;
        DomainData& dom = in.domains[d];
        dom.format = "json";
        dom.blocks.assign(in.blocks.size(), BlockStats{});
        for (const auto& [b, v] : files[d].blocks)
            if (!std::binary_search(in.blocks.begin(), in.blocks.end(), b))
                throw UsageError(
                    fmt::format("{}: block {} has scores but is not an MoE block of the model", path, b));
        for (size_t bi = 0; bi < in.blocks.size(); ++bi) {
            const int b = in.blocks[bi];
            auto it = files[d].blocks.find(b);
            if (it == files[d].blocks.end())
                throw UsageError(fmt::format("{}: has no scores for MoE block {}", path, b));
            const nlohmann::json& o = it->second;
            if (!o.contains(field)) {
                std::string have;
                for (const auto& [k, v] : o.items())
                    if (v.is_array()) have += (have.empty() ? "" : ", ") + k;
                throw UsageError(
                    fmt::format("{}: block {} has no field '{}' (it has: {}); choose one with --score-field",
                                path, b, field, have.empty() ? "none" : have));
            }
            std::vector<double> s =
                external_array(o[field], path, fmt::format("block {} '{}'", b, field), in.expert_count);
            if (in.expert_count == 0) in.expert_count = static_cast<int64_t>(s.size());
            if (static_cast<int64_t>(s.size()) != in.expert_count)
                throw InputError(
                    path, std::nullopt, fmt::format("block {} '{}'", b, field),
                    fmt::format("has {} values but other blocks have {}", s.size(), in.expert_count));
            BlockStats& st = dom.blocks[bi];
            st.present = true;
            st.external = s;
            const size_t n = s.size();
            st.count.assign(n, kNaN);
            st.energy.assign(n, kNaN);
            st.mean.assign(n, kNaN);
            st.peak.assign(n, kNaN);
            st.dead.assign(n, 0);
            if (o.contains("activation_counts")) {
                st.count = external_array(o["activation_counts"], path,
                                          fmt::format("block {} 'activation_counts'", b), in.expert_count);
                for (size_t e = 0; e < n; ++e) st.dead[e] = st.count[e] == 0;
            }
        }
    }
}

// ---- imatrix domains ---------------------------------------------------------------------------

// The expert count of a legacy entry, which the .dat format does not store: from the model, a GGUF
// imatrix of the same model, or the same file's router entry (ne0 = n_embd) and gate/up entries
// (n_embd × E values).
std::optional<int64_t> legacy_expert_count(const ImatrixFile& im, int block, std::string& how) {
    const ImatrixEntry* router = im.find(fmt::format("blk.{}.ffn_gate_inp.weight", block));
    if (!router || router->nval < 1) return std::nullopt;
    for (const char* t : {"ffn_up_exps", "ffn_gate_exps", "ffn_gate_up_exps"}) {
        const ImatrixEntry* x = im.find(fmt::format("blk.{}.{}.weight", block, t));
        if (x && x->nval % router->nval == 0 && x->nval / router->nval >= 1) {
            how = fmt::format(
                "blk.{}.ffn_gate_inp ({} values = n_embd) and blk.{}.{} ({} values = n_embd × experts)",
                block, router->nval, block, t, x->nval);
            return x->nval / router->nval;
        }
    }
    return std::nullopt;
}

}  // namespace

RankInput load_rank_input(const RankOptions& opts) {
    const bool external = opts.criterion == Criterion::kExternal;
    if (external && opts.score_files.empty())
        throw UsageError(
            "--criterion external needs score files: --scores NAME=FILE (JSON, see docs/rank.md)");
    if (external && !opts.imatrices.empty())
        throw UsageError(
            "--criterion external ranks by --scores files; --imatrix cannot be combined with it");
    if (!external && !opts.score_files.empty())
        throw UsageError("--scores files are only read with --criterion external");
    if (!external && opts.imatrices.empty()) throw UsageError("give at least one --imatrix NAME=FILE");
    if (opts.criterion == Criterion::kWeightedEnergy && opts.model.empty())
        throw UsageError(
            "--criterion weighted-energy needs --model: it weights each channel by the squared norm of "
            "the matching ffn_down_exps column");
    if (external && !opts.neuron_plan.empty())
        throw UsageError(
            "--neuron-plan restricts imatrix energies; it does not apply to --criterion external");
    const auto& specs = external ? opts.score_files : opts.imatrices;
    {
        std::set<std::string> names;
        for (const auto& d : specs) {
            if (d.name.empty()) throw UsageError(fmt::format("the domain name for '{}' is empty", d.path));
            if (!names.insert(d.name).second)
                throw UsageError(
                    fmt::format("domain '{}' is given twice: name each input with NAME=FILE", d.name));
        }
    }
    const int threads = resolve_threads(opts.threads);

    RankInput in;
    ModelInfo model;
    if (!opts.model.empty()) {
        model.set.emplace(ShardSet::open(opts.model));
        model.layout = build_moe_layout(*model.set);
        const MoeLayout& L = model.layout;
        if (L.blocks.empty())
            throw UsageError(
                fmt::format("{}: the model has no MoE blocks (no {}.expert_count or no expert tensors): "
                            "there are no experts to rank",
                            opts.model, L.arch.empty() ? "<arch>" : L.arch));
        in.expert_count = static_cast<int64_t>(L.expert_count);
        in.expert_used_count = L.expert_used_count;
        in.expert_group_count = L.expert_group_count;
        for (const auto& b : L.blocks) {
            in.blocks.push_back(b.block);
            for (const auto& t : b.tensors)
                if (t.kind == &down_projection_kind()) model.down[b.block] = &model.set->tensors()[t.tensor];
            if (!model.down.count(b.block) && !external)
                throw UsageError(
                    fmt::format("{}: MoE block {} has no ffn_down_exps.weight, the tensor whose imatrix "
                                "entry rank reads",
                                opts.model, b.block));
        }
        KeepListSource src;
        src.architecture = L.arch;
        src.expert_count = L.expert_count;
        src.expert_used_count = L.expert_used_count;
        src.expert_group_count = L.expert_group_count;
        src.tensor_count = model.set->tensors().size();
        for (const Shard& s : model.set->shards()) src.shards.emplace_back(base_name(s.path), s.file->size());
        in.source = src;
    }

    in.domains.resize(specs.size());
    for (size_t d = 0; d < specs.size(); ++d) {
        in.domains[d].name = specs[d].name;
        in.domains[d].path = specs[d].path;
    }

    if (external) {
        load_external_domains(opts, in, model.set.has_value());
        for (auto& dom : in.domains) {
            auto f = InputFile::open(dom.path);
            dom.file_size = f->size();
            if (opts.hash_inputs) dom.sha256 = sha256_file(*f);
        }
        return in;
    }

    // Open every imatrix (directory only) and find its ffn_down_exps entries.
    // Their directories are parsed in parallel (a few ms each for thousands of entries); an error is
    // the one of the first file in command-line order, as if they were opened one after the other.
    std::vector<ImatrixFile> ims;
    {
        std::vector<std::optional<ImatrixFile>> opened(specs.size());
        parallel_for(specs.size(), threads,
                     [&](size_t d) { opened[d].emplace(ImatrixFile::open(specs[d].path)); });
        for (auto& f : opened) ims.push_back(std::move(*f));
    }
    for (size_t d = 0; d < ims.size(); ++d) in.domains[d].format = imatrix_kind_name(ims[d].kind());
    check_criterion_inputs(in, opts);
    std::vector<std::map<int, const ImatrixEntry*>> found(ims.size());
    struct Shape {
        int64_t n_mat, ne0;
        size_t domain;
    };
    std::map<int, Shape> gguf_shape;  // block → shape in the first GGUF imatrix that has it
    for (size_t d = 0; d < ims.size(); ++d) {
        for (const auto& e : ims[d].entries())
            if (auto b = down_projection_block(e.name)) found[d][*b] = &e;
        if (found[d].empty())
            throw UsageError(
                fmt::format("{}: has no ffn_down_exps entries: it is not an imatrix of an MoE model "
                            "(or was made with a filter that left the experts out)",
                            specs[d].path));
        if (ims[d].kind() != ImatrixKind::kGguf) continue;
        for (const auto& [b, e] : found[d]) {
            auto [it, inserted] = gguf_shape.emplace(b, Shape{e->n_mat, e->ne0, d});
            if (!inserted && (it->second.n_mat != e->n_mat || it->second.ne0 != e->ne0))
                throw UsageError(
                    fmt::format("{}: {} is [{}, {}] but in {} it is [{}, {}]: the imatrices were made "
                                "from different models",
                                specs[d].path, e->name, e->ne0, e->n_mat, specs[it->second.domain].path,
                                it->second.ne0, it->second.n_mat));
        }
    }
    if (!model.set) {
        std::set<int> all;
        for (const auto& f : found)
            for (const auto& [b, e] : f) all.insert(b);
        in.blocks.assign(all.begin(), all.end());
    }

    // Shapes: experts and width of every block's entry, checked against the model.
    std::vector<std::vector<int64_t>> width(ims.size(), std::vector<int64_t>(in.blocks.size(), 0));
    std::vector<std::vector<const ImatrixEntry*>> entry(
        ims.size(), std::vector<const ImatrixEntry*>(in.blocks.size(), nullptr));
    for (size_t d = 0; d < ims.size(); ++d) {
        const ImatrixFile& im = ims[d];
        const bool legacy = im.kind() == ImatrixKind::kLegacy;
        for (const auto& [b, e] : found[d])
            if (!std::binary_search(in.blocks.begin(), in.blocks.end(), b))
                throw UsageError(
                    fmt::format("{}: has expert data for block {} ({}), which is not an MoE block of {}: "
                                "was the imatrix made for another model?",
                                specs[d].path, b, e->name, opts.model));
        std::vector<int> missing;
        for (size_t bi = 0; bi < in.blocks.size(); ++bi) {
            const int b = in.blocks[bi];
            auto it = found[d].find(b);
            if (it == found[d].end()) {
                missing.push_back(b);
                continue;
            }
            const ImatrixEntry* e = it->second;
            int64_t E = 0;
            if (!legacy) {
                E = e->n_mat;
            } else if (in.expert_count > 0) {
                E = in.expert_count;
            } else if (auto g = gguf_shape.find(b); g != gguf_shape.end()) {
                E = g->second.n_mat;
                in.notes.push_back(
                    fmt::format("{}: expert count of blk.{} ({}) taken from a GGUF imatrix of the same model",
                                specs[d].name, b, E));
            } else {
                std::string how;
                auto derived = legacy_expert_count(im, b, how);
                if (!derived)
                    throw UsageError(
                        fmt::format("{}: the legacy .dat format does not store the expert count of {}, and "
                                    "this file has no router and gate/up entries to derive it from: give "
                                    "--model (or a GGUF imatrix of the same model)",
                                    specs[d].path, e->name));
                E = *derived;
                if (bi == 0)
                    in.notes.push_back(
                        fmt::format("{}: expert count {} derived from {}", specs[d].name, E, how));
            }
            if (E < 1 || e->nval % E != 0)
                throw InputError(im.path(), e->entry_offset, fmt::format("entry '{}'", e->name),
                                 fmt::format("{} values cannot be split among {} experts", e->nval, E));
            if (in.expert_count == 0) in.expert_count = E;
            if (E != in.expert_count)
                throw UsageError(fmt::format("{}: {} has {} experts, but {} has {}{}", specs[d].path, e->name,
                                             E, model.set ? opts.model : "the other entries", in.expert_count,
                                             model.set ? ": the imatrix was made for another model" : ""));
            width[d][bi] = e->nval / E;
            entry[d][bi] = e;
        }
        if (!missing.empty()) {
            std::string list;
            for (int b : missing) list += (list.empty() ? "" : ", ") + std::to_string(b);
            if (!legacy)
                throw UsageError(fmt::format("{}: has no ffn_down_exps entry for MoE block(s) {}{}",
                                             specs[d].path, list,
                                             model.set ? " of the model: was it made for another model?"
                                                       : " that other imatrices have"));
            in.notes.push_back(
                fmt::format("{}: no entry for block(s) {}: the 2024-25 .dat writer skipped every entry in "
                            "which some expert was never routed, so these blocks hold a dead expert that "
                            "this file cannot name; they are ranked from the other domains",
                            specs[d].name, list));
        }
    }

    // Widths agree across domains; with a model, they match its ffn_down_exps (or the plan's k).
    std::vector<int64_t> block_width(in.blocks.size(), 0);
    for (size_t bi = 0; bi < in.blocks.size(); ++bi) {
        for (size_t d = 0; d < ims.size(); ++d) {
            if (!width[d][bi]) continue;
            if (block_width[bi] && block_width[bi] != width[d][bi])
                throw UsageError(
                    fmt::format("{}: blk.{}.ffn_down_exps has expert width {}, other imatrices have {}",
                                specs[d].path, in.blocks[bi], width[d][bi], block_width[bi]));
            block_width[bi] = width[d][bi];
        }
        if (!block_width[bi])
            throw UsageError(fmt::format(
                "no imatrix has data for MoE block {} (legacy files skip entries with never-routed "
                "experts): add a GGUF imatrix",
                in.blocks[bi]));
    }
    in.expert_width = block_width.front();

    std::optional<NeuronPlan> plan;
    if (!opts.neuron_plan.empty()) {
        const int64_t native = *std::max_element(block_width.begin(), block_width.end());
        plan = read_neuron_plan(opts.neuron_plan, in.blocks, in.expert_count, native);
        in.plan_path = opts.neuron_plan;
        in.plan_k = plan->k;
        if (opts.hash_inputs) in.plan_sha256 = sha256_file(*InputFile::open(opts.neuron_plan));
    }
    if (model.set) {
        for (size_t bi = 0; bi < in.blocks.size(); ++bi) {
            const TensorRef* r = model.down.at(in.blocks[bi]);
            const TensorInfo& t = model.set->info(*r);
            const int64_t want = plan ? plan->k : block_width[bi];
            if (t.ne[0] != want) {
                if (plan)
                    throw UsageError(
                        fmt::format("{}: {} has width {} but the neuron plan keeps {} channels: the model "
                                    "must be the width-pruned one made with this plan",
                                    opts.model, t.name, t.ne[0], plan->k));
                size_t from = 0;  // the first domain with data for the block (all agree)
                while (from + 1 < ims.size() && !width[from][bi]) ++from;
                throw UsageError(
                    fmt::format("{}: {} has expert width {} but the imatrix entry in {} has {}{}", opts.model,
                                t.name, t.ne[0], specs[from].path, block_width[bi],
                                t.ne[0] < block_width[bi] ? ": a width-pruned model needs its --neuron-plan"
                                                          : ": the imatrix was made for another model"));
            }
            if (opts.criterion == Criterion::kWeightedEnergy && t.type != kGgmlF32 && t.type != kGgmlF16 &&
                t.type != kGgmlBF16 && t.type != kGgmlQ8_0)
                throw UsageError(
                    fmt::format("{}: {} is {}: weighted-energy reads the down-projection weights and handles "
                                "F32, F16, BF16 and Q8_0 only; use --criterion energy, or a model file with "
                                "such a down projection",
                                opts.model, t.name, ggml_type_display(t.type)));
        }
    }

    // Per-domain metadata.
    for (size_t d = 0; d < ims.size(); ++d) {
        DomainData& dom = in.domains[d];
        dom.format = imatrix_kind_name(ims[d].kind());
        dom.file_size = ims[d].file().size();
        dom.datasets = ims[d].datasets();
        dom.chunks = ims[d].chunk_count();
        dom.chunk_size = ims[d].chunk_size();
        if (dom.chunks && dom.chunk_size) dom.tokens = *dom.chunks * *dom.chunk_size;
        dom.blocks.resize(in.blocks.size());
        if (ims[d].kind() == ImatrixKind::kLegacy)
            in.notes.push_back(
                fmt::format("{}: legacy .dat: per-expert routing counts and total energies are not stored "
                            "(only per-token means), so token and energy shares are unknown",
                            dom.name));
    }

    // Read. Every (domain, block) entry becomes a job, split into expert ranges shared among the
    // threads. Jobs run in file order (domain, then offset: llama-imatrix sorts entries by name, so
    // blk.10 precedes blk.2), so that each file is read front to back. weighted-energy instead goes
    // block by block, to hold one block's weight norms at a time.
    const bool weighted = opts.criterion == Criterion::kWeightedEnergy;
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(threads, in.expert_count));
    struct Item {
        size_t job;
        int64_t e0, e1;
    };
    auto make_job = [&](size_t d, size_t bi, const std::vector<float>* colnorm) {
        BlockJob j;
        j.im = &ims[d];
        j.entry = entry[d][bi];
        j.block = in.blocks[bi];
        j.E = in.expert_count;
        j.ne0 = block_width[bi];
        j.plan = plan ? &*plan : nullptr;
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
        init_stats(in.domains[d].blocks[j.block_index], in.expert_count, plan.has_value(), weighted);
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
                in.domains[d].sha256 =
                    hash_and_process(ims[d].file(), per_domain[d], [&](const BlockJob& j) -> BlockStats& {
                        return in.domains[j.domain].blocks[j.block_index];
                    });
            });
            return;
        }
        for (const BlockJob& j : jobs)  // opened for random access (header parsing); read front to back
            j.im->file().advise_sequential(j.entry->sums_offset, static_cast<uint64_t>(j.entry->nval) * 4);
        std::vector<Item> items;
        for (size_t j = 0; j < jobs.size(); ++j)
            for (int64_t c = 0; c < chunks; ++c)
                items.push_back({j, in.expert_count * c / chunks, in.expert_count * (c + 1) / chunks});
        parallel_for(items.size(), threads, [&](size_t i) {
            const BlockJob& j = jobs[items[i].job];
            process_rows(j, in.domains[j.domain].blocks[j.block_index], items[i].e0, items[i].e1);
        });
    };
    if (!weighted) {
        std::vector<BlockJob> jobs;
        for (size_t d = 0; d < ims.size(); ++d)
            for (size_t bi = 0; bi < in.blocks.size(); ++bi)
                if (entry[d][bi]) jobs.push_back(make_job(d, bi, nullptr));
        run_jobs(jobs, opts.hash_inputs);
    } else {
        for (size_t bi = 0; bi < in.blocks.size(); ++bi) {
            check_interrupted();
            const std::vector<float> colnorm = column_norms(model, in.blocks[bi]);
            std::vector<BlockJob> jobs;
            for (size_t d = 0; d < ims.size(); ++d)
                if (entry[d][bi]) jobs.push_back(make_job(d, bi, &colnorm));
            run_jobs(jobs, false);
        }
    }

    if (opts.hash_inputs && weighted)  // otherwise hashed in the values pass
        parallel_for(ims.size(), threads,
                     [&](size_t d) { in.domains[d].sha256 = sha256_file(ims[d].file()); });
    return in;
}

}  // namespace gguf_reap
