// The library speaks no CLI (issue 35): its messages name request fields, and cli/options.cpp spells
// them as options, so a library caller and a user of the CLI each read their own words.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/options.h"
#include "gguf_reap/error.h"
#include "gguf_reap/events.h"
#include "gguf_reap/rank.h"
#include "ops/rank/rank_steps.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

TEST(RequestError, NamesTheFieldAndTheCliSpellsTheOption) {
    const RequestError e({RequestField::kRatio, " 1.5 must be a fraction of experts to prune, 0 < R < 1"});
    EXPECT_STREQ(e.what(), "ratio 1.5 must be a fraction of experts to prune, 0 < R < 1");
    EXPECT_EQ(e.exit_code(), kExitBadInput);
    EXPECT_EQ(cli::option_message(e.message()),
              "--ratio 1.5 must be a fraction of experts to prune, 0 < R < 1");
    const RequestError two({RequestField::kImatrixIn, " and ", RequestField::kImatrixOut, " go together"});
    EXPECT_STREQ(two.what(), "imatrix_in and imatrix_out go together");
    EXPECT_EQ(test::shown(two), "--imatrix-in and --imatrix-out go together");
}

TEST(RequestError, InputAndIoErrorsCarryTheirPiecesToo) {
    const InputError in("p.txt", std::nullopt, "prompts",
                        Message{RequestField::kPrompts, " chat: no prompt"});
    EXPECT_STREQ(in.what(), "p.txt: prompts: prompts chat: no prompt");
    EXPECT_EQ(test::shown(in), "p.txt: prompts: --prompts chat: no prompt");
    EXPECT_EQ(in.detail(), "prompts chat: no prompt");
    const IoError io("llama-tokenize", Message{RequestField::kText, " a=b.txt: no cut"});
    EXPECT_EQ(test::shown(io), "llama-tokenize: --text a=b.txt: no cut");
    EXPECT_EQ(io.exit_code(), kExitIo);
    // A message without fields keeps no pieces: what() is all there is.
    EXPECT_TRUE(UsageError("plain").message().empty());
}

// Every option some command of the CLI registers, as a user writes it: "--ratio", "-o".
std::set<std::string> registered_options() {
    CLI::App app;
    cli::GlobalOptions g;
    for (auto add : {cli::add_inspect, cli::add_rank, cli::add_plan_width, cli::add_splice, cli::add_audit,
                     cli::add_estimate, cli::add_card, cli::add_eval, cli::add_calibrate})
        add(app, g);
    std::set<std::string> options;
    for (const CLI::App* sub : app.get_subcommands({}))
        for (const CLI::Option* o : sub->get_options()) {
            for (const std::string& n : o->get_lnames()) options.insert("--" + n);
            for (const std::string& n : o->get_snames()) options.insert("-" + n);
        }
    return options;
}

TEST(RequestError, EveryFieldHasOneOptionOfItsOwnThatACommandTakes) {
    const std::set<std::string> registered = registered_options();
    ASSERT_TRUE(registered.count("--ratio") && registered.count("-o")) << registered.size();
    std::set<std::string> names, options;
    for (int i = 0; i < static_cast<int>(RequestField::kCount); ++i) {
        const auto f = static_cast<RequestField>(i);
        const std::string name = field_name(f), option = cli::option_spelling(f);
        EXPECT_NE(name, "?") << i;
        EXPECT_TRUE(names.insert(name).second) << name;
        EXPECT_TRUE(options.insert(option).second) << option;
        EXPECT_TRUE(registered.count(option))
            << name << " is spelled " << option << ", which no command takes";
    }
    EXPECT_EQ(cli::option_spelling(RequestField::kImatrixIn), "--imatrix-in");
    EXPECT_EQ(cli::option_spelling(RequestField::kOut), "-o");
}

TEST(RequestError, EventsSpellFieldsAsTheirCallerSays) {
    std::string seen;
    Events ev;
    ev.on_warn = [&](const std::string& m) { seen = m; };
    ev.warn(Message{"no ", RequestField::kHfRepo, " ORG/REPO"});
    EXPECT_EQ(seen, "no hf_repo ORG/REPO");
    ev.spell = cli::option_spelling;
    ev.warn(Message{"no ", RequestField::kHfRepo, " ORG/REPO"});
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
