// ops::splice: the whole `gguf-reap splice`, from the source's path to a verified output set.
#include "gguf_reap/splice.h"

#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/version.h"
#include "io/copy_engine.h"
#include "io/http_client.h"
#include "io/output_lock.h"
#include "io/preflight.h"
#include "io/remote_file.h"
#include "io/remote_url.h"
#include "io/resume_journal.h"
#include "io/sha256.h"
#include "io/units.h"
#include "model/keeplist_file.h"
#include "model/llama_limits.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "services/opened.h"
#include "services/splice_plan.h"

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
    for (const CopyJob* job : r.opened->plan->jobs()) {
        outputs.push_back({job->path, job->size});
        paths.push_back(job->path);
    }
    r.replaced = check_outputs(outputs, inputs, force, SpliceRequest::kForce).replaced;
    if (r.opened->plan->shards.size() <= 1) return;
    for (const std::string& p : other_sets(out_prefix, paths)) {
        if (const std::string* in = same_file_as(p, inputs))
            throw UsageError(
                fmt::format("{}: a shard of another set under the output prefix is the input {}; "
                            "choose another output prefix",
                            p, *in));
        if (!force)
            throw RequestError(
                {p + ": belongs to another shard set under the same prefix and would be taken for "
                     "part of the output (use ",
                 ops::SpliceRequest::kForce, " to remove it)"});
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

// A file as the plan identity names it: by where it is, not by how it was spelled ("-o out/Tiny" and
// "-o /ABS/out/Tiny" are the same output, issue 40); a URL as it is given.
std::string place(const std::string& path) {
    if (path.find("://") != std::string::npos) return path;
    std::error_code ec;
    const auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
    return ec ? std::filesystem::absolute(path).lexically_normal().string() : p.string();
}

// What the output is made from, as one hash: every source's pin, the keeplist, and every segment and
// literal byte of the plan (which carries the neuron plan, the split and the provenance). Files are
// named by place: a path spelled another way is the same plan.
std::string plan_identity(const SplicePlan& plan, const std::string& keeplist_sha256) {
    Sha256 h;
    const auto put = [&](std::string_view s) {
        const uint64_t n = s.size();
        h.update(&n, sizeof n);
        h.update(s.data(), s.size());
    };
    put(keeplist_sha256);
    for (const InputFile* src : plan.sources) {
        put(place(src->path()));
        put(std::to_string(src->size()));
        if (RemoteFile* rf = src->remote()) put(rf->etag());
    }
    for (const CopyJob* job : plan.jobs()) {
        put(place(job->path));
        put(std::to_string(job->size));
        for (const CopySegment& c : job->segments) {
            const uint64_t f[5] = {c.dst_offset, c.length, c.src_offset, c.src, c.gather};
            h.update(f, sizeof f);
        }
        for (const auto& lit : job->literals)
            put(std::string_view(reinterpret_cast<const char*>(lit.data()), lit.size()));
    }
    return h.finish_hex();
}

// Why a journal left by an interrupted run does not describe this run.
std::string journal_mismatch(const ResumeJournal& old, const ResumeJournal& now) {
    if (old.keeplist_sha256 != now.keeplist_sha256) return "the keeplist is not the one it was made with";
    for (const auto& s : now.sources)
        for (const auto& o : old.sources)
            if (o.path == s.path && (o.etag != s.etag || o.size != s.size))
                return fmt::format("{} changed on the server (ETag {} then, {} now)", s.path, o.etag, s.etag);
    return "the plan differs (another source, split or option)";
}

// Sets up a resumable copy from a URL (docs/splice.md "Resume"): the journal read and checked, the
// bytes already on the disk taken, the journal written before the first byte.
ResumeJournal prepare_resume(SpliceResult& r, const SpliceRequest& q, const std::string& keeplist_sha256,
                             const std::string& journal_path, const Events& events) {
    const SplicePlan& plan = *r.opened->plan;
    ResumeJournal now;
    now.keeplist_sha256 = keeplist_sha256;
    now.identity = plan_identity(plan, now.keeplist_sha256);
    for (const Shard& s : r.opened->model->shards())
        now.sources.push_back({s.path, s.file->size(), s.file->remote() ? s.file->remote()->etag() : ""});
    for (const CopyJob* job : plan.jobs())
        now.files.push_back({job->path, partial_path(job->path), job->size, 0});

    const auto old = ResumeJournal::load(journal_path);
    // Each partial file is beside the journal, whatever directory the run that named it ran in.
    const auto discard = [&] {
        for (const auto& f : old->files)
            ::unlink((std::filesystem::path(journal_path).parent_path() / base_name(f.partial)).c_str());
    };
    if (old && !q.resume) {
        discard();
        events.info(Message{"starting over (", ops::SpliceRequest::kNoResume,
                            "): removed the partial output of an interrupted run"});
    } else if (old && old->identity != now.identity) {
        discard();
        events.info(fmt::format("starting over: an interrupted run left a partial output, but {}",
                                journal_mismatch(*old, now)));
    } else if (old) {
        for (size_t i = 0; i < now.files.size() && i < old->files.size(); ++i) {
            struct stat st {};
            if (::stat(now.files[i].partial.c_str(), &st) == 0 &&
                static_cast<uint64_t>(st.st_size) >= old->files[i].done)
                now.files[i].done = std::min(old->files[i].done, now.files[i].size);
            r.resumed_bytes += now.files[i].done;
        }
        events.info(fmt::format("resuming an interrupted run: {} of {} already written",
                                human_bytes(r.resumed_bytes), human_bytes(plan.bytes_written())));
    }
    now.save(journal_path);
    return now;
}

// The keeplist, the neuron plan and the imatrix, each checked against the opened source.
void open_inputs(SpliceResult& r, Opened& opened, const SpliceRequest& q, const Events& events) {
    const ShardSet& model = *opened.model;
    r.layout = build_moe_layout(model);
    if (!q.keeplist.empty()) {
        r.keeplist = KeepList::load(q.keeplist);
        r.keeplist_note =
            keeplist_applies_to(r.keeplist, q.keeplist, keeplist_source_of(model, r.layout), q.model);
        validate_keeplist(r.keeplist, r.layout, q.keeplist);
    }
    if (!q.neuron_plan.empty()) {
        r.width = load_width_cut(model, r.layout, q.neuron_plan, sha256_file(q.neuron_plan));
        if (q.keeplist.empty()) r.keeplist = keep_all_experts(r.layout);  // every expert, only narrower
    }
    for (const std::string& w : llama_cpp_limit_problems(r.keeplist.n_keep, r.layout.block_count))
        events.warn("the output will not load in llama.cpp: " + w);
    if (!q.imatrix_in.empty()) opened.imatrix.emplace(ImatrixFile::open(q.imatrix_in));
}

// Copy. One thread per output file, each writing its file front to back, is what disks like best;
// more threads than files cut files into 256 MiB pieces written in parallel (for fast SSD arrays).
void copy_outputs(SpliceResult& r, const SpliceRequest& q, const SpliceOptions& so, bool remote,
                  const Events& events) {
    const SplicePlan& plan = *r.opened->plan;
    CopyOptions co;
    co.method = q.method;
    co.durable = q.durable;
    const auto files = static_cast<unsigned>(plan.jobs().size());
    co.threads =
        q.threads ? q.threads : std::clamp(std::thread::hardware_concurrency(), 1u, std::min(files, 4u));
    if (co.threads > files) co.work_item_bytes = uint64_t{256} << 20;
    r.threads = co.threads;
    // From a URL the copy is resumable: each file front to back into a partial file that outlives a
    // failure, a checkpoint every 1/64 of the output (256 KiB to 64 MiB), the journal after each.
    const std::string journal_path = resume_journal_path(so.out_prefix);
    std::mutex journal_mu;
    ResumeJournal journal;
    if (remote) {
        journal = prepare_resume(r, q, so.keeplist_sha256, journal_path, events);
        for (const auto& f : journal.files) {
            co.partial_paths.push_back(f.partial);
            co.resume_from.push_back(f.done);
        }
        co.checkpoint_bytes = std::clamp<uint64_t>(plan.bytes_written() / 64, 256 << 10, uint64_t{64} << 20);
        co.on_durable = [&](size_t job, uint64_t bytes) {
            std::lock_guard<std::mutex> lock(journal_mu);
            journal.files[job].done = bytes;
            journal.save(journal_path);
        };
    }
    events.debug(fmt::format("copying {} with {} thread(s), method {}", human_bytes(plan.bytes_written()),
                             co.threads, copy_method_name(q.method)));
    if (!remote) {
        ProgressScope progress(events, "splice", plan.bytes_written());
        co.on_progress = progress.sink();
        r.copy = run_copy_jobs(plan.jobs(), plan.sources, co);
    } else {  // from a URL the network is the pace: the line counts bytes fetched against bytes to read
        ProgressScope progress(events, "fetch", plan.bytes_read());
        set_http_progress(progress.sink());
        try {
            r.copy = run_copy_jobs(plan.jobs(), plan.sources, co);
        } catch (...) {
            set_http_progress({});
            throw;
        }
        set_http_progress({});
        ::unlink(journal_path.c_str());  // complete: nothing to resume
    }
}

// -o names the shards: "out/Tiny" writes out/Tiny-00001-of-00002.gguf. A prefix with no name ("out/",
// ".", "out/.gguf") would write hidden files such as out/.gguf; it is refused rather than given a name
// gguf-reap would have to invent (the source's would make the pruned build look like the source).
void check_out_prefix(const std::string& prefix) {
    std::string name = base_name(prefix);
    if (name.ends_with(".gguf")) name.resize(name.size() - 5);
    if (!name.empty() && name != "." && name != "..") return;
    std::string dir = base_name(prefix) == ".gguf" ? parent_dir(prefix) : prefix;
    if (!dir.ends_with('/')) dir += '/';
    throw RequestError({SpliceOptions::kOut,
                        fmt::format(" {}: a directory, not a name for the shards; give one after it, e.g. "
                                    "{}NAME (NAME-00001-of-0000N.gguf, or NAME.gguf for one shard)",
                                    prefix, dir)});
}

}  // namespace

