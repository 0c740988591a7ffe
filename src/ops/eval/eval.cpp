// eval: check → tokenize → base runs (cached) → KLD runs → smoke test (optional) → report (gguf_reap/eval.h,
// docs/eval.md).
#include "gguf_reap/eval.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "format/perplexity_log.h"
#include "gguf_reap/error.h"
#include "io/child_process.h"
#include "io/output_file.h"
#include "io/output_lock.h"
#include "io/paths.h"
#include "io/preflight.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "io/units.h"
#include "ops/eval/eval_behaviour.h"
#include "ops/eval/eval_internal.h"
#include "ops/eval/eval_report.h"
#include "services/eval_report.h"
#include "services/llama_cpp/llama_runner.h"
#include "services/llama_cpp/llama_tokenize.h"
#include "services/llama_cpp/llama_tools.h"
#include "services/text_reader.h"

namespace gguf_reap {

using namespace eval_detail;

namespace {

namespace fs = std::filesystem;
using llama_cpp::log_tail;

constexpr int kAttempts = 3;
// llama-perplexity prints a KLD run's summary only when it scored at least this many tokens
// (tools/perplexity/perplexity.cpp, kl_divergence: "if (kld.count < 100) return").
constexpr int64_t kSummaryTokens = 100;

// IoError unless llama-perplexity says it computes exactly the `chunks` chunks of ctx tokens asked for
// ("computing over N chunks, n_ctx=C"): figures over other chunks are not the ones asked for.
// A run that printed no figures at all failed, and is reported as such by the caller.
void check_run_shape(const Ctx& c, const std::string& label, const std::optional<PerplexityRunShape>& shape,
                     bool has_figures, int64_t chunks, std::string_view text) {
    if (!shape) {
        if (!has_figures) return;
        throw IoError(
            c.tools.perplexity,
            fmt::format("{}: printed figures but no \"computing over N chunks\" line; its last lines:\n{}",
                        label, log_tail(text)));
    }
    if (shape->chunks != chunks || shape->n_ctx != static_cast<int64_t>(c.q.ctx))
        throw IoError(c.tools.perplexity,
                      fmt::format("{}: computed {} chunks of {} tokens where {} chunks of {} were asked for; "
                                  "its last lines:\n{}",
                                  label, shape->chunks, shape->n_ctx, chunks, c.q.ctx, log_tail(text)));
}

int64_t count_rows(std::string_view log) {
    return static_cast<int64_t>(parse_kld_log(log).rows.size());
}

// A text hashed, its tokens counted with the source's vocabulary (as llama-perplexity's -f reads it),
// and long enough for one chunk.
EvalTextFacts measure_text(Ctx& c, const EvalModel& src, const TextInput& t) {
    const EvalRequest& q = c.q;
    LoadedText text = load_text(t);
    EvalTextFacts f;
    static_cast<TextFacts&>(f) = std::move(text.facts);
    const llama_cpp::TokenizeJob job{c.tools.tokenize, src.path, c.cache_dir + "/text.stdin", t.path, false};
    llama_cpp::Tokenized n = llama_cpp::tokenize(c.runner, job, llama_cpp::as_file_reads(text.bytes));
    f.tokens = n.count;
    f.tokenize_command = std::move(n.command);
    const auto need = static_cast<int64_t>(2 * q.ctx);
    if (f.tokens < need)
        throw RequestError(
            {EvalRequest::kText,
             fmt::format(" {}={}: {} tokens, too short for one chunk at ", t.name, t.path, f.tokens),
             EvalRequest::kCtx,
             fmt::format(" {} ({} needs at least 2 x ctx = {}); give a longer text or a smaller ", q.ctx,
                         llama_tool_name(LlamaTool::perplexity), need),
             EvalRequest::kCtx});
    f.chunks = f.tokens / static_cast<int64_t>(q.ctx);
    if (q.chunks) f.chunks = std::min<int64_t>(f.chunks, static_cast<int64_t>(*q.chunks));
    f.scored_tokens = f.chunks * static_cast<int64_t>(q.ctx - 1 - q.ctx / 2);
    return f;
}

llama_cpp::PerplexityJob perplexity_job(const Ctx& c, const std::string& model, const EvalTextFacts& t) {
    return {c.tools.perplexity, model, t.path, c.q.ctx, kBatch, t.chunks, c.q.threads};
}

// The key of a base run: what decides its logits. llama.cpp's arguments are part of it (logits from
// another backend differ in their last bits); without any, the key is what it was before --llama-args.
std::string cache_key(const std::string& identity, const EvalTextFacts& t, uint64_t ctx,
                      const std::vector<std::string>& llama_args) {
    std::string id = fmt::format("gguf-reap eval base v1\nsource {}\ntext {}\nctx {}\nchunks {}\nbatch {}\n",
                                 identity, t.sha256, ctx, t.chunks, kBatch);
    if (!llama_args.empty()) id += fmt::format("llama-args {}\n", shell_join(llama_args));
    return fmt::format("base-c{}-n{}-{}", ctx, t.chunks, sha256_hex(id.data(), id.size()).substr(0, 32));
}

// The base run of `model` on one text, or the cache entry an earlier eval made. The entry is written
// under a temporary name with its cache lock held, and renamed (its log first, then the logits) once
// llama-perplexity has written all of it.
EvalBase base_run(Ctx& c, const EvalModel& model, const std::string& identity, const EvalTextFacts& t) {
    EvalBase base;
    const std::string entry =
        c.cache_dir + "/" + cache_key(identity, t, c.q.ctx, c.q.llama_args.for_tool(LlamaTool::perplexity));
    base.file = entry + ".kld";
    base.bytes = base_file_bytes(model.n_vocab, c.q.ctx, static_cast<uint64_t>(t.chunks));
    const llama_cpp::PerplexityJob job = perplexity_job(c, model.path, t);
    base.command = llama_cpp::kld_base_command(job, base.file, c.q.llama_args);
    const auto cached = [&] {
        std::error_code ec;
        return fs::file_size(base.file, ec) == base.bytes && fs::exists(entry + ".log", ec);
    };
    if (!cached()) {
        OutputLock lock(entry);
        if (!cached()) {
            const FreeSpace free = free_space(c.cache_dir);
            if (free.available < base.bytes)
                throw RequestError(
                    {"the base logits of ", EvalRequest::kText,
                     fmt::format(" {} need {} ({} bytes) in {}, which has {} free; free some space "
                                 "or give ",
                                 t.name, human_bytes(base.bytes), base.bytes, c.cache_dir,
                                 human_bytes(free.available)),
                     EvalRequest::kCacheDir, " on a larger disk (or fewer ", EvalRequest::kChunks, ")"});
            c.ev.info(fmt::format("base logits of {} ({}): {} in {}", t.name, base_name(model.path),
                                  human_bytes(base.bytes), base.file));
            OutputFile logits(base.file);
            OutputFile log(entry + ".log");
            begin_run(c);
            const std::string text = run_counted(
                c, llama_cpp::kld_base_command(job, logits.temp_path(), c.q.llama_args),
                fmt::format("base run on {} ({})", t.name, base_name(model.path)), t.chunks,
                [](std::string_view s) { return static_cast<int64_t>(std::count(s.begin(), s.end(), ']')); });
            const BaseLog b = parse_base_log(text);
            if (b.too_few_tokens)
                throw RequestError(
                    {EvalRequest::kText,
                     fmt::format(" {}={}: {} needs at least {} tokens at ", t.name, t.path,
                                 llama_tool_name(LlamaTool::perplexity), b.too_few_tokens->needed),
                     EvalRequest::kCtx,
                     fmt::format(" {}; the text has {}", c.q.ctx, b.too_few_tokens->have)});
            std::error_code ec;
            const uint64_t written = fs::file_size(logits.temp_path(), ec);
            // The final estimate may be lost with the logger's last lines (see kld_run); the KLD runs
            // print the base model's PPL again. The logits file is what must be whole.
            if (written != base.bytes)
                throw IoError(
                    c.tools.perplexity,
                    fmt::format("the base run on {} ({}) wrote {} of {} bytes of logits; its last "
                                "lines:\n{}",
                                t.name, base_name(model.path), written, base.bytes, log_tail(text)));
            log.write_at(0, text.data(), text.size());
            log.commit(false);
            logits.commit(false);
        }
    } else {
        --c.runs_total;  // counted as a run in eval()
        base.cached = true;
        c.ev.info(
            fmt::format("base logits of {} ({}): cached, {}", t.name, base_name(model.path), base.file));
    }
    base.ppl = parse_base_log(llama_cpp::read_log(entry + ".log")).ppl;
    return base;
}

// `out` on one text against `base`, the logits of the source or of the reference.
EvalRun kld_run(Ctx& c, const EvalModel& out, const EvalTextFacts& t, const EvalBase& base,
                std::string_view against) {
    EvalRun r;
    r.output = out.path;
    r.text = t.name;
    r.tokens = t.scored_tokens;
    r.command = llama_cpp::kld_command(perplexity_job(c, out.path, t), base.file, c.q.llama_args);
    const std::string label = fmt::format("{} on {}{}", base_name(out.path), t.name, against);
    // llama.cpp's logger thread is leaked at exit (common/log.cpp, common_log_main), so the last lines
    // it queued may never be written: here some runs lost their last chunk rows or the summary's last
    // lines (the percentiles). The run is deterministic, so it is run again, up to kAttempts times in
    // all, until its summary is complete; after that, a run with every chunk row is taken from its last
    // row (its percentiles then stay unknown). A run too short for a summary (under kSummaryTokens
    // scored tokens) is complete with its rows.
    const bool summary_expected = t.scored_tokens >= kSummaryTokens;
    std::optional<KldLog> log;
    std::string text;
    for (int attempt = 1; attempt <= kAttempts; ++attempt) {
        if (attempt > 1) ++c.runs_total;
        begin_run(c);
        text = run_counted(c, r.command, label, t.chunks, count_rows);
        log = parse_kld_log(text);
        check_run_shape(c, label, log->shape, log->figures.has_value(), t.chunks, text);
        if (log->summary_complete) break;
        const bool all_rows = log->figures && log->figures->chunks == t.chunks;
        if (all_rows && !summary_expected) break;
        if (log->rows.empty()) break;  // it failed, rather than losing its tail
        if (attempt < kAttempts)
            c.ev.warn(
                fmt::format("{}: {}'s output lost its last lines ({} of {} chunk rows, {}); running it again "
                            "({} of {})",
                            label, llama_tool_name(LlamaTool::perplexity), log->rows.size(), t.chunks,
                            all_rows ? "summary incomplete" : "no summary", attempt + 1, kAttempts));
    }
    const bool all_chunks = log->figures && (log->summary_complete || log->figures->chunks == t.chunks);
    if (!all_chunks)
        throw IoError(
            c.tools.perplexity,
            fmt::format("{}: printed {} of {} chunk rows and no complete summary; its last lines:\n{}", label,
                        log->rows.size(), t.chunks, log_tail(text)));
    if (!log->summary_complete && summary_expected)
        c.ev.warn(fmt::format(
            "{}: {}'s summary was incomplete in all {} runs; the figures are its last chunk row's, "
            "and the percentiles it lost are unknown",
            label, llama_tool_name(LlamaTool::perplexity), kAttempts));
    r.figures = *log->figures;
    r.figures.chunks = t.chunks;
    if (!r.figures.ppl_source && base.ppl) r.figures.ppl_source = base.ppl;
    return r;
}

// The behaviour runs (--prompts) on panels read before anything ran; the generations file (with -o) is
// returned uncommitted.
std::unique_ptr<OutputFile> behaviour(Ctx& c, const std::string& server, const std::vector<Panel>& panels,
                                      const EvalModel& src, const std::vector<EvalModel>& outs,
                                      EvalResult& r) {
    for (const Panel& p : panels) r.panels.push_back(p.facts);
    r.server_path = server;
    r.gen_tokens = c.q.gen_tokens;
    r.parallel = c.q.parallel;
    r.chat = c.q.chat;
    r.temperatures = c.q.temperature_list();
    r.samples = static_cast<int64_t>(c.q.samples.value_or(1));
    r.seed = c.q.seed_value();
    if (r.llama_build.empty()) r.llama_build = c.runner.version(LlamaTool::server, server);
    std::unique_ptr<OutputFile> file;
    uint64_t at = 0;
    std::function<void(const std::string&)> write;
    if (!c.q.json_out.empty()) {
        file = std::make_unique<OutputFile>(generations_path_for(c.q.json_out));
        r.generations_written = file->final_path();
        write = [&](const std::string& line) {
            file->write_at(at, line.data(), line.size());
            at += line.size();
        };
    }
    run_behaviour(c, server, src, outs, panels, r, write);
    return file;
}

// The outputs, made before any work: their directory made when missing (and taken away again if the eval
// fails with nothing in it), locked against a second eval writing them, a killed earlier eval's
// temporaries of them removed, and created under their temporary names, so that an unwritable directory
// fails now, not after every run.
class ReportFiles {
  public:
    ReportFiles(const EvalRequest& q, const Events& ev) : out_(q.json_out) {
        if (out_.empty()) return;
        dir_.emplace(parent_dir(out_));
        lock_.emplace(out_);
        for (const std::string& o : {out_, svg_path_for(out_), generations_path_for(out_)})
            for (const std::string& p : remove_dead_temporaries(parent_dir(o), base_name(o)))
                ev.info(fmt::format("removed {} (left by an interrupted run)", p));
        json_ = std::make_unique<OutputFile>(out_);
        svg_ = std::make_unique<OutputFile>(svg_path_for(out_));
    }
    // eval.json, eval.svg and the generations, written only when every run succeeded. Should that fail,
    // the figures are still returned (write_error), for the caller to show before it fails.
    void write(EvalResult& r, OutputFile* generations) {
        if (out_.empty()) return;
        try {
            const std::string svg = eval_svg(r);
            r.svg_sha256 = sha256_hex(svg.data(), svg.size());
            r.json_written = out_;
            r.svg_written = svg_->final_path();
            const std::string json = eval_report_json(r).dump(2) + "\n";
            json_->write_at(0, json.data(), json.size());
            svg_->write_at(0, svg.data(), svg.size());
            if (generations) generations->commit();
            svg_->commit();
            json_->commit();
            dir_->keep();
        } catch (const IoError& e) {
            r.json_written.clear();
            r.svg_written.clear();
            r.write_error = e.what();
        }
    }

