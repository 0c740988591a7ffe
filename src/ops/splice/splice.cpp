// ops::splice: the whole `gguf-reap splice`, from the source's path to a verified output set.
#include "gguf_reap/splice.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/output_lock.h"
#include "io/preflight.h"
#include "io/sha256.h"
#include "io/units.h"
#include "model/llama_limits.h"

namespace gguf_reap::ops {

namespace {

// PREFIX-NNNNN-of-MMMMM.gguf files beside the output that are not part of the new set: left there,
// ShardSet::open (and llama.cpp's users) would take them for extra or missing shards.
std::vector<std::string> other_sets(const std::string& out_prefix, const std::vector<std::string>& outputs) {
    std::string prefix = out_prefix;
    if (prefix.ends_with(".gguf")) prefix.resize(prefix.size() - 5);
    const std::string dir = parent_dir(prefix);
    const std::string base = base_name(prefix);
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        auto sn = parse_split_name(name);
        if (!sn || sn->prefix != base) continue;
        const std::string p = (std::filesystem::path(dir) / name).string();
        bool mine = false;
        for (const std::string& o : outputs) mine |= base_name(o) == name;
        if (!mine) found.push_back(p);
    }
    std::sort(found.begin(), found.end());
    return found;
}

// The outputs against the inputs, the disk and other shard sets under the same prefix.
void preflight(SpliceResult& r, const std::vector<std::string>& inputs, const std::string& out_prefix,
               bool force) {
    std::vector<PlannedOutput> outputs;
    std::vector<std::string> paths;
    for (const CopyJob* job : r.plan.jobs()) {
        outputs.push_back({job->path, job->size});
        paths.push_back(job->path);
    }
    r.replaced = check_outputs(outputs, inputs, force).replaced;
    if (r.plan.shards.size() <= 1) return;
    for (const std::string& p : other_sets(out_prefix, paths)) {
        if (const std::string* in = same_file_as(p, inputs))
            throw UsageError(
                fmt::format("{}: a shard of another set under the output prefix is the input {}; "
                            "choose another output prefix",
                            p, *in));
        if (!force)
            throw UsageError(
                fmt::format("{}: belongs to another shard set under the same prefix and would be "
                            "taken for part of the output (use --force to remove it)",
                            p));
        r.stale_siblings.push_back(p);
    }
}

// The outputs read back under ggml's rules: every shard parses, the set opens as one model, and each
// tensor has the name, type, shape and size the plan gave it. (audit checks the bytes.)
void read_back(const SplicePlan& plan) {
    ShardSet out = ShardSet::open(plan.shards.front().job.path);
    if (out.shards().size() != plan.shards.size() || out.tensors().size() != plan.tensor_count)
        throw IoError(plan.shards.front().job.path, "the written files do not read back as the planned set");
    size_t i = 0;
    for (const PlannedFile& f : plan.shards)
        for (const PlannedTensor& t : f.tensors) {
            const TensorInfo& got = out.info(out.tensors()[i++]);
            if (got.name != t.info.name || got.type != t.info.type || got.ne != t.info.ne ||
                got.nbytes != t.info.nbytes)
                throw IoError(f.job.path,
                              fmt::format("tensor '{}' does not read back as planned", t.info.name));
        }
    if (plan.imatrix) ImatrixFile::open(plan.imatrix->job.path);
}

}  // namespace

