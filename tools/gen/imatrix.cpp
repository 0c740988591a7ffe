#include "gen/imatrix.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "format/gguf.h"
#include "gen/random.h"
#include "gguf_reap/error.h"
#include "io/output_file.h"
#include "io/signals.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"

namespace gguf_reap::gen {

namespace {

constexpr int64_t kMaxExactCount = int64_t{1} << 24;  // floats hold integers exactly up to 2^24
// Super experts: their ffn_down_exps energy per channel, relative to an ordinary expert, and their
// outlier channel relative to their own mean (the "super expert" pattern of massive activations).
constexpr float kSuperEnergy = 50.0f;
constexpr float kSuperOutlier = 100.0f;

// One expert's routing in one MoE block.
struct Routing {
    int block = 0;
    bool nextn = false;
    std::vector<int64_t> counts;
    std::set<int64_t> dead;
    std::set<int64_t> super;
};

enum class EntryKind { kDense, kExpertInput, kExpertDown };

struct Entry {
    std::string name;  // the weight's name
    int64_t ne0 = 0;
    int64_t n_mat = 1;
    EntryKind kind = EntryKind::kDense;
    const Routing* routing = nullptr;  // expert entries
};

// "B:E[,B:E...]" from every occurrence of an option.
std::vector<std::pair<int64_t, int64_t>> parse_pairs(const std::string& option,
                                                     const std::vector<std::string>& values) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const std::string& v : values) {
        size_t start = 0;
        while (start <= v.size()) {
            const size_t end = std::min(v.find(',', start), v.size());
            const std::string_view item(v.data() + start, end - start);
            const size_t colon = item.find(':');
            int64_t b = -1, e = -1;
            bool ok = colon != std::string_view::npos;
            if (ok) {
                auto r1 = std::from_chars(item.data(), item.data() + colon, b);
                auto r2 = std::from_chars(item.data() + colon + 1, item.data() + item.size(), e);
                ok = r1.ec == std::errc() && r1.ptr == item.data() + colon && r2.ec == std::errc() &&
                     r2.ptr == item.data() + item.size() && b >= 0 && e >= 0;
            }
            if (!ok)
                throw UsageError(
                    fmt::format("{} {}: expected BLOCK:EXPERT pairs such as 3:17 (comma-separated)", option,
                                std::string(item)));
            out.emplace_back(b, e);
            start = end + 1;
        }
    }
    return out;
}

// Exact integer counts: every live expert gets at least 1 and at most `tokens` (a token picks distinct
// experts), dead experts 0, and the total is tokens × used. Shares follow `weight` (water-filling under
// the cap, then largest remainders), so the result is exact and deterministic.
std::vector<int64_t> apportion(const std::vector<double>& weight, const std::set<int64_t>& dead,
                               int64_t tokens, int64_t used) {
    const size_t E = weight.size();
    std::vector<int64_t> counts(E, 0);
    std::vector<size_t> live;
    for (size_t e = 0; e < E; ++e)
        if (!dead.count(static_cast<int64_t>(e))) live.push_back(e);
    int64_t rest = tokens * used - static_cast<int64_t>(live.size());
    for (size_t e : live) counts[e] = 1;
    const double cap = static_cast<double>(tokens - 1);
    std::vector<double> share(E, 0.0);
    std::vector<bool> capped(E, false);
    double remaining = static_cast<double>(rest);
    for (;;) {
        double wsum = 0;
        for (size_t e : live)
            if (!capped[e]) wsum += weight[e];
        bool changed = false;
        for (size_t e : live) {
            if (capped[e]) continue;
            share[e] = remaining * weight[e] / wsum;
            if (share[e] > cap) {
                share[e] = cap;
                capped[e] = true;
                remaining -= cap;
                changed = true;
            }
        }
        if (!changed) break;
    }
    std::vector<std::pair<double, size_t>> frac;
    for (size_t e : live) {
        const auto whole = static_cast<int64_t>(std::floor(share[e]));
        counts[e] += whole;
        rest -= whole;
        frac.emplace_back(share[e] - static_cast<double>(whole), e);
    }
    std::stable_sort(frac.begin(), frac.end(), [](auto& a, auto& b) { return a.first > b.first; });
    // rest is the rounding shortfall (< live.size()); capped experts have no fraction and are never raised.
    for (size_t i = 0; rest > 0 && i < frac.size(); ++i) {
        if (counts[frac[i].second] >= tokens) continue;
        ++counts[frac[i].second];
        --rest;
    }
    // Floating-point shares can overshoot by one when every fraction is ~0: take it back from the
    // experts with the smallest fractions.
    for (size_t i = frac.size(); rest < 0 && i > 0; --i) {
        if (counts[frac[i - 1].second] <= 1) continue;
        --counts[frac[i - 1].second];
        ++rest;
    }
    if (rest != 0) throw std::logic_error("expert counts do not add up to tokens × used");
    return counts;
}