  private:
    std::string out_;
    std::optional<MadeDirectory> dir_;  // first made, last gone: after the lock and the temporaries
    std::optional<OutputLock> lock_;
    std::unique_ptr<OutputFile> json_, svg_;
};

// The models: every OUT must be a build of the source, the reference the source at another
// quantisation.
struct Models {
    EvalModel src;
    std::optional<EvalModel> ref;
    std::vector<EvalModel> outs;
};

Models open_models(const EvalRequest& q) {
    Models m{open_eval_model(q.source), std::nullopt, {}};
    if (!q.reference.empty()) {
        m.ref.emplace(open_eval_model(q.reference));
        check_reference(m.src, *m.ref);
    }
    for (const std::string& o : q.outputs) {
        m.outs.push_back(open_eval_model(o));
        // The source given again (or a copy of it) would measure KLD 0 against itself: not a build.
        if (m.outs.back().identity == m.src.identity)
            throw UsageError(
                fmt::format("{}: this is the source {} itself (the same header bytes), not a build of "
                            "it; give the pruned builds as OUT",
                            o, q.source));
        // The same build twice (one file, two spellings, two shards of one set, or a copy) would be
        // measured twice and shown as two builds.
        for (size_t i = 0; i + 1 < m.outs.size(); ++i)
            if (m.outs[i].identity == m.outs.back().identity)
                throw UsageError(fmt::format(
                    "{}: the same build as OUT {} (the same header bytes), given twice; give each build once",
                    o, q.outputs[i]));
        check_same_source(m.src, m.outs.back());
    }
    return m;
}

// The result's facts of the models and the settings, before any run.
EvalResult describe(Ctx& c, const Models& m) {
    const EvalRequest& q = c.q;
    EvalResult r;
    r.tool = q.tool_version;
    r.perplexity_path = c.tools.perplexity;
    r.llama_args = q.llama_args.words;
    if (!q.texts.empty()) r.llama_build = c.runner.version(LlamaTool::perplexity, c.tools.perplexity);
    r.source = q.source;
    r.source_shards = m.src.shard_names;
    r.source_bytes = m.src.bytes;
    r.source_expert_count = m.src.expert_count;
    r.source_identity = m.src.identity;
    r.source_main_type = main_type(m.src.set);
    if (m.ref) r.reference = EvalReferenceFacts{m.ref->facts(), m.ref->identity, main_type(m.ref->set)};
    r.ctx = q.ctx;
    r.batch = kBatch;
    r.chunks_requested = q.chunks;
    for (const EvalModel& o : m.outs) r.outputs.push_back(o.facts());
    return r;
}

// Per text, the source's logits once; then every OUT against them. With a reference, its logits per text,
// then the source and every OUT against those.
void kld_runs(Ctx& c, const Models& m, EvalResult& r) {
    const size_t per_text = 1 + m.outs.size() + (m.ref ? 2 + m.outs.size() : 0);
    c.runs_total = static_cast<int64_t>(r.texts.size() * per_text);
    for (EvalTextFacts& t : r.texts) t.base = base_run(c, m.src, r.source_identity, t);
    for (const EvalModel& o : m.outs)
        for (const EvalTextFacts& t : r.texts) r.runs.push_back(kld_run(c, o, t, t.base, ""));
    if (!m.ref) return;
    for (EvalTextFacts& t : r.texts) t.reference_base = base_run(c, *m.ref, r.reference->identity, t);
    std::vector<const EvalModel*> against{&m.src};
    for (const EvalModel& o : m.outs) against.push_back(&o);
    for (const EvalModel* x : against)
        for (const EvalTextFacts& t : r.texts)
            r.reference_runs.push_back(kld_run(c, *x, t, *t.reference_base, " against the reference"));
}

}  // namespace

namespace ops {

EvalResult eval(const EvalRequest& q, const Events& ev) {
    // Options and tools first, so that a typo fails before any model is opened.
    check_request(q);
    if (!q.texts.empty()) q.llama_args.check(LlamaTool::perplexity);
    if (!q.smoke_prompt.empty()) q.llama_args.check(LlamaTool::completion);
    if (!q.panels.empty()) q.llama_args.check(LlamaTool::server);
    const std::string cache_dir = q.cache_dir.empty() ? std::string(".gguf-reap-cache") : q.cache_dir;
    Ctx c{q,  ev, find_llama_tools(q), cache_dir, llama_cpp::LlamaRunner(cache_dir + "/run.log", ev), 0, 0,
          {}, {}};
    // The behaviour runs' server and panels, so that a missing server or a bad panel fails first too.
    const std::string server = q.panels.empty() ? std::string() : find_llama_server(q);
    std::vector<Panel> panels;
    for (const EvalPanel& p : q.panels) {
        panels.push_back(read_panel(p));
        check_generations(q, panels.back());
    }
    // --calibration too: a file that is not a calibrate.json fails before any run.
    std::optional<EvalResult::Calibration> calibration;
    if (!q.calibration.empty())
        calibration = {q.calibration, sha256_file(q.calibration), read_calibration_texts(q.calibration)};
    // The outputs before any work, and the cache directory.
    ReportFiles files(q, ev);
    std::error_code ec;
    fs::create_directories(c.cache_dir, ec);
    if (ec) throw IoError(c.cache_dir, "cannot create the cache directory", ec.value());
    // A killed eval's temporaries in the cache (a half-written base file may be gigabytes): no eval
    // resumes from them, so a dead writer's are garbage.
    for (const std::string& p : remove_dead_temporaries(c.cache_dir))
        ev.info(fmt::format("removed {} (left by an interrupted run)", p));

    // The models, the texts, then the runs.
    const Models m = open_models(q);
    EvalResult r = describe(c, m);
    for (const TextInput& t : q.texts) r.texts.push_back(measure_text(c, m.src, t));
    // Held out or not, by sha256 (docs/eval.md, "Held-out text"); not known without --calibration.
    r.calibration = std::move(calibration);
    for (EvalTextFacts& t : r.texts)
        if (r.calibration) {
            const TextOrigin o = text_origin(r.calibration->texts, t.sha256);
            t.held_out = o.held_out;
            t.calibration_domain = o.domain;
        }
    kld_runs(c, m, r);
    if (!q.smoke_prompt.empty()) r.smoke = run_smoke(c, m.src, m.outs);
    std::unique_ptr<OutputFile> generations;
    if (!q.panels.empty()) generations = behaviour(c, server, panels, m.src, m.outs, r);
    files.write(r, generations.get());
    return r;
}

}  // namespace ops

}  // namespace gguf_reap
