// eval's behaviour definitions (docs/eval.md, "Behaviour") on hand-made token sequences, and the reading of
// llama-server's /completion replies recorded from llama.cpp 34af94cd9 (tests/data/llama-server/;
// services/llama_cpp/llama_server.h).
#include <fstream>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf_reap/error.h"
#include "ops/eval/behaviour_metrics.h"
#include "ops/eval/eval_behaviour.h"
#include "services/llama_cpp/llama_server.h"

namespace gguf_reap::eval_detail {
namespace {

using llama_cpp::Generation;  // llama-server's replies are services/llama_cpp's
using llama_cpp::parse_completion;

std::vector<int32_t> repeat(const std::vector<int32_t>& unit, size_t n) {
    std::vector<int32_t> v;
    while (v.size() < n) v.push_back(unit[v.size() % unit.size()]);
    return v;
}

std::vector<int32_t> distinct(size_t n, int32_t from = 1000) {
    std::vector<int32_t> v(n);
    std::iota(v.begin(), v.end(), from);
    return v;
}

TEST(BehaviourLoops, PeriodicTailLoops) {
    // 64 tokens: L = 32; period 3 <= 32/4 = 8 over all of the last 32.
    std::vector<int32_t> t = distinct(20);
    const auto tail = repeat({7, 8, 9}, 44);
    t.insert(t.end(), tail.begin(), tail.end());
    EXPECT_TRUE(generation_loops(t, false));
    // The same tokens ending at an end-of-generation token are a natural end, never a loop.
    EXPECT_FALSE(generation_loops(t, true));
}

TEST(BehaviourLoops, OneTokenRepeatedLoops) {
    EXPECT_TRUE(generation_loops(repeat({220}, 8), false));  // L = 4, p = 1
}

TEST(BehaviourLoops, AlmostPeriodicDoesNot) {
    auto t = repeat({1, 2, 3, 4}, 64);  // L = 32, period 4
    EXPECT_TRUE(generation_loops(t, false));
    t[40] = 99;  // inside the last 32: no period fits any more
    EXPECT_FALSE(generation_loops(t, false));
    auto u = repeat({1, 2, 3, 4}, 64);
    u[31] = 99;  // outside the last 32 (indices 32..63): still a loop
    EXPECT_TRUE(generation_loops(u, false));
}

TEST(BehaviourLoops, PeriodLongerThanAQuarterDoesNot) {
    // L = 32 allows p <= 8; a period of 9 repeated is not counted, a period of 8 is.
    EXPECT_FALSE(generation_loops(repeat(distinct(9), 64), false));
    EXPECT_TRUE(generation_loops(repeat(distinct(8), 64), false));
}

TEST(BehaviourLoops, ShortNeverLoops) {
    EXPECT_FALSE(generation_loops({}, false));
    EXPECT_FALSE(generation_loops(repeat({5}, 7), false));  // L = 3 < 4
    EXPECT_TRUE(generation_loops(repeat({5}, 8), false));   // L = 4
}

TEST(BehaviourLoops, WindowIsAtMost256) {
    // 1,000 tokens: L = 256, p <= 64. A period of 100 fills the tail but is too long to count; a period
    // of 64 counts though the first 744 tokens are all different.
    EXPECT_FALSE(generation_loops(repeat(distinct(100), 1000), false));
    std::vector<int32_t> t = distinct(744);
    const auto tail = repeat(distinct(64, 5000), 256);
    t.insert(t.end(), tail.begin(), tail.end());
    EXPECT_TRUE(generation_loops(t, false));
    t[744] = 1;  // the window's first token breaks the period
    EXPECT_FALSE(generation_loops(t, false));
}

TEST(BehaviourRates, WilsonInterval) {
    // Reference values: Wilson score interval, z = 1.959963984540054.
    const EvalRate a = wilson_rate(7, 8);
    EXPECT_DOUBLE_EQ(a.rate, 0.875);
    EXPECT_NEAR(a.lo, 0.529111817787, 1e-9);
    EXPECT_NEAR(a.hi, 0.977582508550, 1e-9);
    const EvalRate z = wilson_rate(0, 8);
    EXPECT_EQ(z.lo, 0.0);
    EXPECT_NEAR(z.hi, 0.324407564884, 1e-9);
    const EvalRate f = wilson_rate(6, 6);
    EXPECT_EQ(f.hi, 1.0);
    EXPECT_NEAR(f.lo, 0.609666, 1e-6);
    const EvalRate m = wilson_rate(72, 1000);  // the GLM-5.2 figure's size
    EXPECT_NEAR(m.lo, 0.0575, 1e-4);
    EXPECT_NEAR(m.hi, 0.0898, 1e-4);
}

TEST(BehaviourDistinct4, PooledWithinGenerations) {
    Distinct4 d;
    EXPECT_FALSE(d.value());
    d.add(std::vector<int32_t>{1, 2, 3});  // no 4-gram
    EXPECT_FALSE(d.value());
    d.add(std::vector<int32_t>{1, 2, 3, 4, 1, 2, 3, 4});  // 5 4-grams, 4 distinct
    EXPECT_EQ(d.total(), 5u);
    EXPECT_EQ(d.distinct(), 4u);
    d.add(std::vector<int32_t>{3, 4, 1, 2});  // 1 more, seen already
    EXPECT_EQ(d.total(), 6u);
    EXPECT_EQ(d.distinct(), 4u);
    EXPECT_DOUBLE_EQ(*d.value(), 4.0 / 6.0);
    // A 4-gram across two generations ({4} then {9, 9, 9}) is not one.
    Distinct4 e;
    e.add(std::vector<int32_t>{4});
    e.add(std::vector<int32_t>{9, 9, 9});
    EXPECT_EQ(e.total(), 0u);
}

std::vector<nlohmann::json> recorded(const std::string& build) {
    std::ifstream in(fmt::format("{}/llama-server/{}.jsonl", GGUF_REAP_TEST_DATA, build));
    EXPECT_TRUE(in) << build;
    std::vector<nlohmann::json> v;
    for (std::string line; std::getline(in, line);) v.push_back(nlohmann::json::parse(line));
    return v;
}

TEST(BehaviourCompletion, RecordedRepliesParse) {
    size_t n = 0, eos = 0;
    for (const nlohmann::json& r : recorded("source")) {
        if (r["endpoint"] != "/completion") continue;
        Generation g;
        ASSERT_EQ(parse_completion(r["reply"].get<std::string>(), 64, 4096, g), "");
        const auto reply = nlohmann::json::parse(r["reply"].get<std::string>());
        EXPECT_EQ(g.tokens, reply["tokens"].get<std::vector<int32_t>>());
        EXPECT_EQ(g.eog, reply["stop_type"] == "eos");
        EXPECT_EQ(g.text, reply["content"].get<std::string>());
        ++n;
        eos += g.eog;
    }
    // 14 raw prompts, 6 through the chat template, the 14 again with '.' as the end-of-generation token,
    // the 6 again with a template too long for the slot, and the 6 prose prompts sampled 4 times at
    // temperature 0.7, and the plain line of the chat panel (tests/data/llama-server/README.md).
    EXPECT_EQ(n, 65u);
    EXPECT_EQ(eos, 5u) << "2 of 8 code and 3 of 6 prose prompts end naturally on the source, greedy; no "
                          "sampled one does";
}

TEST(BehaviourCompletion, BadRepliesAreNamed) {
    Generation g;
    EXPECT_EQ(parse_completion("{\"tokens\": [1,", 64, 4096, g), "not JSON");
    EXPECT_EQ(parse_completion("[]", 64, 4096, g), "not a JSON object");
    EXPECT_NE(parse_completion(R"({"content":"x","stop_type":"limit"})", 64, 4096, g).find("no \"tokens\""),
              std::string::npos);
    EXPECT_NE(parse_completion(R"({"content":"x","tokens":[1],"stop_type":"word"})", 64, 4096, g)
                  .find("stop_type \"word\""),
              std::string::npos);
    EXPECT_NE(parse_completion(R"({"content":"x","tokens":[4096],"stop_type":"limit"})", 64, 4096, g)
                  .find("outside the vocabulary"),
              std::string::npos);
    EXPECT_NE(parse_completion(R"({"content":"x","tokens":[1,2,3],"stop_type":"limit"})", 2, 4096, g)
                  .find("more than the 2"),
              std::string::npos);
    EXPECT_EQ(parse_completion(R"({"content":"","tokens":[4095],"stop_type":"eos"})", 64, 4096, g), "");
    EXPECT_TRUE(g.eog);
    EXPECT_EQ(g.tokens, std::vector<int32_t>{4095});
}

// The chat panel's recorded /v1/chat/completions replies: two texts read, the booking line's HTTP 500.
TEST(BehaviourChat, RecordedRepliesParse) {
    size_t n = 0, errors = 0;
    for (const nlohmann::json& r : recorded("source")) {
        if (r["endpoint"] != "/v1/chat/completions") continue;
        ++n;
        if (r["status"] != 200) {
            ++errors;
            EXPECT_EQ(r["status"], 500);
            continue;
        }
        llama_cpp::ChatReply c;
        ASSERT_EQ(llama_cpp::parse_chat(r["reply"].get<std::string>(), 64, c), "");
        EXPECT_FALSE(c.eog);  // "length"
        EXPECT_EQ(c.tokens, 64);
        EXPECT_FALSE(c.message.contains("tool_calls"));
    }
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(errors, 1u);
}

TEST(BehaviourChat, BadRepliesAreNamed) {
    llama_cpp::ChatReply c;
    const auto reply = [](const char* finish, const char* content, int tokens) {
        return fmt::format(
            R"({{"choices":[{{"finish_reason":{},"message":{{"role":"assistant","content":{}}}}}],)"
            R"("usage":{{"completion_tokens":{}}}}})",
            finish, content, tokens);
    };
    EXPECT_EQ(llama_cpp::parse_chat(reply("\"stop\"", "\"hi\"", 3), 64, c), "");
    EXPECT_TRUE(c.eog);
    EXPECT_EQ(c.text, "hi");
    EXPECT_EQ(llama_cpp::parse_chat(reply("\"tool_calls\"", "null", 9), 64, c), "");
    EXPECT_TRUE(c.eog);
    EXPECT_EQ(c.text, "");
    EXPECT_EQ(llama_cpp::parse_chat("{", 64, c), "not JSON");
    EXPECT_EQ(llama_cpp::parse_chat(R"({"choices":[]})", 64, c), "no \"choices\" array");
    EXPECT_EQ(llama_cpp::parse_chat(reply("\"content_filter\"", "\"\"", 1), 64, c),
              "finish_reason \"content_filter\", not \"stop\", \"length\" or \"tool_calls\"");
    EXPECT_EQ(llama_cpp::parse_chat(reply("\"stop\"", "7", 1), 64, c),
              "choices[0].message.content is neither a string nor null");
    EXPECT_EQ(llama_cpp::parse_chat(reply("\"length\"", "\"x\"", 65), 64, c),
              "65 tokens, more than the 64 asked for");
}

TEST(BehaviourChat, Excerpt) {
    EXPECT_EQ(excerpt("What is the weather in Paris?"), "What is the weather in Paris?");
    EXPECT_EQ(excerpt("  a\n\n b\t c  "), "a b c");
    EXPECT_EQ(excerpt(std::string(60, 'x')), std::string(60, 'x'));
    EXPECT_EQ(excerpt(std::string(61, 'x')), std::string(60, 'x') + "…");
    EXPECT_EQ(excerpt(std::string(60, 'x') + "  \n"), std::string(60, 'x'));
    // A space never ends an excerpt.
    EXPECT_EQ(excerpt(std::string(59, 'x') + " yz"), std::string(59, 'x') + "…");
    // Characters, not bytes: 61 two-byte characters keep 60.
    std::string e;
    for (int i = 0; i < 61; ++i) e += "é";
    EXPECT_EQ(excerpt(e), e.substr(0, 120) + "…");
}

TEST(BehaviourChat, PanelLines) {
    const std::string path = ::testing::TempDir() + "chat-panel.jsonl";
    const auto panel = [&](const std::string& text) {
        std::ofstream(path, std::ios::binary) << text;
        return read_panel({"p", path});
    };
    const Panel p = panel(
        R"({"model": "m", "messages": [{"role": "user", "content": "hi there"}], "tools": [{"type": "function", )"
        R"("function": {"name": "f", "parameters": {"type": "object"}}}], "stream": true})"
        "\n"
        R"({"prompt": "plain"})"
        "\n");
    ASSERT_EQ(p.prompts.size(), 2u);
    EXPECT_EQ(p.prompts[0], "hi there");
    ASSERT_TRUE(p.chat[0]);
    EXPECT_EQ(p.chat[0]->dump(),
              R"({"messages":[{"content":"hi there","role":"user"}],"tools":[{"function":{"name":"f",)"
              R"("parameters":{"type":"object"}},"type":"function"}]})");
    EXPECT_FALSE(p.chat[1]);
    EXPECT_EQ(p.facts.chat_lines, 1);
    EXPECT_EQ(p.facts.tool_lines, 1);
    EXPECT_EQ(p.facts.max_prompt_bytes, p.chat[0]->dump().size());
    // A schema nested 64 levels deep is read; 65 is refused.
    const auto nested = [](int depth) {
        // The line's object is level 1, "tools" 2, its tool 3, "function" 4, "parameters" 5.
        std::string v = "1";
        for (int d = 5; d < depth; ++d) v = "[" + v + "]";
        return R"({"messages": [{"role": "user"}], "tools": [{"function": {"name": "f", "parameters": {"x": )" +
               v + "}}}]}\n";
    };
    EXPECT_NO_THROW(panel(nested(64)));
    try {
        panel(nested(65));
        FAIL() << "a line nested 65 levels deep was read";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("line 1 at offset 0 (0x0): nested deeper than 64 levels"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace gguf_reap::eval_detail
