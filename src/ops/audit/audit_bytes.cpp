// audit, step 3: one sequential pass over each output shard's bytes, shards in parallel. Each byte is
// read once, through a bounded buffer, and compared with the source run it must equal, checked to be
// zero padding, and/or fed to sha256 — never a whole tensor in memory.
#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gguf_reap/error.h"
#include "io/parallel.h"
#include "io/prefetcher.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "io/signals.h"
#include "ops/audit/audit_internal.h"
#include "ops/audit/audit_pieces.h"

namespace gguf_reap::audit_detail {

namespace {

// A shard's kept slabs come from one or two source shards at a time (a source shard boundary inside the
// output shard): two buffered streams keep memory bounded whatever the number of source shards.
class SourceStreams {
  public:
    SourceStreams(const std::vector<std::shared_ptr<InputFile>>& files, size_t cap)
        : files_(files), cap_(cap) {}

    SequentialReader& get(size_t shard) {
        for (size_t i = 0; i < slots_.size(); ++i)
            if (slots_[i].first == shard) {
                if (i != 0) std::swap(slots_[0], slots_[i]);
                return *slots_[0].second;
            }
        if (slots_.size() == 2) {
            retired_ += slots_.back().second->bytes_read();
            slots_.pop_back();
        }
        slots_.insert(slots_.begin(),
                      {shard, std::make_unique<SequentialReader>(*files_[shard], cap_, false)});
        return *slots_[0].second;
    }
    uint64_t bytes_read() const {
        uint64_t n = retired_;
        for (const auto& s : slots_) n += s.second->bytes_read();
        return n;
    }

