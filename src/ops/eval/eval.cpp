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

namespace gguf_reap {

using namespace eval_detail;

namespace {

namespace fs = std::filesystem;

// Texts are read whole to be hashed.
constexpr uint64_t kTextLimit = uint64_t{1} << 30;
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
                        label, last_lines(text, kErrorLines)));
    }
    if (shape->chunks != chunks || shape->n_ctx != static_cast<int64_t>(c.q.ctx))
        throw IoError(
            c.tools.perplexity,
            fmt::format("{}: computed {} chunks of {} tokens where {} chunks of {} were asked for; "
                        "its last lines:\n{}",
                        label, shape->chunks, shape->n_ctx, chunks, c.q.ctx, last_lines(text, kErrorLines)));
}

int64_t count_rows(std::string_view log) {
    return static_cast<int64_t>(parse_kld_log(log).rows.size());
}

std::string llama_version(Ctx& c) {
    const std::string out =
        run_tool(c, {c.tools.perplexity, "--version"}, "", "llama-perplexity --version", 0, nullptr);
    return last_lines(out, 2);
}

// The text's token count with the source's vocabulary, as llama-perplexity sees it: its -f drops one
// trailing newline (common/arg.cpp), llama-tokenize -f does not, so llama-tokenize reads the same bytes
// from stdin.
int64_t count_tokens(Ctx& c, const EvalModel& src, const EvalText& t, const std::string& text,
                     std::vector<std::string>& command) {
    OutputFile in(c.cache_dir + "/text.stdin");
    const size_t n = !text.empty() && text.back() == '\n' ? text.size() - 1 : text.size();
    in.write_at(0, text.data(), n);
    command = {c.tools.tokenize, "-m",    src.path,       "--stdin",
               "--no-escape",    "--ids", "--show-count", "--log-disable"};
    append_llama_args(c, LlamaTool::tokenize, command);
    const std::string out =
        run_tool(c, command, in.temp_path(), fmt::format("llama-tokenize on {}", t.path), 0, nullptr);
    const auto count = parse_token_count(out);
    if (!count)
        throw IoError(c.tools.tokenize,
                      fmt::format("printed no \"Total number of tokens\" for {}; its last lines:\n{}", t.path,
                                  last_lines(out, kErrorLines)));
    return *count;
}

std::vector<std::string> common_args(const Ctx& c, const std::string& model, const std::string& text,
                                     int64_t chunks) {
    std::vector<std::string> a{c.tools.perplexity,
                               "-m",
                               model,
                               "-f",
                               text,
                               "-c",
                               std::to_string(c.q.ctx),
                               "-b",
                               std::to_string(kBatch),
                               "--chunks",
                               std::to_string(chunks),
                               "--no-escape"};
    if (c.q.threads > 0) {
        a.push_back("-t");
        a.push_back(std::to_string(c.q.threads));
    }
    return a;
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
    base.command = common_args(c, model.path, t.path, t.chunks);
    base.command.push_back("--kl-divergence-base");
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
                    {"the base logits of ", RequestField::kText,
                     fmt::format(" {} need {} ({} bytes) in {}, which has {} free; free some space "
                                 "or give ",
                                 t.name, human_bytes(base.bytes), base.bytes, c.cache_dir,
                                 human_bytes(free.available)),
                     RequestField::kCacheDir, " on a larger disk (or fewer ", RequestField::kChunks, ")"});
            c.ev.info(fmt::format("base logits of {} ({}): {} in {}", t.name, base_name(model.path),
                                  human_bytes(base.bytes), base.file));
            OutputFile logits(base.file);
            OutputFile log(entry + ".log");
            auto argv = base.command;
            argv.push_back(logits.temp_path());
            append_llama_args(c, LlamaTool::perplexity, argv);
            begin_run(c);
            const std::string text = run_tool(
                c, argv, "", fmt::format("base run on {} ({})", t.name, base_name(model.path)), t.chunks,
                [](std::string_view s) { return static_cast<int64_t>(std::count(s.begin(), s.end(), ']')); });
            const BaseLog b = parse_base_log(text);
            if (b.too_few_tokens)
                throw RequestError({RequestField::kText,
                                    fmt::format(" {}={}: llama-perplexity needs at least {} tokens at ",
                                                t.name, t.path, b.too_few_tokens->needed),
                                    RequestField::kCtx,
                                    fmt::format(" {}; the text has {}", c.q.ctx, b.too_few_tokens->have)});
            std::error_code ec;
            const uint64_t written = fs::file_size(logits.temp_path(), ec);
            // The final estimate may be lost with the logger's last lines (see kld_run); the KLD runs
            // print the base model's PPL again. The logits file is what must be whole.
            if (written != base.bytes)
                throw IoError(c.tools.perplexity,
                              fmt::format("the base run on {} ({}) wrote {} of {} bytes of logits; its last "
                                          "lines:\n{}",
                                          t.name, base_name(model.path), written, base.bytes,
                                          last_lines(text, kErrorLines)));
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
    base.command.push_back(base.file);
    append_llama_args(c, LlamaTool::perplexity, base.command);
    base.ppl = parse_base_log(read_log(entry + ".log")).ppl;
    return base;
}