class Generator {
  public:
    explicit Generator(const ImatrixSpec& spec) : s_(spec) {}

    nlohmann::ordered_json run();

  private:
    void validate_spec();
    void build_routing(const ShardSet& model, const MoeLayout& L);
    void build_entries(const ShardSet& model, const MoeLayout& L);
    // The entry's raw in_sum2 (ne0 × n_mat) and counts (n_mat).
    void values(const Entry& e, std::vector<float>& sums, std::vector<float>& counts, int64_t* super_channel);
    void write_gguf();
    void write_dat();
    void note_truth(const Entry& e, const std::vector<float>& sums,
                    const std::map<int64_t, int64_t>& channels);

    const ImatrixSpec& s_;
    uint64_t key_ = 0;
    int64_t used_ = 0;
    int64_t experts_ = 0;
    int64_t chunk_count_ = 0;
    std::map<int, Routing> routing_;
    std::vector<Entry> entries_;
    std::vector<std::string> written_;
    std::vector<std::string> skipped_;
    std::map<int, std::vector<double>> down_energy_, input_energy_;
    std::map<int, std::map<int64_t, int64_t>> super_channel_;
};

void Generator::validate_spec() {
    if (s_.format != "gguf" && s_.format != "dat")
        throw UsageError(fmt::format("--format {}: must be gguf or dat", s_.format));
    if (s_.dat_generation != "current" && s_.dat_generation != "partial-skip" && s_.dat_generation != "nan")
        throw UsageError(
            fmt::format("--dat-generation {}: must be current, partial-skip or nan", s_.dat_generation));
    if (s_.tokens < 1 || s_.tokens > kMaxExactCount)
        throw UsageError(fmt::format("--tokens {}: must be 1..{} (counts are stored as exact floats)",
                                     s_.tokens, kMaxExactCount));
    if (s_.chunk_size < 1 || s_.chunk_size > std::numeric_limits<int32_t>::max())
        throw UsageError(fmt::format("--chunk-size {}: must be 1..2^31-1", s_.chunk_size));
    if (s_.dead_per_block < 0)
        throw UsageError(fmt::format("--dead-per-block {}: must be >= 0", s_.dead_per_block));
    if (s_.domain.empty()) throw UsageError("--domain must not be empty");
    chunk_count_ = (s_.tokens + s_.chunk_size - 1) / s_.chunk_size;
}

