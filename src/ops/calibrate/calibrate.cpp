// calibrate: check → per text: hash, reuse or (count → cut → llama-imatrix) → calibrate.json after each
// text → rank's imatrix sanity check (gguf_reap/calibrate.h, docs/calibrate.md).
#include "gguf_reap/calibrate.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "format/imatrix.h"
#include "format/imatrix_log.h"
#include "gguf_reap/error.h"
#include "gguf_reap/rank.h"
#include "io/child_process.h"
#include "io/output_file.h"
#include "io/output_lock.h"
#include "io/paths.h"
#include "io/preflight.h"
#include "io/remote_url.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "model/model_identity.h"
#include "model/shard_set.h"
#include "model/vocab_text.h"
#include "ops/calibrate/calibrate_internal.h"
#include "services/llama_cpp/llama_runner.h"
#include "services/llama_cpp/llama_tokenize.h"
#include "services/llama_cpp/llama_tools.h"
#include "services/text_reader.h"

namespace gguf_reap {

namespace {

namespace fs = std::filesystem;
using calibrate_detail::kJsonName;

using llama_cpp::log_tail;

// Cuts tried around N tokens when the first N tokens, tokenized again alone, are not N tokens.
constexpr int kCutAttempts = 5;

struct Tools {
    std::string imatrix, tokenize;
};

struct Ctx {
    const CalibrateRequest& q;
    const Events& ev;
    Tools tools;
    llama_cpp::LlamaRunner runner;  // its log: DIR/.tool.log
};

void check_request(const CalibrateRequest& q) {
    if (q.texts.empty())
        throw RequestError({"calibrate: give at least one ", CalibrateRequest::kText, " NAME=FILE"});
    if (q.out_dir.empty())
        throw RequestError({"calibrate: give ", CalibrateRequest::kOut, " DIR, where the imatrices go"});
    if (q.ctx < 16 || q.ctx > (uint64_t{1} << 20))
        throw RequestError(
            {CalibrateRequest::kCtx, fmt::format(" {}: give a context of 16 to 1048576 tokens", q.ctx)});
    if (q.tokens && *q.tokens < 2 * q.ctx)
        throw RequestError({CalibrateRequest::kTokens,
                            fmt::format(" {}: {} needs at least 2 x ctx = {} tokens at ", *q.tokens,
                                        llama_tool_name(LlamaTool::imatrix), 2 * q.ctx),
                            CalibrateRequest::kCtx, fmt::format(" {}; give more tokens or a smaller ", q.ctx),
                            CalibrateRequest::kCtx});
    check_input_names(CalibrateRequest::kText, q.texts, "kind of text");
    q.llama_args.check(LlamaTool::imatrix);
    // llama.cpp's tools read local files only (an hf:// model in the cache is given as its copy there).
    if (is_remote_path(q.model))
        throw RequestError(
            {CalibrateRequest::kModel,
             fmt::format(" {}: llama.cpp's tools, which calibrate runs, read only local files; "
                         "download it first and give its path",
                         q.model)});
}

Tools find_tools(const CalibrateRequest& q) {
    const llama_cpp::LlamaBin where{q.llama_bin, q.llama_bin_env, q.path_env};
    return {llama_cpp::find_llama_tool(LlamaTool::imatrix, where),
            llama_cpp::find_llama_tool(LlamaTool::tokenize, where)};
}

// llama-tokenize's ids for `text`, given exactly as llama.cpp reads it (llama_cpp::as_file_reads).
std::vector<int32_t> tokenize(Ctx& c, std::string_view text, const std::string& what,
                              std::vector<std::string>* command) {
    const llama_cpp::TokenizeJob job{c.tools.tokenize, c.q.model, c.q.out_dir + "/.text.stdin", what, true};
    llama_cpp::Tokenized t = llama_cpp::tokenize(c.runner, job, text);
    if (command) *command = std::move(t.command);
    return std::move(t.ids);
}

// The text of the first `k` tokens of `ids`, which must be where `text` starts: a BOS the model adds is
// not in the text, and SentencePiece's leading space is not either.
std::optional<std::string> first_tokens(const VocabText& vocab, const std::vector<int32_t>& ids, size_t k,
                                        std::optional<int32_t> bos, std::string_view text) {
    std::string s;
    for (size_t i = 0; i < k; ++i) {
        const auto b = vocab.bytes(ids[i]);
        if (!b) return std::nullopt;
        if (i == 0 && bos && ids[0] == *bos && text.substr(0, b->size()) != *b) continue;
        s += *b;
    }
    if (!s.empty() && s[0] == ' ' && (text.empty() || text[0] != ' ')) s.erase(0, 1);
    if (text.substr(0, s.size()) != s) return std::nullopt;
    return s;
}

// With --tokens N: DIR/NAME.txt holding the text's first N tokens, cut where a token ends; the count
// llama-tokenize gives it alone must be N, so a cut whose last token would tokenize differently alone is
// moved by a token or two.
void cut_text(Ctx& c, const ShardSet& model, const std::string& text, CalibrateTextFacts& f,
              const std::vector<int32_t>& ids) {
    const auto n = static_cast<int64_t>(*c.q.tokens);
    const VocabText vocab = VocabText::of(model);
    std::optional<int32_t> bos;
    if (const Kv* k = model.find_kv("tokenizer.ggml.bos_token_id"))
        if (auto v = k->as_uint(); v && *v <= INT32_MAX) bos = static_cast<int32_t>(*v);
    const std::string_view read = llama_cpp::as_file_reads(text);
    for (int attempt = 0; attempt < kCutAttempts; ++attempt) {
        // N, N-1, N+1, N-2, N+2 tokens
        const int64_t delta = (attempt + 1) / 2 * (attempt % 2 == 1 ? -1 : 1);
        const int64_t k = n + delta;
        if (k < 1 || k > static_cast<int64_t>(ids.size())) continue;
        const auto prefix = first_tokens(vocab, ids, static_cast<size_t>(k), bos, read);
        if (!prefix)
            throw IoError(
                c.tools.tokenize,
                Message{CalibrateRequest::kText,
                        fmt::format(" {}={}: its first {} tokens do not spell the start of the text (a "
                                    "tokenizer gguf-reap cannot cut); give a text already cut, without ",
                                    f.name, f.path, k),
                        CalibrateRequest::kTokens});
        const auto again = tokenize(c, *prefix, fmt::format("the first {} tokens of {}", k, f.path), nullptr);
        if (static_cast<int64_t>(again.size()) != n) continue;
        // llama-imatrix's -f drops one trailing newline: the file ends in one more than the cut.
        const std::string body = *prefix + "\n";
        f.used_path = fmt::format("{}/{}.txt", c.q.out_dir, f.name);
        OutputFile out(f.used_path);
        out.write_at(0, body.data(), body.size());
        out.commit(false);
        f.used_sha256 = sha256_hex(body.data(), body.size());
        f.used_bytes = body.size();
        f.used_tokens = n;
        return;
    }
    throw IoError(c.tools.tokenize,
                  Message{CalibrateRequest::kText,
                          fmt::format(" {}={}: no cut near its first {} tokens tokenizes alone "
                                      "to {} tokens",
                                      f.name, f.path, n, n)});
}

// What decides an imatrix, hashed: a domain whose key and file are unchanged is not computed again.
std::string domain_key(const CalibrateRequest& q, const std::string& identity, const std::string& text_sha) {
    const std::string id = fmt::format(
        "gguf-reap calibrate v1\nsource {}\ntext {}\nctx {}\nbatch {}\ntokens {}\nthreads {}\nllama-args "
        "{}\n",
        identity, text_sha, q.ctx, q.ctx, q.tokens ? std::to_string(*q.tokens) : "all", q.threads,
        shell_join(q.llama_args.for_tool(LlamaTool::imatrix)));
    return sha256_hex(id.data(), id.size());
}

// llama-imatrix records its -f argument in the imatrix it writes (imatrix.datasets): the path as the user
// spelled it would make other bytes of the same text from another directory, or spelled absolute. It
// runs instead in DIR/.imatrix-run, where NAME.txt links to the text, with -f NAME.txt: an imatrix
// depends on the text's content and name, the model and the settings, never on a path (issue 40).
constexpr std::string_view kRunDir = ".imatrix-run";

class RunDir {
  public:
    RunDir(const std::string& out_dir, const CalibrateTextFacts& f)
        : dir_(fs::path(out_dir) / kRunDir), text_(f.name + ".txt") {
        std::error_code ec;
        fs::remove_all(dir_, ec);
        if (!fs::create_directory(dir_, ec))
            throw IoError(
                dir_.string(),
                fmt::format("cannot make {}'s working directory", llama_tool_name(LlamaTool::imatrix)),
                ec.value());
        fs::create_symlink(fs::absolute(f.used_path), dir_ / text_, ec);
        if (ec) throw IoError((dir_ / text_).string(), "cannot link the text there", ec.value());
    }
    ~RunDir() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    RunDir(const RunDir&) = delete;
    RunDir& operator=(const RunDir&) = delete;
    std::string dir() const { return dir_.string(); }

