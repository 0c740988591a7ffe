// A chat reply's tool calls against the offered tools, and the JSON-schema subset they are checked with
// (services/tool_call_check.h, docs/eval.md "Chat and tools").
#include <gtest/gtest.h>

#include "services/tool_call_check.h"

namespace gguf_reap {
namespace {

using json = nlohmann::json;

const json kWeather = json::parse(R"({"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"enum": ["C", "F"]},
                   "hourly": {"type": "boolean"}, "scale": {"type": "number"},
                   "stops": {"type": "array", "items": {"type": "string"}},
                   "where": {"type": "object", "required": ["lat"], "properties": {"lat": {"type": "number"}}},
                   "note": {"type": ["string", "null"]}},
    "required": ["city"]})");

std::string check(const char* args) {
    return schema_violation(json::parse(args), kWeather, "arguments");
}

TEST(SchemaSubset, AcceptsWhatTheSchemaAllows) {
    EXPECT_EQ(check(R"({"city": "Paris"})"), "");
    EXPECT_EQ(check(R"({"city": "Paris", "days": 3, "unit": "F", "hourly": true, "scale": 1.5,
                        "stops": ["a", "b"], "where": {"lat": 48}, "note": null, "extra": [1]})"),
              "");
    // An integer written with a zero fraction is an integer (JSON Schema counts the value, not the text).
    EXPECT_EQ(check(R"({"city": "Paris", "days": 3.0})"), "");
    EXPECT_EQ(check(R"({"city": "Paris", "note": "x"})"), "");
}

TEST(SchemaSubset, NamesTheFirstViolation) {
    EXPECT_EQ(check(R"({"days": 3})"), "arguments: the required key \"city\" is missing");
    EXPECT_EQ(check(R"({"city": 7})"), "arguments.city: 7 is not of type string");
    EXPECT_EQ(check(R"({"city": "P", "days": 2.5})"), "arguments.days: 2.5 is not of type integer");
    EXPECT_EQ(check(R"({"city": "P", "days": "3"})"), "arguments.days: \"3\" is not of type integer");
    EXPECT_EQ(check(R"({"city": "P", "hourly": 1})"), "arguments.hourly: 1 is not of type boolean");
    EXPECT_EQ(check(R"({"city": "P", "scale": true})"), "arguments.scale: true is not of type number");
    EXPECT_EQ(check(R"({"city": "P", "unit": "K"})"), "arguments.unit: \"K\" is not one of [\"C\",\"F\"]");
    EXPECT_EQ(check(R"({"city": "P", "stops": ["a", 2]})"), "arguments.stops[1]: 2 is not of type string");
    EXPECT_EQ(check(R"({"city": "P", "stops": "a"})"), "arguments.stops: \"a\" is not of type array");
    EXPECT_EQ(check(R"({"city": "P", "where": {}})"), "arguments.where: the required key \"lat\" is missing");
    EXPECT_EQ(check(R"({"city": "P", "where": []})"), "arguments.where: [] is not of type object");
    EXPECT_EQ(check(R"({"city": "P", "note": 1})"), "arguments.note: 1 is not of type string or null");
    EXPECT_EQ(check(R"([])"), "arguments: [] is not of type object");
}

TEST(SchemaSubset, TrueAbsentAndFalseSchemas) {
    EXPECT_EQ(schema_violation(json::parse("[1]"), json(true), "a"), "");
    EXPECT_EQ(schema_violation(json::parse("[1]"), json(), "a"), "");
    EXPECT_EQ(schema_violation(json::parse("[1]"), json(false), "a"), "a: the schema allows no value");
}

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}])");

ToolCallVerdict verdict(const char* message) {
    return check_tool_calls(json::parse(message), kTools);
}

TEST(ToolCalls, NoneValidAndInvalid) {
    EXPECT_EQ(verdict(R"({"role": "assistant", "content": "hi"})").kind, ToolCallVerdict::kNone);
    EXPECT_EQ(verdict(R"({"content": "hi", "tool_calls": []})").kind, ToolCallVerdict::kNone);
    EXPECT_EQ(verdict(R"({"content": "hi", "tool_calls": null})").kind, ToolCallVerdict::kNone);
    // As llama-server sends it: the arguments a string holding JSON.
    EXPECT_EQ(verdict(R"({"content": null, "tool_calls": [{"type": "function", "id": "x",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]})")
                  .kind,
              ToolCallVerdict::kValid);
    // An object is taken too; a tool without parameters takes any object.
    EXPECT_EQ(verdict(R"({"tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "P"}}},
        {"function": {"name": "now", "arguments": "{}"}}]})")
                  .kind,
              ToolCallVerdict::kValid);
    const auto invalid = [](const char* m, const std::string& why) {
        const ToolCallVerdict v = verdict(m);
        EXPECT_EQ(v.kind, ToolCallVerdict::kInvalid) << m;
        EXPECT_EQ(v.reason, why) << m;
    };
    invalid(R"({"tool_calls": [{"function": {"name": "get_time", "arguments": "{}"}}]})",
            "tool_calls[0]: \"get_time\" is not an offered tool");
    invalid(R"({"tool_calls": [{"function": {"name": "get_weather", "arguments": "{city: Paris"}}]})",
            "tool_calls[0] (get_weather): the arguments are not JSON: {city: Paris");
    invalid(R"({"tool_calls": [{"function": {"name": "get_weather", "arguments": "{}"}}]})",
            "tool_calls[0].arguments: the required key \"city\" is missing (get_weather)");
    invalid(R"({"tool_calls": [{"function": {"name": "get_weather", "arguments": "\"Paris\""}}]})",
            "tool_calls[0] (get_weather): the arguments are not a JSON object: \"Paris\"");
    // Every call must be valid: the second names no offered tool.
    invalid(R"({"tool_calls": [{"function": {"name": "now", "arguments": "{}"}},
        {"function": {"name": "sleep", "arguments": "{}"}}]})",
            "tool_calls[1]: \"sleep\" is not an offered tool");
    invalid(R"({"tool_calls": [{"id": "x"}]})", "tool_calls[0]: no function name");
    invalid(R"({"tool_calls": {"function": {"name": "now"}}})", "\"tool_calls\" is not an array");
}

}  // namespace
}  // namespace gguf_reap