void Generator::build_routing(const ShardSet& model, const MoeLayout& L) {
    experts_ = static_cast<int64_t>(L.expert_count);
    used_ = static_cast<int64_t>(L.expert_used_count);
    const int64_t first_nextn =
        static_cast<int64_t>(L.block_count) - static_cast<int64_t>(L.nextn_predict_layers);
    const auto dead = parse_pairs("--dead", s_.dead);
    const auto super = parse_pairs("--super", s_.super);
    if (L.blocks.empty()) {
        if (!dead.empty() || !super.empty() || s_.dead_per_block > 0)
            throw UsageError(
                fmt::format("{} has no routed experts: --dead, --dead-per-block and --super do not apply",
                            model.shards().front().path));
        return;
    }
    if (used_ < 1 || used_ > experts_)
        throw InputError(model.shards().front().path, std::nullopt,
                         fmt::format("kv '{}.expert_used_count'", L.arch),
                         fmt::format("is {} but must be 1..expert_count ({})", used_, experts_));
    for (const MoeBlock& b : L.blocks) {
        Routing r;
        r.block = b.block;
        r.nextn = L.nextn_predict_layers > 0 && b.block >= first_nextn;
        if (r.nextn && s_.no_nextn) continue;
        routing_[b.block] = std::move(r);
    }
    auto pick = [&](const char* option, int64_t blk, int64_t e) -> Routing& {
        auto it = routing_.find(static_cast<int>(blk));
        if (it == routing_.end()) {
            std::string ids;
            for (const auto& [id, r] : routing_) ids += fmt::format("{}{}", ids.empty() ? "" : ",", id);
            throw UsageError(
                fmt::format("{} {}:{}: block {} has no routed experts in this imatrix (MoE blocks: {})",
                            option, blk, e, blk, ids));
        }
        if (e >= experts_)
            throw UsageError(fmt::format("{} {}:{}: expert {} is out of range (expert_count is {})", option,
                                         blk, e, e, experts_));
        return it->second;
    };
    for (auto [b, e] : super) pick("--super", b, e).super.insert(e);
    for (auto [b, e] : dead) {
        Routing& r = pick("--dead", b, e);
        if (r.super.count(e))
            throw UsageError(fmt::format("--dead {}:{}: expert is also given as --super", b, e));
        r.dead.insert(e);
    }
    for (auto& [id, r] : routing_) {
        // K more dead experts, drawn from the seed and the block only (not the domain), so imatrices of
        // several domains made with one seed agree on which experts are dead.
        if (s_.dead_per_block > 0) {
            std::vector<int64_t> pool;
            for (int64_t e = 0; e < experts_; ++e)
                if (!r.dead.count(e) && !r.super.count(e)) pool.push_back(e);
            if (s_.dead_per_block > static_cast<int64_t>(pool.size()))
                throw UsageError(fmt::format("--dead-per-block {}: block {} has only {} experts left to kill",
                                             s_.dead_per_block, id, pool.size()));
            Rng rng(derive(derive(s_.seed, "dead"), static_cast<uint64_t>(id)));
            for (int64_t k = 0; k < s_.dead_per_block; ++k) {
                const size_t j = static_cast<size_t>(k) + rng.below(pool.size() - static_cast<size_t>(k));
                std::swap(pool[static_cast<size_t>(k)], pool[j]);
                r.dead.insert(pool[static_cast<size_t>(k)]);
            }
        }
        const int64_t live = experts_ - static_cast<int64_t>(r.dead.size());
        if (live < used_)
            throw UsageError(
                fmt::format("block {}: {} dead experts leave {} live, fewer than expert_used_count ({})", id,
                            r.dead.size(), live, used_));
        if (s_.tokens * used_ < live)
            throw UsageError(
                fmt::format("--tokens {}: {} tokens × {} experts each cannot reach all {} live experts "
                            "of block {}; raise --tokens",
                            s_.tokens, s_.tokens, used_, live, id));
        // Popularity: a model-wide component (block and expert only), a domain skew and seed noise.
        std::vector<double> w(static_cast<size_t>(experts_));
        const uint64_t kb = derive(derive(0, "popularity"), static_cast<uint64_t>(id));
        const uint64_t kd = derive(derive(derive(0, "domain"), s_.domain), static_cast<uint64_t>(id));
        const uint64_t ks = derive(derive(s_.seed, "noise"), static_cast<uint64_t>(id));
        double wmax = 0;
        for (int64_t e = 0; e < experts_; ++e) {
            const auto ue = static_cast<uint64_t>(e);
            const double z = 0.5 * Rng(derive(kb, ue)).normal() + 0.8 * Rng(derive(kd, ue)).normal() +
                             0.3 * Rng(derive(ks, ue)).normal();
            w[static_cast<size_t>(e)] = std::exp(z);
            if (!r.super.count(e)) wmax = std::max(wmax, w[static_cast<size_t>(e)]);
        }
        for (int64_t e : r.super) w[static_cast<size_t>(e)] = 2.5 * std::max(wmax, 1.0);  // routed often
        r.counts = apportion(w, r.dead, s_.tokens, used_);
    }
}

