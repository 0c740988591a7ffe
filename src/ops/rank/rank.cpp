// rank: the names of the consensus rules (the criteria are a table: criteria.cpp), input specs, and
// ops::rank (resolve → read → decide → write).
#include "gguf_reap/rank.h"

#include <charconv>
#include <chrono>
#include <exception>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/output_file.h"
#include "io/output_lock.h"
#include "ops/rank/rank_plan.h"
#include "ops/rank/rank_steps.h"

namespace gguf_reap {

const char* consensus_name(Consensus c) {
    switch (c) {
        case Consensus::kMinRank:
            return "min-rank";
        case Consensus::kMeanRank:
            return "mean-rank";
        case Consensus::kSum:
            return "sum";
        case Consensus::kMaxMin:
            return "max-min";
        case Consensus::kPooled:
            return "pooled";
    }
    return "?";
}

// The consensus rules in the help's order.
constexpr Consensus kConsensusRules[] = {Consensus::kMinRank, Consensus::kMeanRank, Consensus::kSum,
                                         Consensus::kPooled, Consensus::kMaxMin};

std::optional<Consensus> parse_consensus(std::string_view s) {
    for (Consensus c : kConsensusRules)
        if (s == consensus_name(c)) return c;
    return std::nullopt;
}

std::string consensus_choices(std::string_view sep, std::string_view last_sep) {
    std::string s;
    for (size_t i = 0; i < std::size(kConsensusRules); ++i) {
        if (i > 0) s += i + 1 == std::size(kConsensusRules) ? last_sep : sep;
        s += consensus_name(kConsensusRules[i]);
    }
    return s;
}

DomainSpec parse_domain_spec(const std::string& arg) {
    DomainSpec d;
    const size_t eq = arg.find('=');
    // A '=' before any '/' separates NAME from PATH; paths with '=' in a directory name stay whole.
    if (eq != std::string::npos && arg.find('/') > eq) {
        d.name = arg.substr(0, eq);
        d.path = arg.substr(eq + 1);
        return d;
    }
    d.path = arg;
    const std::string file = std::filesystem::path(arg).filename().string();
    std::string_view stem = file;
    for (std::string_view ext : {".gguf", ".dat", ".json"})
        if (stem.ends_with(ext)) {
            stem.remove_suffix(ext.size());
            break;
        }
    if (stem.ends_with(".imatrix") && stem.size() > 8) stem.remove_suffix(8);
    d.name = std::string(stem);
    return d;
}

std::optional<ExpertRef> parse_expert_ref(std::string_view s) {
    const size_t colon = s.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    ExpertRef r;
    auto a = std::from_chars(s.data(), s.data() + colon, r.block);
    auto b = std::from_chars(s.data() + colon + 1, s.data() + s.size(), r.expert);
    if (a.ec != std::errc() || a.ptr != s.data() + colon || b.ec != std::errc() ||
        b.ptr != s.data() + s.size() || r.block < 0 || r.expert < 0)
        return std::nullopt;
    return r;
}

namespace ops {

namespace {

// A directory made for a run that then fails is removed again (when still empty; the lock, declared
// after it, has gone by then).
struct RemoveIfEmpty {
    std::string dir;
    bool armed = false;
    ~RemoveIfEmpty() {
        std::error_code ec;
        if (armed) std::filesystem::remove(dir, ec);
    }
};

// Every output is checked and locked before the first input byte is read: the directory created, no
// file there without `force`, the lock taken, and a temporary of each made and removed, so that a
// directory nobody can write to fails now rather than after the work.
std::optional<OutputLock> claim_outputs(const RankRequest& q, RemoveIfEmpty& made) {
    namespace fs = std::filesystem;
    if (q.out_dir.empty()) return std::nullopt;
    std::error_code ec;
    made.dir = q.out_dir;
    made.armed = !fs::exists(q.out_dir, ec);
    fs::create_directories(q.out_dir, ec);
    if (ec) throw IoError(q.out_dir, "create directory", ec.value());
    std::vector<std::string> outs;
    for (const char* f : {kKeeplistFile, kRankingFile, kReceiptFile})
        outs.push_back((fs::path(q.out_dir) / f).string());
    if (q.options.export_format) outs.push_back((fs::path(q.out_dir) / kExportedPlanFile).string());
    for (const std::string& p : outs)
        if (!q.force && fs::exists(p))
            throw RequestError({p + " exists; use ", ops::RankRequest::kForce, " to overwrite it"});
    for (const std::string& p : outs) OutputFile(p).discard();
    return std::optional<OutputLock>(std::in_place, outs.front());
}

}  // namespace

RankResult rank(const RankRequest& q, const Events& events) {
    using clock = std::chrono::steady_clock;
    const auto sec = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
    const auto t0 = clock::now();
    RankResult o;
    RemoveIfEmpty made;
    const std::optional<OutputLock> lock = claim_outputs(q, made);
    // Resolve: the plan, and every refusal that needs no file (rank_plan.h).
    const RankPlan plan = resolve_rank(q.options);
    // Read: each reader gets its slice of the plan.
    o.input = read_rank_input(plan.sources);
    o.input.spell = events.spell;
    const auto t1 = clock::now();
    for (const auto& n : o.input.notes) events.info(n);
    // Decide (pure).
    o.result = rank_experts(o.input, plan.method);
    const auto t2 = clock::now();
    std::string exported;  // --export: the plan's text, checked before anything is written
    if (plan.export_format) {
        exported = export_plan(*plan.export_format, o.result.keeplist, o.input.block_count,
                               static_cast<uint64_t>(o.input.expert_count), o.input.model_name);
        const std::string path = (std::filesystem::path(q.out_dir) / kExportedPlanFile).string();
        if (!q.force && std::filesystem::exists(path))
            throw RequestError({path + " exists; use ", ops::RankRequest::kForce, " to overwrite it"});
    }
    // Write. The work is done: a failure to write it still leaves the summary to print
    // (RankResult::write_error).
    try {
        write_rank_outputs(o.input, o.result, q.out_dir, q.force, plan.method.threads);
        if (!exported.empty()) {
            o.exported_path = (std::filesystem::path(q.out_dir) / kExportedPlanFile).string();
            o.exported_format = plan.export_format;
            OutputFile f(o.exported_path);
            f.write_at(0, exported.data(), exported.size());
            f.commit();
        }
    } catch (const Error&) {
        o.write_error = std::current_exception();
    }
    made.armed = false;  // made.armed stays only for runs that fail before this point
    const auto t3 = clock::now();
    events.debug(fmt::format("rank: read {:.3f} s, decide {:.3f} s, write {:.3f} s", sec(t1 - t0),
                             sec(t2 - t1), sec(t3 - t2)));
    for (const auto& w : o.result.warnings) events.warn(w);
    const std::filesystem::path base(q.out_dir);
    o.keeplist_path = (base / kKeeplistFile).string();
    o.ranking_path = (base / kRankingFile).string();
    o.receipt_path = (base / kReceiptFile).string();
    return o;
}

std::vector<SanityProblem> imatrix_sanity(const std::string& model,
                                          const std::vector<DomainSpec>& imatrices) {
    RankOptions opts;
    opts.model = model;
    opts.imatrices = imatrices;
    opts.hash_inputs = false;
    return read_rank_input(resolve_rank_sources(opts)).sanity;
}

}  // namespace ops

}  // namespace gguf_reap