std::unique_ptr<SpliceResult> splice(const SpliceRequest& q, const Events& events) {
    if (q.imatrix_in.empty() != q.options.imatrix_out.empty())
        throw UsageError("--imatrix-in and --imatrix-out go together: give both or neither");
    if (q.keeplist.empty() && q.neuron_plan.empty())
        throw UsageError("splice needs --keeplist, --neuron-plan or both: nothing to prune");

    // Open the source, the keeplist and the neuron plan, and check that they fit each other.
    auto r = std::make_unique<SpliceResult>(ShardSet::open(q.model));
    r->layout = build_moe_layout(r->model);
    if (!q.keeplist.empty()) {
        r->keeplist = KeepList::load(q.keeplist);
        r->keeplist_note =
            keeplist_applies_to(r->keeplist, q.keeplist, keeplist_source_of(r->model, r->layout), q.model);
        validate_keeplist(r->keeplist, r->layout, q.keeplist);
    }
    if (!q.neuron_plan.empty()) {
        r->width = load_width_cut(r->model, r->layout, q.neuron_plan, sha256_file(q.neuron_plan));
        if (q.keeplist.empty()) r->keeplist = keep_all_experts(r->layout);  // every expert, only narrower
    }
    for (const std::string& w : llama_cpp_limit_problems(r->keeplist.n_keep, r->layout.block_count))
        events.warn("the output will not load in llama.cpp: " + w);
    if (!q.imatrix_in.empty()) r->imatrix = ImatrixFile::open(q.imatrix_in);

    // Plan every byte. Without a keeplist the recorded keeplist sha256 is that of no bytes at all
    // (docs/splice.md).
    SpliceOptions so = q.options;
    so.keeplist_sha256 = q.keeplist.empty() ? sha256_hex("", 0) : sha256_file(q.keeplist);
    if (so.tool_version.empty()) so.tool_version = std::string("gguf-reap ") + GGUF_REAP_VERSION;
    if (r->width) so.width = &*r->width;
    r->plan = plan_splice(r->model, r->layout, r->keeplist, so, r->imatrix ? &*r->imatrix : nullptr);

    // The output directory is created as `rank -o` creates its own (a dry run creates nothing; its
    // preflight names a missing directory). One writer per output prefix, from before the checks until
    // the set is renamed and read back: a second splice into the same prefix is refused instead of
    // mixing its shards with ours.
    std::optional<OutputLock> lock;
    if (!q.dry_run) {
        const std::string dir = parent_dir(so.out_prefix);
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec) throw IoError(dir, "create directory", ec.value());
        lock.emplace(so.out_prefix);
    }
    std::vector<std::string> inputs;
    for (const Shard& s : r->model.shards()) inputs.push_back(s.path);
    for (const std::string* p : {&q.keeplist, &q.neuron_plan, &q.imatrix_in})
        if (!p->empty()) inputs.push_back(*p);
    preflight(*r, inputs, so.out_prefix, q.force);
    if (q.dry_run) return r;

    // A crashed earlier run may have left temporaries; they are garbage once their writer is gone.
    for (const CopyJob* job : r->plan.jobs())
        for (const std::string& p : remove_dead_temporaries(parent_dir(job->path), base_name(job->path))) {
            r->removed_temporaries.push_back(p);
            events.info(fmt::format("removed {} (left by an interrupted run)", p));
        }
    for (const std::string& p : r->replaced) events.info(fmt::format("replacing {}", p));

    // Copy. One thread per output file, each writing its file front to back, is what disks like best;
    // more threads than files cut files into 256 MiB pieces written in parallel (for fast SSD arrays).
    CopyOptions co;
    co.method = q.method;
    co.durable = q.durable;
    const auto files = static_cast<unsigned>(r->plan.jobs().size());
    co.threads =
        q.threads ? q.threads : std::clamp(std::thread::hardware_concurrency(), 1u, std::min(files, 4u));
    if (co.threads > files) co.work_item_bytes = uint64_t{256} << 20;
    r->threads = co.threads;
    events.debug(fmt::format("copying {} with {} thread(s), method {}", human_bytes(r->plan.bytes_written()),
                             co.threads, copy_method_name(q.method)));
    {
        ProgressScope progress(events, "splice", r->plan.bytes_written());
        co.on_progress = progress.sink();
        r->copy = run_copy_jobs(r->plan.jobs(), r->plan.sources, co);
    }
    for (const std::string& p : r->stale_siblings) {
        ::unlink(p.c_str());
        events.info(fmt::format("removed {} (a shard of the previous set)", p));
    }

    // Read the result back.
    read_back(r->plan);
    return r;
}

}  // namespace gguf_reap::ops