void Generator::build_entries(const ShardSet& model, const MoeLayout& L) {
    std::set<size_t> expert_weights;
    for (const MoeBlock& b : L.blocks) {
        for (const ExpertTensor& et : b.tensors) {
            if (!et.kind->is_weight()) continue;
            const bool input = et.kind->projection != Projection::kDown;
            expert_weights.insert(et.tensor);
            auto it = routing_.find(b.block);
            if (it == routing_.end()) continue;  // a nextn block left out
            const TensorInfo& t = model.info(model.tensors()[et.tensor]);
            Entry e;
            e.name = t.name;
            e.ne0 = t.ne[0];
            e.n_mat = experts_;
            e.kind = input ? EntryKind::kExpertInput : EntryKind::kExpertDown;
            e.routing = &it->second;
            entries_.push_back(std::move(e));
        }
    }
    // Dense entries: what llama-imatrix collects from plain MUL_MATs inside blocks (reference §3.1):
    // every 2-D+ blk.*.weight that is not a stacked expert weight (router, attention, dense FFN, shexp).
    // 3-D dense weights (MLA attn_k_b) fold their extra dims into ne0 with one count, as llama.cpp does.
    const int64_t first_nextn =
        static_cast<int64_t>(L.block_count) - static_cast<int64_t>(L.nextn_predict_layers);
    for (size_t i = 0; i < model.tensors().size(); ++i) {
        if (expert_weights.count(i)) continue;
        const TensorInfo& t = model.info(model.tensors()[i]);
        auto blk = split_block_name(t.name);
        if (!blk || !t.name.ends_with(".weight") || t.ne[1] <= 1) continue;
        if (s_.no_nextn && L.nextn_predict_layers > 0 && blk->first >= first_nextn) continue;
        Entry e;
        e.name = t.name;
        e.ne0 = t.ne[0] * t.ne[2] * t.ne[3];
        entries_.push_back(std::move(e));
    }
    // llama-imatrix sorts entry names with std::sort on strings ("blk.10" before "blk.2").
    std::sort(entries_.begin(), entries_.end(),
              [](const Entry& a, const Entry& b) { return a.name < b.name; });
    for (size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].name.size() + 8 >= kGgmlMaxName && s_.format == "gguf")
            throw UsageError(
                fmt::format("{}: the name is too long for a '.in_sum2' tensor (ggml's limit is 63 bytes)",
                            entries_[i].name));
}

void Generator::values(const Entry& e, std::vector<float>& sums, std::vector<float>& counts,
                       int64_t* super_channel) {
    const auto ne0 = static_cast<size_t>(e.ne0);
    sums.assign(ne0 * static_cast<size_t>(e.n_mat), 0.0f);
    counts.assign(static_cast<size_t>(e.n_mat), 0.0f);
    // Energy per channel ~ U(0.2, 0.3) × tokens seen (24 random bits per value).
    auto fill = [&](Rng& rng, float* out, float count, float scale) {
        for (size_t j = 0; j < ne0; ++j)
            out[j] = count * scale * (0.2f + 0.1f * static_cast<float>(rng.next() >> 40) * 0x1.0p-24f);
    };
    if (e.kind == EntryKind::kDense) {
        counts[0] = static_cast<float>(s_.tokens);
        Rng rng(derive(key_, e.name));
        fill(rng, sums.data(), counts[0], 1.0f);
        return;
    }
    const Routing& r = *e.routing;
    // Gate and up read the same activations (the block input), so their entries are identical, as in
    // llama-imatrix; down reads each expert's own intermediate activation.
    const bool down = e.kind == EntryKind::kExpertDown;
    const uint64_t k = derive(key_, fmt::format("blk.{}.{}", r.block, down ? "down" : "input"));
    for (int64_t x = 0; x < e.n_mat; ++x) {
        const auto ux = static_cast<size_t>(x);
        counts[ux] = static_cast<float>(r.counts[ux]);
        if (r.counts[ux] == 0) continue;
        Rng rng(derive(k, static_cast<uint64_t>(x)));
        float* row = sums.data() + ux * ne0;
        const bool sup = down && r.super.count(x);
        fill(rng, row, counts[ux], sup ? kSuperEnergy : 1.0f);
        if (sup) {
            double mean = 0;
            for (size_t j = 0; j < ne0; ++j) mean += row[j];
            mean /= static_cast<double>(ne0);
            const size_t j = static_cast<size_t>(rng.below(ne0));
            row[j] = static_cast<float>(kSuperOutlier * mean);
            super_channel[x] = static_cast<int64_t>(j);
        }
    }
}

void Generator::note_truth(const Entry& e, const std::vector<float>& sums,
                           const std::map<int64_t, int64_t>& channels) {
    if (e.kind == EntryKind::kDense) return;
    const int b = e.routing->block;
    auto& energy = e.kind == EntryKind::kExpertDown ? down_energy_[b] : input_energy_[b];
    if (!energy.empty()) return;  // gate and up are identical: record once
    energy.assign(static_cast<size_t>(e.n_mat), 0.0);
    const auto ne0 = static_cast<size_t>(e.ne0);
    for (size_t x = 0; x < energy.size(); ++x)
        for (size_t j = 0; j < ne0; ++j) energy[x] += sums[x * ne0 + j];
    if (e.kind == EntryKind::kExpertDown) super_channel_[b] = channels;
}