// `out` on one text against `base`, the logits of the source or of the reference.
EvalRun kld_run(Ctx& c, const EvalModel& out, const EvalTextFacts& t, const EvalBase& base,
                std::string_view against) {
    EvalRun r;
    r.output = out.path;
    r.text = t.name;
    r.tokens = t.scored_tokens;
    r.command = common_args(c, out.path, t.path, t.chunks);
    r.command.insert(r.command.end(), {"--kl-divergence-base", base.file, "--kl-divergence"});
    append_llama_args(c, LlamaTool::perplexity, r.command);
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
        text = run_tool(c, r.command, "", label, t.chunks, count_rows);
        log = parse_kld_log(text);
        check_run_shape(c, label, log->shape, log->figures.has_value(), t.chunks, text);
        if (log->summary_complete) break;
        const bool all_rows = log->figures && log->figures->chunks == t.chunks;
        if (all_rows && !summary_expected) break;
        if (log->rows.empty()) break;  // it failed, rather than losing its tail
        if (attempt < kAttempts)
            c.ev.warn(
                fmt::format("{}: llama-perplexity's output lost its last lines ({} of {} chunk rows, {}); "
                            "running it again ({} of {})",
                            label, log->rows.size(), t.chunks, all_rows ? "summary incomplete" : "no summary",
                            attempt + 1, kAttempts));
    }
    const bool all_chunks = log->figures && (log->summary_complete || log->figures->chunks == t.chunks);
    if (!all_chunks)
        throw IoError(
            c.tools.perplexity,
            fmt::format("{}: printed {} of {} chunk rows and no complete summary; its last lines:\n{}", label,
                        log->rows.size(), t.chunks, last_lines(text, kErrorLines)));
    if (!log->summary_complete && summary_expected)
        c.ev.warn(
            fmt::format("{}: llama-perplexity's summary was incomplete in all {} runs; the figures are its "
                        "last chunk row's, and the percentiles it lost are unknown",
                        label, kAttempts));
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
    if (r.llama_build.empty())
        r.llama_build =
            last_lines(run_tool(c, {server, "--version"}, "", "llama-server --version", 0, nullptr), 2);
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

std::string default_cache_dir() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/gguf-reap/kld";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/gguf-reap/kld";
    return ".gguf-reap-cache";
}

}  // namespace

