// eval's checks of its inputs before anything runs (gguf_reap/eval.h).
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "gguf_reap/error.h"
#include "io/checked.h"
#include "io/child_process.h"
#include "io/paths.h"
#include "io/preflight.h"
#include "io/remote_url.h"
#include "io/sha256.h"
#include "model/provenance.h"
#include "ops/eval/eval_behaviour.h"
#include "ops/eval/eval_internal.h"
#include "ops/eval/eval_report.h"

namespace gguf_reap::eval_detail {

void check_request(const EvalRequest& q) {
    if (q.outputs.empty()) throw UsageError("eval: give at least one pruned build (OUT)");
    if (q.texts.empty() && q.panels.empty())
        throw RequestError({"eval: give at least one ", EvalRequest::kText, " NAME=FILE or ",
                            EvalRequest::kPrompts, " NAME=FILE"});
    check_behaviour_request(q);
    if (q.ctx < 16 || q.ctx > (uint64_t{1} << 20))
        throw RequestError(
            {EvalRequest::kCtx, fmt::format(" {}: give a context of 16 to 1048576 tokens", q.ctx)});
    if (q.chunks && *q.chunks == 0) throw RequestError({EvalRequest::kChunks, " 0: give at least 1 chunk"});
    // llama.cpp's tools read local files only: a model at a URL would fail at its first run.
    const auto local = [](Message option, const std::string& path) {
        if (is_remote_path(path))
            throw RequestError(
                option + Message{fmt::format("{}: llama.cpp's tools, which eval runs on every model, "
                                             "read only local files; download it first and give its path",
                                             path)});
    };
    local({EvalRequest::kSource, " "}, q.source);
    local({EvalRequest::kReference, " "}, q.reference);
    for (const std::string& o : q.outputs) local({}, o);
    if (!q.reference.empty() && q.texts.empty())
        throw RequestError({EvalRequest::kReference, fmt::format(" {}: give ", q.reference),
                            EvalRequest::kText,
                            " NAME=FILE too; the reference is measured by KL divergence on texts"});
    if (q.smoke_tokens && q.smoke_prompt.empty())
        throw RequestError({EvalRequest::kSmokeTokens, " needs ", EvalRequest::kSmokePrompt,
                            " TEXT: the prompt the greedy tokens follow"});
    if (!q.smoke_prompt.empty()) {
        if (q.smoke_prompt.size() > kMaxSmokePromptBytes)
            throw RequestError(
                {EvalRequest::kSmokePrompt, fmt::format(": {} bytes; give a prompt of at most {} bytes",
                                                        q.smoke_prompt.size(), kMaxSmokePromptBytes)});
        const uint64_t n = q.smoke_token_count();
        if (n < 1 || n > kMaxSmokeTokens)
            throw RequestError(
                {EvalRequest::kSmokeTokens, fmt::format(" {}: give 1 to {} tokens", n, kMaxSmokeTokens)});
    }
    check_input_names(EvalRequest::kText, q.texts, "kind of text");
    if (q.json_out.empty()) return;
    std::vector<std::string> inputs{q.source};
    if (!q.reference.empty()) inputs.push_back(q.reference);
    inputs.insert(inputs.end(), q.outputs.begin(), q.outputs.end());
    for (const TextInput& t : q.texts) inputs.push_back(t.path);
    for (const EvalPanel& p : q.panels) inputs.push_back(p.path);
    // Only FILE.json: its plot is FILE.svg, which then belongs to no other eval's -o (eval.txt would write
    // eval.svg, the plot of eval.json).
    const std::string svg = svg_path_for(q.json_out);
    if (q.json_out.size() <= 5 || q.json_out.compare(q.json_out.size() - 5, 5, ".json") != 0 ||
        q.json_out.back() == '/')
        throw RequestError({EvalRequest::kOut,
                            fmt::format(" {}: name a .json file, e.g. eval.json (its plot is written beside "
                                        "it, eval.svg)",
                                        q.json_out)});
    for (const std::string& o : {q.json_out, svg, generations_path_for(q.json_out)})
        if (const std::string* in = same_file_as(o, inputs))
            throw RequestError({EvalRequest::kOut,
                                fmt::format(" {}: {} is an input of this eval ({})", q.json_out, o, *in)});
}

EvalModel open_eval_model(const std::string& path) {
    EvalModel m{path, ShardSet::open(path), {}, 0, 0, 0, {}};
    for (const Shard& s : m.set.shards()) m.shard_names.push_back(base_name(s.path));
    m.bytes = m.set.total_bytes();
    m.expert_count = m.set.arch_uint("expert_count").value_or(0);
    const Kv* tokens = m.set.find_kv("tokenizer.ggml.tokens");
    if (!tokens || tokens->count == 0)
        throw InputError(path, std::nullopt, "tokenizer.ggml.tokens",
                         fmt::format("the model has no vocabulary; {} cannot run it",
                                     llama_tool_name(LlamaTool::perplexity)));
    m.n_vocab = tokens->count;
    m.identity = source_identity(m.set);
    return m;
}

void check_same_source(const EvalModel& src, const EvalModel& out) {
    const std::string from = base_name(src.path);
    if (const Kv* k = out.set.find_kv(kProvenanceSourceExpertCountKey)) {
        const auto v = k->as_uint();
        if (!v || *v != src.expert_count)
            throw InputError(out.path, k->file_offset, kProvenanceSourceExpertCountKey,
                             fmt::format("says its source had {} experts per block; {} has {}: this build "
                                         "was pruned from another model",
                                         v ? std::to_string(*v) : k->display(), from, src.expert_count));
    }
    if (out.n_vocab != src.n_vocab)
        throw InputError(out.path, std::nullopt, "tokenizer.ggml.tokens",
                         fmt::format("{} tokens where the source {} has {}: another vocabulary", out.n_vocab,
                                     from, src.n_vocab));
    const bool dropped_nextn = out.set.find_kv(kProvenanceDroppedNextnKey) != nullptr;
    size_t matched = 0;
    for (const TensorRef& r : out.set.tensors()) {
        const TensorInfo& ti = out.set.info(r);
        const TensorRef* s = src.set.find_tensor(ti.name);
        if (!s)
            throw InputError(out.path, ti.info_offset, ti.name,
                             fmt::format("the source {} has no tensor of this name: this build was not made "
                                         "from it",
                                         from));
        if (src.set.info(*s).type != ti.type)
            throw InputError(
                out.path, ti.info_offset, ti.name,
                fmt::format("is {} where the source {} has {}: another quantisation or model",
                            ggml_type_display(ti.type), from, ggml_type_display(src.set.info(*s).type)));
        ++matched;
    }
    if (matched != src.set.tensors().size() && !dropped_nextn)
        throw InputError(out.path, std::nullopt, "tensors",
                         fmt::format("{} tensors where the source {} has {}: this build was not made from it",
                                     matched, from, src.set.tensors().size()));
}

void check_reference(const EvalModel& src, const EvalModel& ref) {
    const std::string from = base_name(src.path);
    if (ref.identity == src.identity)
        throw RequestError(
            {EvalRequest::kReference,
             fmt::format(" {}: this is the source {} itself (the same header bytes); give the same "
                         "model at another quantisation (BF16, F16), or leave ",
                         ref.path, from),
             EvalRequest::kReference, " out"});
    const Message what{EvalRequest::kReference, " must be the source model at another quantisation"};
    if (ref.set.architecture() != src.set.architecture()) {
        const Kv* k = ref.set.find_kv("general.architecture");
        throw InputError(ref.path, k ? std::optional<uint64_t>(k->file_offset) : std::nullopt,
                         "general.architecture",
                         Message{fmt::format("is {} where the source {} is {}: ", ref.set.architecture(),
                                             from, src.set.architecture())} +
                             what);
    }
    const Kv* rt = ref.set.find_kv("tokenizer.ggml.tokens");
    const Kv* st = src.set.find_kv("tokenizer.ggml.tokens");
    if (rt->raw != st->raw) {
        std::string how = fmt::format("{} tokens where the source {} has {}", ref.n_vocab, from, src.n_vocab);
        if (ref.n_vocab == src.n_vocab) {
            const auto a = rt->as_string_array();
            const auto b = st->as_string_array();
            size_t i = 0;
            if (a && b)
                while (i < a->size() && i < b->size() && (*a)[i] == (*b)[i]) ++i;
            how = fmt::format("token {} differs from the source {}'s", i, from);
        }
        throw InputError(ref.path, rt->file_offset, "tokenizer.ggml.tokens",
                         Message{how + ": another vocabulary; "} + what);
    }
    if (ref.expert_count != src.expert_count) {
        const std::string key = ref.set.architecture() + ".expert_count";
        const Kv* k = ref.set.find_kv(key);
        throw InputError(ref.path, k ? std::optional<uint64_t>(k->file_offset) : std::nullopt, key,
                         Message{fmt::format("{} experts per block where the source {} has {}: ",
                                             ref.expert_count, from, src.expert_count)} +
                             what);
    }
}

std::string main_type(const ShardSet& s) {
    std::map<int32_t, uint64_t> bytes;
    for (const TensorRef& r : s.tensors()) bytes[s.info(r).type] += s.info(r).nbytes;
    const auto top = std::max_element(bytes.begin(), bytes.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
    return top == bytes.end() ? std::string("none") : ggml_type_display(top->first);
}

}  // namespace gguf_reap::eval_detail

namespace gguf_reap {

std::string generations_path_for(const std::string& json_out) {
    return std::filesystem::path(json_out).replace_extension(".generations.jsonl").string();
}

}  // namespace gguf_reap

namespace gguf_reap::eval_detail {

std::string svg_path_for(const std::string& json_out) {
    return std::filesystem::path(json_out).replace_extension(".svg").string();
}

uint64_t base_file_bytes(uint64_t n_vocab, uint64_t ctx, uint64_t chunks) {
    const uint64_t nv = 2 * ((n_vocab + 1) / 2) + 4;
    const uint64_t scored = ctx - 1 - ctx / 2;
    // ctx ≤ 2^20, chunks ≤ tokens / ctx and n_vocab a GGUF array count: the product can still overflow
    // for a hostile vocabulary count, so every step is checked.
    const auto tokens = checked_mul(chunks, ctx * 4);
    const auto rows = checked_mul(chunks, scored);
    const auto per_row = checked_mul(nv, 2);
    const auto logits = rows && per_row ? checked_mul(*rows, *per_row) : std::nullopt;
    const auto body = tokens && logits ? checked_add(*tokens, *logits) : std::nullopt;
    const auto all = body ? checked_add(*body, 20) : std::nullopt;
    if (!all) throw UsageError("eval: the base logits file would be larger than 2^64 bytes");
    return *all;
}

}  // namespace gguf_reap::eval_detail