std::unique_ptr<SpliceResult> splice(const SpliceRequest& q, const Events& events) {
    if (q.imatrix_in.empty() != q.options.imatrix_out.empty())
        throw RequestError({ops::SpliceRequest::kImatrixIn, " and ", SpliceOptions::kImatrixOut,
                            " go together: give both or neither"});
    if (q.keeplist.empty() && q.neuron_plan.empty())
        throw RequestError({"splice needs ", ops::SpliceRequest::kKeeplist, ", ",
                            ops::SpliceRequest::kNeuronPlan, " or both: nothing to prune"});
    check_out_prefix(q.options.out_prefix);

    // Open the source, the keeplist and the neuron plan, and check that they fit each other.
    const HttpCounts http_before = http_counts();
    auto r = std::make_unique<SpliceResult>();
    auto opened = std::make_shared<Opened>();  // built here, published at once (read through r->opened)
    r->opened = opened;
    const ShardSet& model = opened->model.emplace(ShardSet::open(q.model));
    const bool remote = is_remote_path(q.model);
    const auto count_fetched = [&] {
        if (!remote) return;
        const HttpCounts now = http_counts();
        const RemoteFile* first = model.shards().front().file->remote();
        r->fetched = SpliceResult::Fetched{now.bytes - http_before.bytes,
                                           now.requests - http_before.requests,
                                           now.retries - http_before.retries,
                                           first ? first->hub_revision() : std::string(),
                                           {}};
        for (const auto& s : model.shards())
            if (const RemoteFile* f = s.file->remote())
                r->fetched->shards.push_back({f->path(), f->size(), f->hub_sha256()});
    };
    open_inputs(*r, *opened, q, events);
    // Plan every byte. Without a keeplist the recorded keeplist sha256 is that of no bytes at all
    // (docs/splice.md).
    SpliceOptions so = q.options;
    so.keeplist_sha256 = q.keeplist.empty() ? sha256_hex("", 0) : sha256_file(q.keeplist);
    if (so.tool_version.empty()) so.tool_version = std::string(GGUF_REAP_TOOL);
    if (r->width) so.width = &*r->width;
    const SplicePlan& plan = opened->plan.emplace(
        plan_splice(model, r->layout, r->keeplist, so, opened->imatrix ? &*opened->imatrix : nullptr));
    for (const CopyJob* job : plan.jobs()) r->outputs.push_back(job->path);
    r->bytes_written = plan.bytes_written();

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
    for (const Shard& s : model.shards()) inputs.push_back(s.path);
    for (const std::string* p : {&q.keeplist, &q.neuron_plan, &q.imatrix_in})
        if (!p->empty()) inputs.push_back(*p);
    preflight(*r, inputs, so.out_prefix, q.force);
    if (q.dry_run) {
        count_fetched();
        return r;
    }

    // A crashed earlier run may have left temporaries; they are garbage once their writer is gone.
    for (const CopyJob* job : plan.jobs())
        for (const std::string& p : remove_dead_temporaries(parent_dir(job->path), base_name(job->path))) {
            r->removed_temporaries.push_back(p);
            events.info(fmt::format("removed {} (left by an interrupted run)", p));
        }
    for (const std::string& p : r->replaced) events.info(fmt::format("replacing {}", p));

    copy_outputs(*r, q, so, remote, events);
    count_fetched();
    for (const std::string& p : r->stale_siblings) {
        ::unlink(p.c_str());
        events.info(fmt::format("removed {} (a shard of the previous set)", p));
    }

    // Read the result back.
    read_back(plan);
    return r;
}

}  // namespace gguf_reap::ops
