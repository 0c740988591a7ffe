// The table of llama.cpp's tools (services/llama_cpp/llama_tools.h): binaries, the arguments gguf-reap
// writes, the command lines it builds of them, and what --llama-args may not say. Spellings are llama.cpp
// 34af94cd9's --help.
#include "services/llama_cpp/llama_tools.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "gguf_reap/calibrate.h"
#include "gguf_reap/eval.h"

namespace gguf_reap::llama_cpp {

namespace {

// An argument gguf-reap writes on a llama.cpp command line (its spelling is the table's below).
enum class LlamaArg {
    kModel,           // -m FILE
    kFile,            // -f FILE: the text
    kPrompt,          // -p TEXT: the smoke test's prompt
    kStdin,           // --stdin: llama-tokenize reads the text there
    kNoEscape,        // --no-escape: every text verbatim
    kCtx,             // -c N
    kBatch,           // -b N
    kThreads,         // -t N
    kChunks,          // --chunks N
    kKldBase,         // --kl-divergence-base FILE
    kKld,             // --kl-divergence
    kOutput,          // -o FILE
    kOutputFormat,    // --output-format gguf
    kPredict,         // -n N
    kTemp,            // --temp 0
    kTopK,            // --top-k 1
    kSeed,            // -s 1
    kNoConversation,  // -no-cnv
    kNoWarmup,        // --no-warmup
    kVerbosePrompt,   // --verbose-prompt: the prompt's token count in the log
    kPromptCache,     // --prompt-cache FILE: the session file the generated ids are read from
    kPromptCacheAll,  // --prompt-cache-all
    kHost,            // --host 127.0.0.1
    kPort,            // --port N
    kSlots,           // -np N
    kNoWebui,         // --no-webui
    kCorsOrigins,     // --cors-origins localhost
    kJinja,           // --jinja: with a chat line in a panel (docs/eval.md, "Chat and tools")
    kIds,             // --ids
    kShowCount,       // --show-count
    kLogDisable,      // --log-disable
    kVersion,         // --version
};

// Whom a refusal applies to: every tool (the argument means the same for all of them: the model, the
// text, where the output goes), or only the tools whose row lists it.
enum class Reach { kEveryTool, kItsTools };

// An argument gguf-reap writes: its spelling, llama.cpp's other options that set the same thing (refused
// with it), whom the refusal reaches, and what the user does instead.
struct ArgRow {
    LlamaArg arg;
    std::string_view spelling;
    std::vector<std::string_view> same;
    Reach reach;
    Refusal refusal;
};

// Options gguf-reap does not write but refuses: a mode of the tool it cannot follow.
struct RefusedRow {
    std::vector<std::string_view> options;
    Reach reach;
    Refusal refusal;
};

struct ToolRow {
    LlamaTool tool;
    std::string_view binary;
    std::vector<LlamaArg> writes;
    std::vector<RefusedRow> refuses;
};

using A = LlamaArg;
constexpr Reach kEvery = Reach::kEveryTool;
constexpr Reach kIts = Reach::kItsTools;

const std::vector<ArgRow>& arg_rows() {
    static const Refusal text{{"gguf-reap gives the text (-f, or -p for the smoke test) itself"}};
    static const Refusal output{{"gguf-reap names the output file itself"}};
    static const Refusal kld{{"gguf-reap runs the KL-divergence passes itself"}};
    static const Refusal greedy{
        {"the smoke test sets its greedy generation itself (give ", EvalRequest::kSmokeTokens, " N)"}};
    static const Refusal loopback{{"gguf-reap starts llama-server on 127.0.0.1 itself"}};
    static const Refusal jinja{
        {"eval starts llama-server with --jinja itself when a panel holds a chat line"}};
    static const Refusal counting{{"gguf-reap runs llama-tokenize only to count tokens"}};
    static const std::vector<ArgRow> rows{
        {A::kModel,
         "-m",
         {"--model", "-mu", "--model-url", "-dr", "--docker-repo", "-hf", "-hfr", "--hf-repo", "-hff",
          "--hf-file"},
         kEvery,
         {{"gguf-reap gives the model (-m) itself"}}},
        {A::kFile, "-f", {"--file", "-bf", "--binary-file"}, kEvery, text},
        {A::kPrompt, "-p", {"--prompt"}, kEvery, text},
        {A::kStdin, "--stdin", {}, kEvery, text},
        {A::kNoEscape,
         "--no-escape",
         {"-e", "--escape"},
         kEvery,
         {{"gguf-reap feeds every text verbatim (--no-escape)"}}},
        {A::kCtx, "-c", {"--ctx-size"}, kEvery, {{"give gguf-reap's ", EvalRequest::kCtx, " N instead"}}},
        {A::kBatch, "-b", {"--batch-size"}, kEvery, {{"gguf-reap sets the batch (-b) itself"}}},
        {A::kThreads,
         "-t",
         {"--threads"},
         kEvery,
         {{"give gguf-reap's ", EvalRequest::kThreads, " N instead"}}},
        {A::kChunks,
         "--chunks",
         {"--chunk", "--from-chunk"},
         kEvery,
         {{"gguf-reap sets the chunks itself (eval ", EvalRequest::kChunks, " N, calibrate ",
           CalibrateRequest::kTokens, " N)"}}},
        {A::kKldBase, "--kl-divergence-base", {"--save-all-logits"}, kEvery, kld},
        {A::kKld, "--kl-divergence", {}, kEvery, kld},
        {A::kOutput, "-o", {"--output", "--output-file"}, kEvery, output},
        {A::kOutputFormat, "--output-format", {}, kEvery, output},
        {A::kVersion,
         "--version",
         {"-h", "--help", "--usage", "--completion-bash", "-cl", "--cache-list", "--list-devices"},
         kEvery,
         {{"it makes llama.cpp print and exit"}}},
        {A::kLogDisable,
         "--log-disable",
         {"--log-file", "--log-colors", "--log-prefix", "--no-log-prefix", "--log-timestamps",
          "--no-log-timestamps", "-lv", "--verbosity", "--log-verbosity"},
         kEvery,
         {{"gguf-reap reads llama.cpp's log as llama.cpp prints it by default"}}},
        // llama-completion's greedy smoke test.
        {A::kPredict, "-n", {"--predict", "--n-predict"}, kIts, greedy},
        {A::kTemp, "--temp", {}, kIts, greedy},
        {A::kTopK, "--top-k", {}, kIts, greedy},
        {A::kSeed, "-s", {"--seed"}, kIts, greedy},
        {A::kNoConversation,
         "-no-cnv",
         {"--no-conversation", "-cnv", "--conversation", "-i", "--interactive", "-if", "--interactive-first",
          "-sys", "--system-prompt", "-sysf", "--system-prompt-file"},
         kIts,
         greedy},
        {A::kNoWarmup, "--no-warmup", {"--warmup"}, kIts, greedy},
        {A::kVerbosePrompt, "--verbose-prompt", {}, kIts, greedy},
        {A::kPromptCache, "--prompt-cache", {"--prompt-cache-ro"}, kIts, greedy},
        {A::kPromptCacheAll, "--prompt-cache-all", {}, kIts, greedy},
        // llama-server for the behaviour runs.
        {A::kHost, "--host", {}, kIts, loopback},
        {A::kPort, "--port", {}, kIts, loopback},
        {A::kNoWebui, "--no-webui", {"--webui"}, kIts, loopback},
        {A::kCorsOrigins, "--cors-origins", {}, kIts, loopback},
        {A::kJinja, "--jinja", {}, kIts, jinja},
        {A::kSlots,
         "-np",
         {"--parallel"},
         kIts,
         {{"gguf-reap sets llama-server's slots itself; give ", EvalRequest::kParallel, " K"}, true}},
        // llama-tokenize, which takes no --llama-args at all (LlamaArgs::for_tool).
        {A::kIds, "--ids", {}, kIts, counting},
        {A::kShowCount, "--show-count", {}, kIts, counting},
    };
    return rows;
}

const std::vector<ToolRow>& tool_rows() {
    static const std::vector<ToolRow> rows{
        {LlamaTool::perplexity,
         "llama-perplexity",
         {A::kModel, A::kFile, A::kCtx, A::kBatch, A::kChunks, A::kNoEscape, A::kThreads, A::kKldBase,
          A::kKld, A::kVersion},
         {{{"--hellaswag", "--hellaswag-tasks", "--winogrande", "--winogrande-tasks", "--multiple-choice",
            "--multiple-choice-tasks", "--ppl-stride", "--ppl-output-type"},
           kIts,
           {{"eval runs llama-perplexity's KL-divergence mode, not another"}}}}},
        {LlamaTool::imatrix,
         "llama-imatrix",
         {A::kModel, A::kFile, A::kCtx, A::kBatch, A::kNoEscape, A::kOutputFormat, A::kOutput, A::kThreads,
          A::kVersion},
         {{{"--ppl", "--no-ppl", "--save-frequency", "-ofreq", "--output-frequency", "--show-statistics",
            "--parse-special"},
           kIts,
           {{"calibrate sets how llama-imatrix runs and saves itself"}}},
          {{"--in-file"}, kEvery, {{"calibrate computes each imatrix from its own text alone"}}}}},
        {LlamaTool::completion,
         "llama-completion",
         {A::kModel, A::kPrompt, A::kPredict, A::kCtx, A::kTemp, A::kTopK, A::kSeed, A::kNoConversation,
          A::kNoWarmup, A::kNoEscape, A::kVerbosePrompt, A::kPromptCache, A::kPromptCacheAll, A::kThreads},
         {}},
        {LlamaTool::server,
         "llama-server",
         {A::kModel, A::kHost, A::kPort, A::kSlots, A::kCtx, A::kNoWebui, A::kCorsOrigins, A::kJinja,
          A::kThreads, A::kVersion},
         {{{"-n", "--predict", "--n-predict"},
           kIts,
           {{"each request sets its length; give ", EvalRequest::kGenTokens, " N"}, true}}}},
        {LlamaTool::tokenize,
         "llama-tokenize",
         {A::kModel, A::kStdin, A::kNoEscape, A::kIds, A::kShowCount, A::kLogDisable},
         {}},
        // Named in the card's recipes and in advice; gguf-reap runs neither.
        {LlamaTool::cli, "llama-cli", {}, {}},
        {LlamaTool::quantize, "llama-quantize", {}, {}},
    };
    return rows;
}

const ArgRow& row(LlamaArg arg) {
    for (const ArgRow& r : arg_rows())
        if (r.arg == arg) return r;
    throw std::logic_error("llama_cpp: an argument with no row in the table");
}

const ToolRow& row(LlamaTool tool) {
    for (const ToolRow& r : tool_rows())
        if (r.tool == tool) return r;
    throw std::logic_error("llama_cpp: a tool with no row in the table");
}

bool writes(const ToolRow& t, LlamaArg arg) {
    return std::find(t.writes.begin(), t.writes.end(), arg) != t.writes.end();
}

using RefusalMap = std::map<std::string_view, const Refusal*, std::less<>>;

// Per tool, every option it refuses, derived from the rows above.
const std::map<LlamaTool, RefusalMap>& refusals() {
    static const auto table = [] {
        std::map<LlamaTool, RefusalMap> m;
        const auto put = [&](RefusalMap& into, std::string_view option, const Refusal& why) {
            const auto [at, fresh] = into.emplace(option, &why);
            if (!fresh && at->second != &why)
                throw std::logic_error(fmt::format("llama_cpp: {} is refused for two reasons", option));
        };
        for (const ToolRow& t : tool_rows()) {
            RefusalMap& mine = m[t.tool];
            for (const ToolRow& u : tool_rows()) {
                for (const LlamaArg a : u.writes) {
                    const ArgRow& r = row(a);
                    if (r.reach != kEvery && u.tool != t.tool) continue;
                    put(mine, r.spelling, r.refusal);
                    for (std::string_view s : r.same) put(mine, s, r.refusal);
                }
                for (const RefusedRow& r : u.refuses)
                    if (r.reach == kEvery || u.tool == t.tool)
                        for (std::string_view s : r.options) put(mine, s, r.refusal);
            }
        }
        return m;
    }();
    return table;
}

std::string_view spelling(LlamaArg arg) {
    return row(arg).spelling;
}

// One command line of a tool, gguf-reap's own arguments first, then the user's --llama-args that tool
// takes. add() throws std::logic_error for an argument the tool's row does not list: the table above is
// the one place a new argument is declared (and so refused in --llama-args).
class LlamaCommand {
  public:
    LlamaCommand(LlamaTool tool, std::string binary) : tool_(tool) { argv_.push_back(std::move(binary)); }
    LlamaCommand& add(LlamaArg arg) {
        if (!writes(row(tool_), arg))
            throw std::logic_error(fmt::format("llama_cpp: the table does not let gguf-reap write {} for {}",
                                               row(arg).spelling, llama_tool_name(tool_)));
        argv_.emplace_back(row(arg).spelling);
        return *this;
    }
    template <class V>
    LlamaCommand& add(LlamaArg arg, const V& value) {
        add(arg);
        if constexpr (std::is_arithmetic_v<V>)
            argv_.push_back(std::to_string(value));
        else
            argv_.emplace_back(value);
        return *this;
    }
    LlamaCommand& add_if(bool given, LlamaArg arg) { return given ? add(arg) : *this; }
    // -t N when N > 0 (0 = llama.cpp's default).
    LlamaCommand& threads(uint64_t n) { return n > 0 ? add(LlamaArg::kThreads, n) : *this; }
    // The words of --llama-args that this tool takes, after everything else.
    std::vector<std::string> extra(const LlamaArgs& args) {
        const std::vector<std::string> words = args.for_tool(tool_);
        argv_.insert(argv_.end(), words.begin(), words.end());
        return argv_;
    }
    const std::vector<std::string>& argv() const { return argv_; }