void Generator::write_gguf() {
    std::vector<Kv> kvs;
    kvs.push_back(Kv::make_string("general.type", "imatrix"));
    kvs.push_back(Kv::make_string_array("imatrix.datasets", {s_.domain}));
    kvs.push_back(Kv::make_u32("imatrix.chunk_count", static_cast<uint32_t>(chunk_count_)));
    kvs.push_back(Kv::make_u32("imatrix.chunk_size", static_cast<uint32_t>(s_.chunk_size)));
    std::vector<TensorInfo> infos;
    for (const Entry& e : entries_) {
        TensorInfo sum;
        sum.name = e.name + ".in_sum2";
        sum.type = kGgmlF32;
        sum.ne = {e.ne0, e.n_mat, 1, 1};
        sum.n_dims = e.n_mat > 1 ? 2 : 1;  // ggml_n_dims: trailing 1-dims are not written
        sum.nbytes = static_cast<uint64_t>(e.ne0 * e.n_mat) * 4;
        TensorInfo cnt;
        cnt.name = e.name + ".counts";
        cnt.type = kGgmlF32;
        cnt.ne = {1, e.n_mat, 1, 1};
        cnt.n_dims = e.n_mat > 1 ? 2 : 1;
        cnt.nbytes = static_cast<uint64_t>(e.n_mat) * 4;
        infos.push_back(std::move(sum));
        infos.push_back(std::move(cnt));
    }
    const uint64_t data = assign_offsets(infos, kGgufDefaultAlignment);
    const std::vector<uint8_t> header = serialize_header(3, kvs, infos, kGgufDefaultAlignment);
    OutputFile f(s_.out);
    f.truncate(header.size() + data);
    f.write_at(0, header.data(), header.size());
    std::vector<float> sums, counts;
    for (size_t i = 0; i < entries_.size(); ++i) {
        check_interrupted();
        const Entry& e = entries_[i];
        std::map<int64_t, int64_t> channels;
        std::vector<int64_t> ch(static_cast<size_t>(e.n_mat), -1);
        values(e, sums, counts, ch.data());
        for (size_t x = 0; x < ch.size(); ++x)
            if (ch[x] >= 0) channels[static_cast<int64_t>(x)] = ch[x];
        note_truth(e, sums, channels);
        f.write_at(header.size() + infos[2 * i].offset, sums.data(), sums.size() * 4);
        f.write_at(header.size() + infos[2 * i + 1].offset, counts.data(), counts.size() * 4);
        written_.push_back(e.name);
    }
    f.commit();
}

// Appends little-endian values to a buffer flushed to the output in large writes.
class DatWriter {
  public:
    explicit DatWriter(OutputFile& f) : f_(f) { buf_.reserve(kFlush + 4096); }
    void i32(int32_t v) { raw(&v, 4); }
    void raw(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        buf_.insert(buf_.end(), b, b + n);
        if (buf_.size() >= kFlush) flush();
    }
    void flush() {
        f_.write_at(pos_, buf_.data(), buf_.size());
        pos_ += buf_.size();
        buf_.clear();
    }

  private:
    static constexpr size_t kFlush = size_t{4} << 20;
    OutputFile& f_;
    std::vector<uint8_t> buf_;
    uint64_t pos_ = 0;
};