  private:
    const std::vector<std::shared_ptr<InputFile>>& files_;
    size_t cap_;
    std::vector<std::pair<size_t, std::unique_ptr<SequentialReader>>> slots_;
    uint64_t retired_ = 0;
};

// Kept slabs are gathered with holes between them, which defeats the kernel's sequential read-ahead:
// every read of a new slab would wait for the disk. So the source runs are announced ahead
// (io/prefetcher.h) and the disk reads them while earlier ones are compared. Runs closer than 256 KiB
// are announced as one range: for small slabs one larger request costs less than many small ones
// (and only the kept bytes are ever copied out and compared); pruned slabs of real models (megabytes
// each) are never requested.
constexpr uint64_t kSourcePrefetchGap = 256u << 10;

bool all_zero(const uint8_t* p, size_t n) {
    return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

// A width-cut expert: compares output bytes [p.offset, p.offset + p.length) with what the plan gathers
// from the source slab, one output row (elements) or one kept row (rows) at a time, through `expect`
// (at most one source row: never a whole slab in memory). Every output byte goes to `feed` in order.
struct GatherResult {
    uint64_t diffs = 0, first = 0;
    int64_t channel = -1, row = -1;
    bool upper = false;  // in the up half of a fused gate_up
    uint64_t src_offset = 0;
    int64_t values = 1;  // channels per element (a quant block): `channel` counts blocks
};

template <typename Feed>
GatherResult compare_gather(const Piece& p, SequentialReader& out, SequentialReader& src, uint64_t fill,
                            Feed feed, const std::atomic<bool>& stop) {
    const SourceRun& run = *p.run;
    const WidthGather& g = *run.gather;
    const int32_t* ch = g.channels(run.source_expert);
    const uint64_t src_slab_end =
        run.src_offset + g.unit * static_cast<uint64_t>(g.factor * g.n_ff * (g.elements ? g.rows : 1));
    GatherResult res;
    res.values = g.values;
    std::vector<uint8_t> expect, row;
    // Copies [off, off + n) of the source into dst through the stream (a view may end early).
    auto read_src = [&](uint64_t off, uint64_t n, uint8_t* dst) {
        while (n > 0) {
            const auto v = src.view(off, n, src_slab_end);
            std::memcpy(dst, v.data(), v.size());
            dst += v.size();
            off += v.size();
            n -= v.size();
        }
    };
    const int64_t units = g.elements ? g.rows : g.factor * g.k;
    uint64_t off = p.offset;
    for (int64_t u = 0; u < units; ++u) {
        if (stop.load(std::memory_order_relaxed)) return res;
        check_interrupted();
        uint64_t src_at = 0;
        if (g.elements) {
            const uint64_t src_row = g.unit * static_cast<uint64_t>(g.factor * g.n_ff);
            src_at = run.src_offset + static_cast<uint64_t>(u) * src_row;
            row.resize(src_row);
            read_src(src_at, src_row, row.data());
            expect.resize(g.unit * static_cast<uint64_t>(g.factor * g.k));
            for (int64_t j = 0; j < g.factor * g.k; ++j)
                std::memcpy(expect.data() + static_cast<uint64_t>(j) * g.unit,
                            row.data() + static_cast<uint64_t>(ch[j % g.k] + j / g.k * g.n_ff) * g.unit,
                            g.unit);
        } else {
            const int64_t c = ch[u % g.k] + u / g.k * g.n_ff;
            src_at = run.src_offset + static_cast<uint64_t>(c) * g.unit;
            expect.resize(g.unit);
            read_src(src_at, g.unit, expect.data());
        }
        for (uint64_t i = 0; i < expect.size();) {
            const auto a = out.view(off, expect.size() - i, fill);
            if (std::memcmp(a.data(), expect.data() + i, a.size()) != 0)
                for (size_t j = 0; j < a.size(); ++j)
                    if (a[j] != expect[i + j] && res.diffs++ == 0) {
                        res.first = off + j;
                        const uint64_t at = i + j;
                        res.row = g.elements ? u : -1;
                        const int64_t j = static_cast<int64_t>(at / g.unit);  // elements: output element
                        res.channel = g.elements ? ch[j % g.k] : ch[u % g.k];
                        res.upper = g.elements ? j >= g.k : u >= g.k;
                        res.src_offset =
                            g.elements
                                ? src_at +
                                      static_cast<uint64_t>(res.channel + (res.upper ? g.n_ff : 0)) * g.unit +
                                      at % g.unit
                                : src_at + at;
                    }
            feed(a.data(), a.size());
            off += a.size();
            i += a.size();
        }
    }
    return res;
}

Finding gather_finding(const OutShard& s, const Piece& p, const std::string& src_path,
                       const GatherResult& g) {
    const TensorInfo& t = s.header->tensors[static_cast<size_t>(p.tensor)];
    const SourceRun& run = *p.run;
    Finding f = tensor_finding(s, p, g.first);
    const int64_t first = g.channel * g.values;
    f.channel = first;
    const std::string channel =
        g.values == 1 ? fmt::format("channel {}", first)
                      : fmt::format("channels {}..{} (one quant block)", first, first + g.values - 1);
    f.subject = fmt::format("tensor '{}' expert {} (source expert {}) {}{}", t.name, run.expert,
                            run.source_expert, channel, g.upper ? " (up half)" : "");
    f.message = fmt::format(
        "differs from source expert {} {}{}: {} of {} bytes of the expert's {} differ, "
        "the first at byte {} ({} offset {})",
        run.source_expert, channel, g.row >= 0 ? fmt::format(" in row {}", g.row) : "", g.diffs, p.length,
        run.region, g.first - p.offset, base_name(src_path), g.src_offset);
    return f;
}

struct ShardJob {
    const OutShard* shard;
    std::vector<Piece> pieces;
    const std::vector<uint64_t>* slab_bytes = nullptr;
};

// The first difference of a piece and how many bytes differ.
struct Diffs {
    uint64_t count = 0, first = 0;
};

// One shard's pass over its pieces: the streams, the hashes, the tensor whose data is being read, and
// what has been found. A step returns false when another shard's error stops the pass.
struct ShardPass {
    const OutShard& s;
    const uint64_t size;
    const BytePassOptions& o;
    const std::vector<std::string>& source_paths;
    const std::atomic<bool>& stop;
    SequentialReader& out;
    SourceStreams& src;
    ShardBytes r{};
    std::optional<Sha256> file_hash{}, tensor_hash{}, piece_hash{};
    // The tensor whose data is being read: whether any byte was compared, and every one matched.
    int32_t cur = -1;
    bool cur_bad = false, cur_compared = false, cur_expert = false;

    bool stopped() const { return stop.load(std::memory_order_relaxed); }
    void advance(uint64_t n) const {
        if (o.events && o.events->on_progress) o.events->on_progress(n);
    }
    uint64_t fill(const Piece& p) const { return o.read_all ? size : p.offset + p.length; }
    // A piece with its own hash: a slab of a manifest being made, or bytes a source manifest vouches for.
    bool own_hash(const Piece& p) const {
        return p.check == Check::kHash || (o.hash && p.slab >= 0 && !r.slab_sha256.empty());
    }

    void start_hashes(const std::vector<uint64_t>* slab_bytes) {
        if (!o.hash) return;
        file_hash.emplace();
        tensor_hash.emplace();
        if (!s.header) return;
        r.tensor_sha256.assign(s.header->tensors.size(), std::string());
        if (!slab_bytes) return;
        r.slab_sha256.resize(s.header->tensors.size());
        for (size_t t = 0; t < r.slab_sha256.size() && t < slab_bytes->size(); ++t)
            if (const uint64_t b = (*slab_bytes)[t]; b > 0)
                r.slab_sha256[t].assign(s.header->tensors[t].nbytes / b, std::string());
    }

    void finish_tensor() {
        if (cur < 0) return;
        if (tensor_hash && s.header) r.tensor_sha256[static_cast<size_t>(cur)] = tensor_hash->finish_hex();
        if (cur_compared && !cur_bad) ++(cur_expert ? r.counts.expert_tensors : r.counts.tensors_identical);
        cur = -1;
    }

    void enter_tensor(const Piece& p) {
        if (p.tensor != cur) finish_tensor();
        if (p.tensor >= 0 && p.tensor != cur) {
            cur = p.tensor;
            cur_bad = cur_compared = cur_expert = false;
        }
    }

    // A run compared with the source (byte for byte, or by its hash): counted, and named by
    // `finding()` when it differs.
    template <typename MakeFinding>
    void compared(const Piece& p, bool differs, MakeFinding finding) {
        r.counts.bytes_compared += p.length;
        cur_compared = true;
        cur_expert = p.run->expert >= 0;
        if (differs) {
            cur_bad = true;
            r.findings.push_back(finding());
        } else if (p.run->expert >= 0) {
            ++r.counts.slabs;
        }
    }

    // A width-cut expert (always an expert's run), gathered from its source slab as the plan says.
    bool gathered(const Piece& p, bool own) {
        const GatherResult g = compare_gather(
            p, out, src.get(p.run->src_shard), fill(p),
            [&](const uint8_t* d, size_t n) {
                if (file_hash) {
                    file_hash->update(d, n);
                    tensor_hash->update(d, n);
                }
                if (own) piece_hash->update(d, n);
            },
            stop);
        if (stopped()) return false;
        advance(p.length);
        compared(p, g.diffs > 0, [&] { return gather_finding(s, p, source_paths[p.run->src_shard], g); });
        return true;
    }

    // Any other piece, read through the output stream: compared with its source run or with zeros, and
    // fed to the hashes.
    bool streamed(const Piece& p, bool own, Diffs& d) {
        uint64_t off = p.offset, left = p.length;
        uint64_t src_off = p.run ? p.run->src_offset : 0;
        while (left > 0) {
            if (stopped()) return false;
            check_interrupted();
            const auto a = out.view(off, left, fill(p));
            size_t n = a.size();
            if (p.check == Check::kSource) {
                const auto b = src.get(p.run->src_shard).view(src_off, n, p.src_limit);
                n = std::min(n, b.size());
                if (std::memcmp(a.data(), b.data(), n) != 0)
                    for (size_t j = 0; j < n; ++j)
                        if (a[j] != b[j] && d.count++ == 0) d.first = off + j;
                src_off += n;
            } else if (p.check == Check::kZero && !all_zero(a.data(), n)) {
                for (size_t j = 0; j < n; ++j)
                    if (a[j] != 0 && d.count++ == 0) d.first = off + j;
            }
            if (file_hash) {
                file_hash->update(a.data(), n);
                if (p.tensor >= 0) tensor_hash->update(a.data(), n);
                if (p.header) r.header.insert(r.header.end(), a.data(), a.data() + n);
            }
            if (own) piece_hash->update(a.data(), n);
            advance(n);
            off += n;
            left -= n;
        }
        return true;
    }

    void tally(const Piece& p, const Diffs& d) {
        if (p.check == Check::kSource) {
            compared(p, d.count > 0,
                     [&] { return data_finding(s, p, source_paths[p.run->src_shard], d.first, d.count); });
        } else if (p.check == Check::kZero) {
            r.counts.padding_bytes += p.length;
            if (d.count) r.findings.push_back(padding_finding(s, p, d.first, d.count));
        }
    }

    // The piece's own hash: checked against the source manifest's, and/or recorded as its slab's.
    void finish_piece(const Piece& p, bool own) {
        if (!own) return;
        const Sha256::Digest digest = piece_hash->finish();
        if (p.check == Check::kHash)
            compared(p, digest != *p.run->sha256, [&] { return hash_finding(s, p, to_hex(digest)); });
        if (o.hash && p.slab >= 0 && !r.slab_sha256.empty()) {
            auto& slabs = r.slab_sha256[static_cast<size_t>(p.tensor)];
            if (static_cast<size_t>(p.slab) < slabs.size())
                slabs[static_cast<size_t>(p.slab)] = to_hex(digest);
        }
    }

    void finish_shard() {
        finish_tensor();
        if (file_hash) {
            r.sha256 = file_hash->finish_hex();
            r.counts.bytes_hashed = size;
            // Tensors without a byte in the file (empty, or cut off by truncation) hash as empty.
            for (auto& h : r.tensor_sha256)
                if (h.empty()) h = sha256_hex(nullptr, 0);
            r.counts.tensors_hashed = r.tensor_sha256.size();
        }
        r.counts.bytes_read = out.bytes_read();
        r.counts.source_bytes_read = src.bytes_read();
    }
};

ShardBytes verify_shard(const ShardJob& job, const std::vector<std::shared_ptr<InputFile>>& sources,
                        const std::vector<std::string>& source_paths, const BytePassOptions& o,
                        const std::atomic<bool>& stop) {
    const OutShard& s = *job.shard;
    if (!s.file) return {};
    const uint64_t size = s.file->size();
    if (o.read_all) s.file->advise_sequential(0, size);
    SequentialReader out(*s.file, o.buffer_bytes, /*prefetch=*/o.read_all);
    SourceStreams src(sources, o.buffer_bytes);
    Prefetcher prefetch(8 * static_cast<uint64_t>(o.buffer_bytes), kSourcePrefetchGap);
    for (const Piece& p : job.pieces)
        if (p.check == Check::kSource) prefetch.add(*sources[p.run->src_shard], p.run->src_offset, p.length);
    prefetch.advance(0);
    ShardPass pass{s, size, o, source_paths, stop, out, src};
    pass.start_hashes(job.slab_bytes);

    uint64_t source_consumed = 0;  // source bytes of the runs compared so far
    for (const Piece& p : job.pieces) {
        if (p.check == Check::kSource) {
            prefetch.advance(source_consumed);
            source_consumed += p.length;
        }
        pass.enter_tensor(p);
        const bool own = pass.own_hash(p);
        if (own && !pass.piece_hash) pass.piece_hash.emplace();
        if (p.check == Check::kSource && p.run->gather) {
            if (!pass.gathered(p, own)) return std::move(pass.r);
        } else {
            Diffs d;
            if (!pass.streamed(p, own, d)) return std::move(pass.r);
            pass.tally(p, d);
        }
        pass.finish_piece(p, own);
    }
    pass.finish_shard();
    return std::move(pass.r);
}

}  // namespace

std::vector<ShardBytes> verify_bytes(const OutputSet& out, const Expectations& expect,
                                     const std::vector<std::string>& source_paths,
                                     const BytePassOptions& opts) {
    BytePassOptions o = opts;
    o.read_all = o.read_all || o.hash;  // a hash needs every byte
    std::vector<ShardJob> jobs;
    for (size_t i = 0; i < out.shards.size(); ++i) {
        const OutShard& s = out.shards[i];
        ShardJob j{&s, {}};
        if (o.hash && o.slab_bytes && i < o.slab_bytes->size()) j.slab_bytes = &(*o.slab_bytes)[i];
        if (s.file)
            j.pieces = plan_shard(s, i < expect.size() ? &expect[i] : nullptr, o.read_all, j.slab_bytes);
        jobs.push_back(std::move(j));
    }
    // Opened again for this pass, with sequential readahead over the whole of each source file.
    std::vector<std::shared_ptr<InputFile>> sources;
    if (o.read_all)
        for (const auto& p : source_paths) {
            sources.push_back(InputFile::open(p));
            sources.back()->advise_sequential(0, sources.back()->size());
        }

    uint64_t total = 0;
    for (const ShardJob& j : jobs)
        for (const Piece& p : j.pieces) total += p.length;
    const Events none;
    ProgressScope progress(o.events ? *o.events : none, "audit", total);
    std::vector<ShardBytes> results(jobs.size());
    std::atomic<bool> stop{false};  // an error in one shard stops the others mid-shard
    parallel_for(jobs.size(), resolve_threads(o.threads), [&](size_t i) {
        try {
            results[i] = verify_shard(jobs[i], sources, source_paths, o, stop);
        } catch (...) {
            stop = true;
            throw;
        }
    });
    return results;
}

}  // namespace gguf_reap::audit_detail
