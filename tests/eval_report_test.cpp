// eval.json: what eval writes (eval_report_json) card reads back (read_eval_report), field for field: the
// one owner of its key names, src/services/eval_report.cpp.
#include <fstream>

#include <gtest/gtest.h>

#include "gguf_reap/error.h"
#include "services/eval_report.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

EvalRun run(const std::string& output, const std::string& text, double kld) {
    EvalRun r;
    r.output = output;
    r.text = text;
    r.tokens = 504;
    KldFigures& f = r.figures;
    f.from = "summary";
    f.chunks = 8;
    f.ppl_output = {69.769, 1.25};
    f.ppl_source = ValueErr{33.991, 0.5};
    f.ln_ppl_ratio = {0.72, 0.01};
    f.kld = {kld, 0.002};
    f.kld_median = 0.5;
    f.kld_p99 = 4.12;
    f.kld_p999 = 6.5;
    f.kld_max = 9.25;
    f.rms_dp = {21.5, 0.3};
    f.same_top = {39.88, 0.7};
    r.command = {"llama-perplexity", "-m", output, "--kl-divergence"};
    return r;
}

EvalBase base(const std::string& file) {
    // eval.json records a base run's PPL without its error: 0 here, as it reads back.
    return {file, 123456, true, ValueErr{33.991, 0}, {"llama-perplexity", "--kl-divergence-base", file}};
}

EvalBehaviour behaviour(const std::string& model, const std::string& panel) {
    EvalBehaviour b;
    b.model = model;
    b.panel = panel;
    b.prompts = 20;
    b.gen_tokens = 64;
    b.loops = {3, 20, 0.15, 0.05, 0.36};
    b.natural_ends = {12, 20, 0.6, 0.39, 0.78};
    b.errors = {2, 20, 0.1, 0.03, 0.3};
    // 3 loops, 12 natural ends, 2 errors, 3 ends at the limit, in panel order.
    b.outcomes.assign(3, EvalOutcome::loop);
    b.outcomes.insert(b.outcomes.end(), 12, EvalOutcome::natural_end);
    b.outcomes.insert(b.outcomes.end(), 2, EvalOutcome::error);
    b.outcomes.insert(b.outcomes.end(), 3, EvalOutcome::limit);
    b.prompt_errors = {{15, 0, "HTTP 500: {\"error\": ...}"},
                       {16, 0, "no reply within 600 s (--server-timeout)"}};
    b.mean_tokens = 41.5;
    b.distinct_4 = 0.875;
    b.four_grams = 700;
    b.distinct_four_grams = 612;
    b.tokens = 830;
    b.seconds = 2.25;
    b.server_command = {"llama-server", "-m", model};
    return b;
}

// Every field eval.json holds set, with finite figures (a non-finite one is written as null).
EvalResult full_result() {
    EvalResult r;
    r.tool = "gguf-reap 0.1.0";
    r.llama_build = "version: 1 (abc)\nbuilt with cc";
    r.perplexity_path = "bin/llama-perplexity";
    r.llama_args = {"-ngl", "99"};
    r.source = "m.gguf";
    r.source_shards = {"m.gguf"};
    r.source_bytes = 1000;
    r.source_expert_count = 16;
    r.source_identity = std::string(64, 'a');
    r.source_main_type = "Q8_0";
    r.reference = EvalReferenceFacts{{"f16.gguf", {"f16.gguf"}, 2000, 16}, std::string(64, 'f'), "F16"};
    r.ctx = 128;
    r.batch = 2048;
    r.chunks_requested = 8;
    EvalTextFacts t;
    static_cast<TextFacts&>(t) = {"python", "python.txt", std::string(64, 'b'),
                                  35861,    9000,         {"llama-tokenize", "-m"}};
    t.chunks = 8;
    t.scored_tokens = 504;
    t.base = base("cache/base.kld");
    t.reference_base = base("cache/ref.kld");
    r.texts = {t};
    r.outputs = {{"keep12.gguf", {"keep12.gguf"}, 800, 12}, {"keep8.gguf", {"keep8.gguf"}, 600, 8}};
    r.runs = {run("keep12.gguf", "python", 0.638), run("keep8.gguf", "python", 0.8657)};
    r.reference_runs = {run("m.gguf", "python", 0.0006), run("keep12.gguf", "python", 0.64),
                        run("keep8.gguf", "python", 0.8656)};
    r.reference_runs[0].figures.from = "last chunk row";
    r.reference_runs[0].figures.kld_p99.reset();
    EvalSmoke& s = r.smoke.emplace();
    s.prompt = "def main(";
    s.tokens_requested = 3;
    s.prompt_tokens = 4;
    s.completion_path = "bin/llama-completion";
    s.source = {{{11, ","}, {12, " self"}, {13, ")"}}, {"llama-completion", "SESSION"}};
    s.outputs.push_back({"keep12.gguf", {{{11, ","}, {12, " self"}, {13, ")"}}, {"c"}}, 3, std::nullopt});
    s.outputs.push_back({"keep8.gguf", {{{11, ","}, {62, "_"}}, {"c"}}, 1, 1});
    r.panels = {{"code", "code.txt", std::string(64, 'c'), 900, 20, 120, "lines"}};
    r.gen_tokens = 64;
    r.parallel = 4;
    r.chat = true;
    r.server_path = "bin/llama-server";
    r.behaviour = {behaviour("source", "code"), behaviour("keep12.gguf", "code"),
                   behaviour("keep8.gguf", "code")};
    r.behaviour[2].distinct_4.reset();
    // Two chat lines, the last of them offering tools (docs/eval.md, "Chat and tools").
    r.panels[0].chat_lines = 2;
    r.panels[0].tool_lines = 1;
    for (EvalBehaviour& b : r.behaviour) {
        b.chat_outcomes.assign(18, EvalChatOutcome::plain);
        b.chat_outcomes.push_back(EvalChatOutcome::template_error);
        b.chat_outcomes.push_back(EvalChatOutcome::bad_tool_call);
        b.tools_offered.assign(19, false);
        b.tools_offered.push_back(true);
        b.template_errors = {1, 2, 0.5, 0.09, 0.91};
        b.tool_calls = {0, 1, 0, 0, 0.79};
        b.bad_tool_calls = {{19, 0, "tool_calls[0]: \"f\" is not an offered tool"}};
    }
    r.behaviour[2].changes = {{"loops", 4, 0, true, "def f(x):"}, {"tool_calls", 19, 0, false, "What is…"}};
    r.generations_written = "eval.generations.jsonl";
    r.json_written = "eval.json";
    r.svg_written = "eval.svg";
    r.svg_sha256 = std::string(64, 'd');
    return r;
}

