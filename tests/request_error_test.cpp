// The library speaks no CLI (issue 35): its messages name request fields, and cli/options.cpp spells
// them as options, so a library caller and a user of the CLI each read their own words.
#include <gtest/gtest.h>

#include <string>

#include "cli/options.h"
#include "gguf_reap/card.h"
#include "gguf_reap/error.h"
#include "gguf_reap/eval.h"
#include "gguf_reap/events.h"
#include "gguf_reap/plan_width.h"
#include "gguf_reap/rank.h"
#include "gguf_reap/splice.h"
#include "ops/rank/rank_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

TEST(RequestError, NamesTheFieldAndTheCliSpellsTheOption) {
    const RequestError e({RankOptions::kRatio, " 1.5 must be a fraction of experts to prune, 0 < R < 1"});
    EXPECT_STREQ(e.what(), "ratio 1.5 must be a fraction of experts to prune, 0 < R < 1");
    EXPECT_EQ(e.exit_code(), kExitBadInput);
    EXPECT_EQ(cli::option_message(e.message()),
              "--ratio 1.5 must be a fraction of experts to prune, 0 < R < 1");
    const RequestError two(
        {ops::SpliceRequest::kImatrixIn, " and ", SpliceOptions::kImatrixOut, " go together"});
    EXPECT_STREQ(two.what(), "imatrix_in and imatrix_out go together");
    EXPECT_EQ(test::shown(two), "--imatrix-in and --imatrix-out go together");
}

TEST(RequestError, InputAndIoErrorsCarryTheirPiecesToo) {
    const InputError in("p.txt", std::nullopt, "prompts", Message{EvalRequest::kPrompts, " chat: no prompt"});
    EXPECT_STREQ(in.what(), "p.txt: prompts: prompts chat: no prompt");
    EXPECT_EQ(test::shown(in), "p.txt: prompts: --prompts chat: no prompt");
    EXPECT_EQ(in.detail(), "prompts chat: no prompt");
    const IoError io("llama-tokenize", Message{EvalRequest::kText, " a=b.txt: no cut"});
    EXPECT_EQ(test::shown(io), "llama-tokenize: --text a=b.txt: no cut");
    EXPECT_EQ(io.exit_code(), kExitIo);
    // A message without fields keeps no pieces: what() is all there is.
    EXPECT_TRUE(UsageError("plain").message().empty());
}

// Which option each declared field is, command by command, is tools/request_fields.py's check (ctest
// request_fields): it reads the declarations from include/ and each command's --help. Here: the spelling.
TEST(RequestError, AFieldIsSpelledAsItsOption) {
    EXPECT_EQ(cli::option_spelling(ops::SpliceRequest::kImatrixIn), "--imatrix-in");
    EXPECT_EQ(cli::option_spelling(ops::RankRequest::kOut), "-o");
    EXPECT_EQ(cli::option_spelling(EvalRequest::kServerTimeout), "--server-timeout");
    // Fields are the same field when their names are, wherever they are declared.
    static_assert(CalibrateRequest::kCtx == EvalRequest::kCtx && Deployment::kCtx == EvalRequest::kCtx);
    static_assert(!(RankOptions::kRatio == RankOptions::kKeep));
    EXPECT_EQ(Message{RankOptions::kModel}.front().field, PlanWidthRequest::kModel);
}

TEST(RequestError, EventsSpellFieldsAsTheirCallerSays) {
    std::string seen;
    Events ev;
    ev.on_warn = [&](const std::string& m) { seen = m; };
    ev.warn(Message{"no ", CardRequest::kHfRepo, " ORG/REPO"});
    EXPECT_EQ(seen, "no hf_repo ORG/REPO");
    ev.spell = cli::option_spelling;
    ev.warn(Message{"no ", CardRequest::kHfRepo, " ORG/REPO"});
    EXPECT_EQ(seen, "no --hf-repo ORG/REPO");
}

TEST(RankRule, IsDataAndSaysItselfInTheKeeplistsWords) {
    RankDecision r;
    r.rule = {RankRule::Kind::kRatio, "0.25"};
    EXPECT_EQ(render(rule_message(r)), "ratio 0.25");
    EXPECT_EQ(cli::option_message(rule_message(r)), "--ratio 0.25");
    EXPECT_EQ(rule_text(r), "--ratio 0.25");  // keeplist.json's method.rule (docs/keeplist.md)
    r.rule = {RankRule::Kind::kKeep, "13"};
    EXPECT_EQ(rule_text(r), "--keep 13");
    r.rule = {RankRule::Kind::kPrune, "3"};
    EXPECT_EQ(rule_text(r), "--prune 3");
    r.rule = {RankRule::Kind::kPlan, "the hipfire plan reap_plan.json"};
    EXPECT_EQ(rule_text(r), "the hipfire plan reap_plan.json");
}

}  // namespace
}  // namespace gguf_reap