  private:
    LlamaTool tool_;
    std::vector<std::string> argv_;
};

LlamaCommand perplexity(const PerplexityJob& j) {
    LlamaCommand c(LlamaTool::perplexity, j.binary);
    c.add(LlamaArg::kModel, j.model)
        .add(LlamaArg::kFile, j.text)
        .add(LlamaArg::kCtx, j.ctx)
        .add(LlamaArg::kBatch, j.batch)
        .add(LlamaArg::kChunks, j.chunks)
        .add(LlamaArg::kNoEscape)
        .threads(j.threads);
    return c;
}

}  // namespace

// --- the command lines --------------------------------------------------------------------------

std::vector<std::string> kld_base_command(const PerplexityJob& j, const std::string& logits,
                                          const LlamaArgs& extra) {
    return perplexity(j).add(LlamaArg::kKldBase, logits).extra(extra);
}

std::vector<std::string> kld_command(const PerplexityJob& j, const std::string& base,
                                     const LlamaArgs& extra) {
    return perplexity(j).add(LlamaArg::kKldBase, base).add(LlamaArg::kKld).extra(extra);
}

std::vector<std::string> imatrix_command(const ImatrixJob& j, const std::string& out,
                                         const LlamaArgs& extra) {
    return LlamaCommand(LlamaTool::imatrix, j.binary)
        .add(LlamaArg::kModel, j.model)
        .add(LlamaArg::kFile, j.text)
        .add(LlamaArg::kCtx, j.ctx)
        .add(LlamaArg::kBatch, j.ctx)
        .add(LlamaArg::kNoEscape)
        .add(LlamaArg::kOutputFormat, "gguf")
        .add(LlamaArg::kOutput, out)
        .threads(j.threads)
        .extra(extra);
}

std::vector<std::string> tokenize_command(const std::string& binary, const std::string& model) {
    return LlamaCommand(LlamaTool::tokenize, binary)
        .add(LlamaArg::kModel, model)
        .add(LlamaArg::kStdin)
        .add(LlamaArg::kNoEscape)
        .add(LlamaArg::kIds)
        .add(LlamaArg::kShowCount)
        .add(LlamaArg::kLogDisable)
        .argv();
}

std::vector<std::string> greedy_command(const GreedyJob& j, const std::string& session,
                                        const LlamaArgs& extra) {
    return LlamaCommand(LlamaTool::completion, j.binary)
        .add(LlamaArg::kModel, j.model)
        .add(LlamaArg::kPrompt, j.prompt)
        .add(LlamaArg::kPredict, j.tokens)
        .add(LlamaArg::kCtx, j.ctx)
        .add(LlamaArg::kTemp, "0")
        .add(LlamaArg::kTopK, "1")
        .add(LlamaArg::kSeed, "1")
        .add(LlamaArg::kNoConversation)
        .add(LlamaArg::kNoWarmup)
        .add(LlamaArg::kNoEscape)
        .add(LlamaArg::kVerbosePrompt)
        .add(LlamaArg::kPromptCache, session)
        .add(LlamaArg::kPromptCacheAll)
        .threads(j.threads)
        .extra(extra);
}

std::vector<std::string> server_command(const ServerJob& j, const LlamaArgs& extra) {
    return LlamaCommand(LlamaTool::server, j.binary)
        .add(LlamaArg::kModel, j.model)
        .add(LlamaArg::kHost, "127.0.0.1")
        .add(LlamaArg::kPort, j.port)
        .add(LlamaArg::kSlots, j.slots)
        .add(LlamaArg::kCtx, j.ctx)
        .add(LlamaArg::kNoWebui)
        .add(LlamaArg::kCorsOrigins, "localhost")
        .add_if(j.jinja, LlamaArg::kJinja)
        .threads(j.threads)
        .extra(extra);
}

std::vector<std::string> version_command(LlamaTool tool, const std::string& binary) {
    return LlamaCommand(tool, binary).add(LlamaArg::kVersion).argv();
}

// --- their words ----------------------------------------------------------------------------------

std::string greedy_words() {
    return fmt::format("{} {} 0", llama_tool_name(LlamaTool::completion), spelling(LlamaArg::kTemp));
}

std::string kld_base_words() {
    return fmt::format("{} {}", llama_tool_name(LlamaTool::perplexity), spelling(LlamaArg::kKldBase));
}

std::string kld_words() {
    return std::string(spelling(LlamaArg::kKld));
}

std::string session_option() {
    return std::string(spelling(LlamaArg::kPromptCache));
}

std::string version_words(LlamaTool tool) {
    return fmt::format("{} {}", llama_tool_name(tool), spelling(LlamaArg::kVersion));
}

std::string imatrix_gguf_words() {
    return fmt::format("{} {} gguf, the default since 2025-07", llama_tool_name(LlamaTool::imatrix),
                       spelling(LlamaArg::kOutputFormat));
}

std::string imatrix_merge_words() {
    return fmt::format("as {} merges files", llama_tool_name(LlamaTool::imatrix));
}

// --- the refusals -------------------------------------------------------------------------------

const Refusal* refusal(LlamaTool tool, std::string_view option) {
    const auto t = refusals().find(tool);
    if (t == refusals().end()) return nullptr;
    const auto it = t->second.find(option);
    return it == t->second.end() ? nullptr : it->second;
}

}  // namespace gguf_reap::llama_cpp

namespace gguf_reap {

const char* llama_tool_name(LlamaTool tool) {
    return llama_cpp::row(tool).binary.data();  // the table's literals end in '\0'
}

}  // namespace gguf_reap