std::string write(const test::TempDir& dir, const nlohmann::ordered_json& j, const char* name = "eval.json") {
    const std::string p = dir.file(name);
    std::ofstream(p) << j.dump(2);
    return p;
}

TEST(EvalReport, WhatEvalWritesCardReadsBack) {
    const EvalResult r = full_result();
    test::TempDir dir;
    const EvalReport back = read_eval_report(write(dir, eval_report_json(r)));
    EXPECT_EQ(back.result, r);
    // Field by field where a difference would be hard to read from the line above.
    EXPECT_EQ(back.result.runs, r.runs);
    EXPECT_EQ(back.result.texts, r.texts);
    EXPECT_EQ(back.result.smoke, r.smoke);
    EXPECT_EQ(back.result.behaviour, r.behaviour);
    EXPECT_EQ(back.sha256.size(), 64u);
}

TEST(EvalReport, WithoutTheOptionalPartsToo) {
    EvalResult r = full_result();
    r.reference.reset();
    r.reference_runs.clear();
    for (EvalTextFacts& t : r.texts) t.reference_base.reset();
    r.smoke.reset();
    r.panels.clear();
    r.behaviour.clear();
    r.gen_tokens = r.parallel = 0;
    r.chat = false;
    r.server_path.clear();
    r.llama_args.clear();
    r.chunks_requested.reset();
    r.generations_written.clear();
    const nlohmann::ordered_json j = eval_report_json(r);
    EXPECT_FALSE(j.contains("reference") || j.contains("smoke") || j.contains("behaviour"));
    EXPECT_FALSE(j["llama_cpp"].contains("args"));  // written only when given
    test::TempDir dir;
    EXPECT_EQ(read_eval_report(write(dir, j)).result, r);
}

TEST(EvalReport, AMissingFieldIsNamed) {
    nlohmann::ordered_json j = eval_report_json(full_result());
    j["outputs"][1].erase("bytes");
    test::TempDir dir;
    try {
        read_eval_report(write(dir, j));
        FAIL() << "read";
    } catch (const InputError& e) {
        EXPECT_NE(
            std::string(e.what()).find("outputs[].bytes: missing (is this `gguf-reap eval out` output?)"),
            std::string::npos)
            << e.what();
    }
    j = eval_report_json(full_result());
    j["runs"][0]["kld"] = 3;
    try {
        read_eval_report(write(dir, j));
        FAIL() << "read";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("runs[].kld: is number, not object"), std::string::npos)
            << e.what();
    }
}

TEST(EvalReport, TheBuildCardIsFor) {
    test::TempDir dir;
    const EvalReport rep = read_eval_report(write(dir, eval_report_json(full_result())));
    EXPECT_EQ(eval_report_build(rep, {"keep8.gguf"}, 600, std::string(64, 'a')), 1u);
    EXPECT_THROW(eval_report_build(rep, {"keep8.gguf"}, 601, std::string(64, 'a')), InputError);
    try {
        eval_report_build(rep, {"keep8.gguf"}, 600, std::string(64, '0'));
        FAIL() << "another source";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("source.identity"), std::string::npos) << e.what();
    }
    // What the card states of this build must be there: its runs against the reference, the source's
    // behaviour on each of its panels.
    const auto refused = [&](EvalResult r, const std::string& field) {
        try {
            eval_report_build(read_eval_report(write(dir, eval_report_json(r), "e.json")), {"keep8.gguf"},
                              600, std::string(64, 'a'));
            ADD_FAILURE() << field << " not refused";
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
        }
    };
    EvalResult no_ref_run = full_result();
    no_ref_run.reference_runs.pop_back();  // keep8's
    refused(no_ref_run, "reference_runs: has no run of keep8.gguf against the reference");
    EvalResult no_source = full_result();
    no_source.behaviour.erase(no_source.behaviour.begin());
    refused(no_source, "behaviour[]: panel code has no entry for the source");
}

}  // namespace
}  // namespace gguf_reap