void Generator::write_dat() {
    // Which entries each writer generation keeps (reference §3.3).
    std::vector<const Entry*> kept;
    for (const Entry& e : entries_) {
        bool any_zero = false, all_zero = e.routing != nullptr;
        if (e.routing)
            for (int64_t c : e.routing->counts) {
                if (c == 0)
                    any_zero = true;
                else
                    all_zero = false;
            }
        const bool skip = s_.dat_generation == "partial-skip" ? any_zero : all_zero;
        (skip ? skipped_ : written_).push_back(e.name);
        if (!skip) kept.push_back(&e);
    }
    if (kept.empty()) throw UsageError("every entry would be skipped: the .dat file would be empty");
    OutputFile f(s_.out);
    DatWriter w(f);
    w.i32(static_cast<int32_t>(kept.size()));
    std::vector<float> sums, counts, stored;
    for (const Entry* e : kept) {
        check_interrupted();
        std::vector<int64_t> ch(static_cast<size_t>(e->n_mat), -1);
        values(*e, sums, counts, ch.data());
        std::map<int64_t, int64_t> channels;
        for (size_t x = 0; x < ch.size(); ++x)
            if (ch[x] >= 0) channels[static_cast<int64_t>(x)] = ch[x];
        note_truth(*e, sums, channels);
        // ncall = ceil(max count / chunk size): how many chunks the most-routed matrix saw.
        const auto max_count = static_cast<int64_t>(*std::max_element(counts.begin(), counts.end()));
        const auto ncall = static_cast<int32_t>((max_count + s_.chunk_size - 1) / s_.chunk_size);
        const auto ne0 = static_cast<size_t>(e->ne0);
        stored.resize(sums.size());
        for (size_t x = 0; x < counts.size(); ++x) {
            for (size_t j = 0; j < ne0; ++j) {
                float v;
                if (counts[x] > 0)
                    v = sums[x * ne0 + j] / counts[x] * static_cast<float>(ncall);
                else if (s_.dat_generation == "nan")
                    v = std::numeric_limits<float>::quiet_NaN();  // 0 / 0 before 2024
                else
                    v = static_cast<float>(ncall);  // current writer: value 1, count 1
                stored[x * ne0 + j] = v;
            }
        }
        w.i32(static_cast<int32_t>(e->name.size()));
        w.raw(e->name.data(), e->name.size());
        w.i32(ncall);
        w.i32(static_cast<int32_t>(stored.size()));
        w.raw(stored.data(), stored.size() * 4);
    }
    w.i32(static_cast<int32_t>(chunk_count_));
    w.i32(static_cast<int32_t>(s_.domain.size()));
    w.raw(s_.domain.data(), s_.domain.size());
    w.flush();
    f.commit();
}

nlohmann::ordered_json Generator::run() {
    validate_spec();
    const ShardSet model = ShardSet::open(s_.model);
    std::error_code ec;
    for (const Shard& sh : model.shards())
        if (std::filesystem::equivalent(sh.path, s_.out, ec))
            throw UsageError(fmt::format("-o {}: that is the model itself", s_.out));
    const MoeLayout L = build_moe_layout(model);
    key_ = derive(derive(derive(s_.seed, "imatrix"), s_.domain), 0);
    build_routing(model, L);
    build_entries(model, L);
    if (entries_.empty())
        throw UsageError(
            fmt::format("{}: no tensor an imatrix would cover (no blk.*.weight matrices)", s_.model));
    if (s_.format == "gguf")
        write_gguf();
    else
        write_dat();

    using nlohmann::ordered_json;
    ordered_json j;
    j["generator"] = "gguf-reap-gen";
    j["model"] = s_.model;
    j["format"] = s_.format;
    if (s_.format == "dat") j["dat_generation"] = s_.dat_generation;
    j["domain"] = s_.domain;
    j["datasets"] = {s_.domain};
    j["seed"] = s_.seed;
    j["tokens"] = s_.tokens;
    j["chunk_size"] = s_.chunk_size;
    j["chunk_count"] = chunk_count_;
    j["expert_count"] = experts_;
    j["expert_used_count"] = used_;
    j["entries"] = written_;
    j["skipped_entries"] = skipped_;
    ordered_json blocks = ordered_json::array();
    for (const auto& [id, r] : routing_) {
        ordered_json b;
        b["block"] = id;
        b["nextn"] = r.nextn;
        b["counts"] = r.counts;
        b["dead"] = r.dead;
        b["super"] = r.super;
        ordered_json ch = ordered_json::object();
        for (const auto& [x, c] : super_channel_[id]) ch[std::to_string(x)] = c;
        b["super_channel"] = ch;
        // Σ over channels of ffn_down_exps in_sum2 (and of the gate/up input entry), per expert; empty
        // when a .dat generation skipped the entry.
        b["down_energy"] = down_energy_[id];
        b["input_energy"] = input_energy_[id];
        blocks.push_back(std::move(b));
    }
    j["blocks"] = blocks;
    return j;
}

}  // namespace

nlohmann::ordered_json generate_imatrix(const ImatrixSpec& spec) {
    return Generator(spec).run();
}

}  // namespace gguf_reap::gen