namespace ops {

EvalResult eval(const EvalRequest& q, const Events& ev) {
    // Options and tools first, so that a typo fails before any model is opened.
    check_request(q);
    if (!q.texts.empty()) q.llama_args.check(LlamaTool::perplexity);
    if (!q.smoke_prompt.empty()) q.llama_args.check(LlamaTool::completion);
    if (!q.panels.empty()) check_server_args(q.llama_args);
    Ctx c{q, ev, find_llama_tools(q), q.cache_dir.empty() ? default_cache_dir() : q.cache_dir, 0, 0, {}, {}};
    // The behaviour runs' server and panels, so that a missing server or a bad panel fails first too.
    const std::string server = q.panels.empty() ? std::string() : find_llama_server(q);
    std::vector<Panel> panels;
    for (const EvalPanel& p : q.panels) panels.push_back(read_panel(p));
    // The outputs before any work: locked against a second eval writing them, and created under their
    // temporary names, so that an unwritable or missing directory fails now, not after every run.
    std::optional<OutputLock> out_lock;
    std::unique_ptr<OutputFile> json_file, svg_file;
    if (!q.json_out.empty()) {
        out_lock.emplace(q.json_out);
        json_file = std::make_unique<OutputFile>(q.json_out);
        svg_file = std::make_unique<OutputFile>(svg_path_for(q.json_out));
    }
    std::error_code ec;
    fs::create_directories(c.cache_dir, ec);
    if (ec) throw IoError(c.cache_dir, "cannot create the cache directory", ec.value());

    // The models: every OUT must be a build of the source, the reference the source at another
    // quantisation.
    const EvalModel src = open_eval_model(q.source);
    const std::string& identity = src.identity;
    std::optional<EvalModel> ref;
    if (!q.reference.empty()) {
        ref.emplace(open_eval_model(q.reference));
        check_reference(src, *ref);
    }
    std::vector<EvalModel> outs;
    for (const std::string& o : q.outputs) {
        outs.push_back(open_eval_model(o));
        // The source given again (or a copy of it) would measure KLD 0 against itself: not a build.
        if (outs.back().identity == identity)
            throw UsageError(
                fmt::format("{}: this is the source {} itself (the same header bytes), not a build of "
                            "it; give the pruned builds as OUT",
                            o, q.source));
        check_same_source(src, outs.back());
    }
    EvalResult r;
    r.tool = q.tool_version;
    r.perplexity_path = c.tools.perplexity;
    r.llama_args = q.llama_args.words;
    if (!q.texts.empty()) r.llama_build = llama_version(c);
    r.source = q.source;
    r.source_shards = src.shard_names;
    r.source_bytes = src.bytes;
    r.source_expert_count = src.expert_count;
    r.source_identity = identity;
    r.source_main_type = main_type(src.set);
    if (ref) r.reference = EvalReferenceFacts{ref->facts(), ref->identity, main_type(ref->set)};
    r.ctx = q.ctx;
    r.batch = kBatch;
    r.chunks_requested = q.chunks;
    for (const EvalModel& o : outs) r.outputs.push_back(o.facts());

    // The texts: hashed, tokenized, long enough for one chunk.
    for (const EvalText& t : q.texts) {
        EvalTextFacts f;
        f.name = t.name;
        f.path = t.path;
        const std::string text = read_small_file(t.path, kTextLimit, "text");
        f.bytes = text.size();
        f.sha256 = sha256_hex(text.data(), text.size());
        f.tokens = count_tokens(c, src, t, text, f.tokenize_command);
        const auto need = static_cast<int64_t>(2 * q.ctx);
        if (f.tokens < need)
            throw RequestError(
                {RequestField::kText,
                 fmt::format(" {}={}: {} tokens, too short for one chunk at ", t.name, t.path, f.tokens),
                 RequestField::kCtx,
                 fmt::format(" {} (llama-perplexity needs at least 2 x ctx = {}); give a longer "
                             "text or a smaller ",
                             q.ctx, need),
                 RequestField::kCtx});
        f.chunks = f.tokens / static_cast<int64_t>(q.ctx);
        if (q.chunks) f.chunks = std::min<int64_t>(f.chunks, static_cast<int64_t>(*q.chunks));
        f.scored_tokens = f.chunks * static_cast<int64_t>(q.ctx - 1 - q.ctx / 2);
        r.texts.push_back(std::move(f));
    }

    // Per text, the source's logits once; then every OUT against them. With a reference, its logits
    // per text, then the source and every OUT against those.
    const size_t per_text = 1 + outs.size() + (ref ? 2 + outs.size() : 0);
    c.runs_total = static_cast<int64_t>(r.texts.size() * per_text);
    for (EvalTextFacts& t : r.texts) t.base = base_run(c, src, r.source_identity, t);
    for (const EvalModel& o : outs)
        for (const EvalTextFacts& t : r.texts) r.runs.push_back(kld_run(c, o, t, t.base, ""));
    if (ref) {
        for (EvalTextFacts& t : r.texts) t.reference_base = base_run(c, *ref, r.reference->identity, t);
        std::vector<const EvalModel*> against{&src};
        for (const EvalModel& o : outs) against.push_back(&o);
        for (const EvalModel* m : against)
            for (const EvalTextFacts& t : r.texts)
                r.reference_runs.push_back(kld_run(c, *m, t, *t.reference_base, " against the reference"));
    }
    if (!q.smoke_prompt.empty()) r.smoke = run_smoke(c, src, outs);
    std::unique_ptr<OutputFile> generations;
    if (!q.panels.empty()) generations = behaviour(c, server, panels, src, outs, r);

    // The report, written only when every run succeeded. Should that fail, the figures are still
    // returned (write_error), for the caller to show before it fails.
    if (!q.json_out.empty()) {
        try {
            const std::string svg = eval_svg(r);
            r.svg_sha256 = sha256_hex(svg.data(), svg.size());
            r.json_written = q.json_out;
            r.svg_written = svg_file->final_path();
            const std::string json = eval_json(r).dump(2) + "\n";
            json_file->write_at(0, json.data(), json.size());
            svg_file->write_at(0, svg.data(), svg.size());
            if (generations) generations->commit();
            svg_file->commit();
            json_file->commit();
        } catch (const IoError& e) {
            r.json_written.clear();
            r.svg_written.clear();
            r.write_error = e.what();
        }
    }
    return r;
}

}  // namespace ops

}  // namespace gguf_reap