  private:
    fs::path dir_;
    std::string text_;
};

// llama-imatrix's command in RunDir: -f NAME.txt there, the model and `out` absolute.
std::vector<std::string> imatrix_command(const Ctx& c, const CalibrateTextFacts& f, const std::string& out) {
    const auto abs = [](const std::string& p) { return fs::absolute(p).lexically_normal().string(); };
    const llama_cpp::ImatrixJob job{c.tools.imatrix, abs(c.q.model), f.name + ".txt", c.q.ctx, c.q.threads};
    return llama_cpp::imatrix_command(job, abs(out), c.q.llama_args);
}

// llama-imatrix on one text, into DIR/NAME.imatrix.gguf (its log beside it, DIR/NAME.imatrix.log).
void compute(Ctx& c, CalibrateTextFacts& f, size_t index, size_t count) {
    OutputFile im(f.imatrix);
    OutputFile log(fmt::format("{}/{}.imatrix.log", c.q.out_dir, f.name));
    const RunDir run(c.q.out_dir, f);
    const auto argv = imatrix_command(c, f, im.temp_path());
    f.command = imatrix_command(c, f, f.imatrix);
    const std::string label = fmt::format("{} ({}/{})", f.name, index + 1, count);
    const char* tool = llama_tool_name(LlamaTool::imatrix);
    c.ev.info(fmt::format("{}: {} over {} chunks of {} tokens", label, tool, f.chunks, c.q.ctx));
    const llama_cpp::LlamaProgress progress{label, f.chunks, imatrix_chunks_done};
    const auto start = std::chrono::steady_clock::now();
    auto [text, e] = c.runner.try_run(argv, log.temp_path(), &progress, run.dir());
    f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const ImatrixLog parsed = parse_imatrix_log(text);
    if (parsed.too_few_tokens)
        throw RequestError({CalibrateRequest::kText,
                            fmt::format(" {}={}: {} needs at least {} tokens at ", f.name, f.path, tool,
                                        parsed.too_few_tokens->needed),
                            CalibrateRequest::kCtx,
                            fmt::format(" {}; it read {}", c.q.ctx, parsed.too_few_tokens->have)});
    if (!e.ok())
        throw IoError(c.tools.imatrix, fmt::format("{} on {} failed ({}); its last lines:\n{}", tool, f.name,
                                                   e.describe(), log_tail(text)));
    // The file, not the log (whose last lines the logger may lose), says whether the run finished.
    std::optional<ImatrixFile> file;
    std::string why;
    try {
        if (detect_imatrix(im.temp_path()) == ImatrixKind::kGguf) file = ImatrixFile::open(im.temp_path());
    } catch (const Error& err) {
        why = err.what();
    }
    if (!file || file->chunk_count() != static_cast<uint64_t>(f.chunks))
        throw IoError(
            c.tools.imatrix,
            fmt::format("{} on {} exited 0 but wrote {} (expected a GGUF imatrix over {} chunks){}; its last "
                        "lines:\n{}",
                        tool, f.name,
                        !file ? std::string("no GGUF imatrix")
                              : fmt::format("an imatrix over {} chunks", file->chunk_count().value_or(0)),
                        f.chunks, why.empty() ? "" : ": " + why, log_tail(text)));
    f.ppl = parsed.ppl;
    f.imatrix_sha256 = sha256_file(im.temp_path());
    log.write_at(0, text.data(), text.size());
    log.commit(false);
    im.commit();
}

// The previous calibrate.json in DIR, when there is one this version wrote: its texts by name.
std::map<std::string, CalibrateTextFacts> previous_run(const Ctx& c) {
    std::map<std::string, CalibrateTextFacts> out;
    const std::string path = c.q.out_dir + "/" + std::string(kJsonName);
    std::error_code ec;
    if (!fs::exists(path, ec)) return out;
    try {
        for (CalibrateTextFacts& t : calibrate_detail::read_texts(path)) out.emplace(t.name, std::move(t));
    } catch (const Error& e) {
        c.ev.warn(fmt::format("{}: not read, every text is computed again: {}", path, e.what()));
        out.clear();
    }
    return out;
}

// A text of an earlier run that can stand: same key, its imatrix unchanged since.
bool reuse(const std::map<std::string, CalibrateTextFacts>& prev, CalibrateTextFacts& f) {
    const auto it = prev.find(f.name);
    // calibrate.json records its paths relative to its directory, DIR (calibrate_json): the imatrix as
    // NAME.imatrix.gguf, a cut text as NAME.txt.
    if (it == prev.end() || it->second.key != f.key || base_name(it->second.imatrix) != base_name(f.imatrix))
        return false;
    std::error_code ec;
    if (!fs::is_regular_file(f.imatrix, ec)) return false;
    const bool cut = it->second.used_sha256 != it->second.sha256;
    const std::string used = (fs::path(f.imatrix).parent_path() / it->second.used_path).string();
    if (cut && (!fs::is_regular_file(used, ec) || sha256_file(used) != it->second.used_sha256)) return false;
    if (sha256_file(f.imatrix) != it->second.imatrix_sha256) return false;
    const std::string path = f.path, imatrix = f.imatrix;
    f = it->second;
    f.path = path;
    f.imatrix = imatrix;
    f.used_path = cut ? used : path;
    f.cached = true;
    return true;
}

// Nothing calibrate writes may be one of its inputs (a text given as DIR/NAME.txt with --tokens).
void check_outputs(const CalibrateRequest& q) {
    std::vector<std::string> inputs{q.model};
    for (const TextInput& t : q.texts) inputs.push_back(t.path);
    for (const TextInput& t : q.texts)
        for (const std::string ext : {".imatrix.gguf", ".imatrix.log", ".txt"}) {
            if (ext == ".txt" && !q.tokens) continue;
            const std::string o = q.out_dir + "/" + t.name + ext;
            if (const std::string* in = same_file_as(o, inputs))
                throw RequestError(
                    {CalibrateRequest::kOut,
                     fmt::format(" {}: {} would be written, and it is an input of this calibrate ({}); give "
                                 "another ",
                                 q.out_dir, o, *in),
                     CalibrateRequest::kOut});
        }
}

// The result's facts of the model, the tools and the settings, before any text.
CalibrateResult describe(Ctx& c, const ShardSet& model) {
    const CalibrateRequest& q = c.q;
    CalibrateResult r;
    r.tool = q.tool_version;
    r.imatrix_path = c.tools.imatrix;
    r.tokenize_path = c.tools.tokenize;
    r.llama_args = q.llama_args.words;
    r.model = q.model;
    for (const Shard& s : model.shards()) r.model_shards.push_back(base_name(s.path));
    r.model_bytes = model.total_bytes();
    r.source_identity = source_identity(model);
    r.expert_count = model.arch_uint("expert_count").value_or(0);
    r.expert_used_count = model.arch_uint("expert_used_count").value_or(0);
    r.ctx = q.ctx;
    r.batch = q.ctx;
    r.tokens_requested = q.tokens;
    r.threads = q.threads;
    r.llama_build = c.runner.version(LlamaTool::imatrix, c.tools.imatrix);
    return r;
}

// One text hashed, then reused from an earlier run (same key, imatrix unchanged), or counted, checked
// against the token budget and cut to it.
CalibrateTextFacts prepare_text(Ctx& c, const ShardSet& model, const std::string& identity,
                                const std::map<std::string, CalibrateTextFacts>& prev, const TextInput& t) {
    const CalibrateRequest& q = c.q;
    LoadedText loaded = load_text(t);
    const std::string& text = loaded.bytes;
    CalibrateTextFacts f;
    static_cast<TextFacts&>(f) = std::move(loaded.facts);
    f.key = domain_key(q, identity, f.sha256);
    f.imatrix = fmt::format("{}/{}.imatrix.gguf", q.out_dir, t.name);
    if (reuse(prev, f)) return f;
    const auto ids = tokenize(c, llama_cpp::as_file_reads(text), t.path, &f.tokenize_command);
    f.tokens = static_cast<int64_t>(ids.size());
    if (q.tokens && f.tokens < static_cast<int64_t>(*q.tokens))
        throw RequestError(
            {CalibrateRequest::kText, fmt::format(" {}={}: {} tokens, fewer than ", t.name, t.path, f.tokens),
             CalibrateRequest::kTokens, fmt::format(" {}; give a longer text or a smaller ", *q.tokens),
             CalibrateRequest::kTokens});
    if (!q.tokens && f.tokens < static_cast<int64_t>(2 * q.ctx))
        throw RequestError(
            {CalibrateRequest::kText,
             fmt::format(" {}={}: {} tokens, too short for {} at ", t.name, t.path, f.tokens,
                         llama_tool_name(LlamaTool::imatrix)),
             CalibrateRequest::kCtx,
             fmt::format(" {} (it needs at least 2 x ctx = {}); give a longer text or a smaller ", q.ctx,
                         2 * q.ctx),
             CalibrateRequest::kCtx});
    if (q.tokens) {
        cut_text(c, model, text, f, ids);
    } else {
        f.used_path = t.path;
        f.used_sha256 = f.sha256;
        f.used_bytes = f.bytes;
        f.used_tokens = f.tokens;
    }
    f.chunks = f.used_tokens / static_cast<int64_t>(q.ctx);
    return f;
}

void write_json(const CalibrateResult& r, const std::string& dir, bool complete) {
    nlohmann::ordered_json j = calibrate_json(r, dir + "/" + std::string(kJsonName));
    j["complete"] = complete;
    const std::string text = j.dump(2) + "\n";
    OutputFile out(dir + "/" + std::string(kJsonName));
    out.write_at(0, text.data(), text.size());
    out.commit();
}

// rank's input sanity check (ops::imatrix_sanity) over the imatrices just written.
std::vector<SanityProblem> sanity(const CalibrateRequest& q, const CalibrateResult& r) {
    std::vector<DomainSpec> imatrices;
    for (const CalibrateTextFacts& t : r.texts) imatrices.push_back({t.name, t.imatrix});
    return ops::imatrix_sanity(q.model, imatrices);
}

}  // namespace

namespace ops {

CalibrateResult calibrate(const CalibrateRequest& q, const Events& ev) {
    // Options, names and tools first, so that a typo fails before anything is opened.
    check_request(q);
    Ctx c{q, ev, find_tools(q), llama_cpp::LlamaRunner(q.out_dir + "/.tool.log", ev)};
    // Made now, and taken away again if the run is refused before its first llama-imatrix run.
    MadeDirectory made(q.out_dir);
    OutputLock lock(q.out_dir + "/" + std::string(kJsonName));
    // A killed earlier run's temporaries (its .text.stdin, a half-written imatrix): garbage once their
    // writer is gone, as splice's are.
    for (const std::string& p : remove_dead_temporaries(q.out_dir))
        ev.info(fmt::format("removed {} (left by an interrupted run)", p));
    std::error_code ec;
    if (const fs::path run = fs::path(q.out_dir) / kRunDir; fs::exists(fs::symlink_status(run, ec))) {
        fs::remove_all(run, ec);
        ev.info(fmt::format("removed {} (left by an interrupted run)", run.string()));
    }
    check_outputs(q);

    // The model, as eval identifies it.
    const ShardSet model = ShardSet::open(q.model);
    CalibrateResult r = describe(c, model);

    // Per text, before any llama-imatrix run: reused when an earlier run made it with the same key, else
    // counted, checked and cut, so that a text too short is refused before hours of compute.
    const auto prev = previous_run(c);
    std::vector<CalibrateTextFacts> todo;
    for (const TextInput& t : q.texts) todo.push_back(prepare_text(c, model, r.source_identity, prev, t));

    // Then llama-imatrix per text not reused; calibrate.json after each, so a rerun resumes.
    made.keep();
    bool computed = false;
    for (size_t i = 0; i < todo.size(); ++i) {
        CalibrateTextFacts& f = todo[i];
        if (f.cached) {
            ev.info(fmt::format("{}: cached, {}", f.name, f.imatrix));
            continue;
        }
        compute(c, f, i, todo.size());
        computed = true;
        // What is done so far, and what later texts reuse, survives an interrupt.
        CalibrateResult partial = r;
        for (const CalibrateTextFacts& t : todo)
            if (t.cached || !t.imatrix_sha256.empty()) partial.texts.push_back(t);
        write_json(partial, q.out_dir, false);
    }
    r.texts = std::move(todo);

    // Every file checked as rank checks it; calibrate.json rewritten unless nothing changed.
    r.sanity = sanity(q, r);
    if (computed || prev.size() != r.texts.size() || !calibrate_detail::was_complete(q.out_dir)) {
        write_json(r, q.out_dir, true);
        r.json_written = q.out_dir + "/" + std::string(kJsonName);
    }
    return r;
}

}  // namespace ops

}  // namespace gguf_reap
