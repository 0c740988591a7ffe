// eval's smoke test: N greedy tokens from --smoke-prompt on the source and on each OUT (llama-completion,
// services/llama_cpp/llama_completion.h), each build's compared with the source's token by token
// (gguf_reap/eval.h, docs/eval.md).
#include <algorithm>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/paths.h"
#include "model/vocab_text.h"
#include "ops/eval/eval_internal.h"
#include "services/llama_cpp/llama_completion.h"

namespace gguf_reap::eval_detail {

namespace {

SmokeGeneration generate(Ctx& c, const std::string& model, const VocabText& vocab, int64_t& prompt_tokens) {
    const llama_cpp::GreedyRun job{c.tools.completion,      model,       c.q.smoke_prompt,
                                   c.q.smoke_token_count(), c.q.threads, c.cache_dir + "/smoke.session"};
    llama_cpp::Greedy g = llama_cpp::generate_greedy(c.runner, job, c.q.llama_args,
                                                     fmt::format("smoke test on {}", base_name(model)));
    prompt_tokens = g.prompt_tokens;
    SmokeGeneration s;
    for (const int32_t id : g.ids) s.tokens.push_back({id, vocab.text(id)});
    s.command = std::move(g.command);
    return s;
}

}  // namespace

EvalSmoke run_smoke(Ctx& c, const EvalModel& src, const std::vector<EvalModel>& outs) {
    EvalSmoke s;
    s.prompt = c.q.smoke_prompt;
    s.tokens_requested = c.q.smoke_token_count();
    s.completion_path = c.tools.completion;
    const VocabText vocab = VocabText::of(src.set);  // every OUT has the same (check_same_source)
    s.source = generate(c, src.path, vocab, s.prompt_tokens);
    for (const EvalModel& o : outs) {
        EvalSmokeOutput so;
        so.output = o.path;
        int64_t prompt_tokens = 0;
        so.generation = generate(c, o.path, vocab, prompt_tokens);
        // One vocabulary (check_same_source), so one tokenization of the prompt: were it not, the
        // generated tokens would be compared from different starting points.
        if (prompt_tokens != s.prompt_tokens)
            throw IoError(c.tools.completion,
                          fmt::format("smoke test on {}: the prompt is {} tokens, but {} on the source",
                                      base_name(o.path), prompt_tokens, s.prompt_tokens));
        const auto& a = s.source.tokens;
        const auto& b = so.generation.tokens;
        const size_t common = std::min(a.size(), b.size());
        size_t same = 0;
        while (same < common && a[same].id == b[same].id) ++same;
        so.identical = static_cast<int64_t>(same);
        if (same < std::max(a.size(), b.size())) so.first_diff = static_cast<int64_t>(same);
        s.outputs.push_back(std::move(so));
    }
    return s;
}

}  // namespace gguf_reap::eval_detail
