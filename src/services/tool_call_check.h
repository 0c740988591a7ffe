// Whether a chat reply's tool calls are ones the request offered (docs/eval.md, "Chat and tools"): the
// name one of the offered tools', the arguments JSON that satisfies the tool's JSON schema in the subset
// checked here. Pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace gguf_reap {

// Where `value` breaks `schema`, as "WHERE: what" (WHERE is `where` followed by the path to the offending
// value, ".key" and "[i]"), or "" when it satisfies it. The subset checked: "type" (a name or a list of
// names: object, array, string, number, integer (a number with no fractional part), boolean, null),
// "enum", "required", "properties" (each present key's value against its schema) and "items" (one schema,
// each element against it). Every other keyword is not checked; a schema that is not an object (true, or
// absent) allows anything, and false allows nothing.
std::string schema_violation(const nlohmann::json& value, const nlohmann::json& schema,
                             const std::string& where);

// A reply's message (the object at choices[0].message) against the request's "tools" (OpenAI function
// tools): kNone when it holds no tool call ("tool_calls" absent, null or empty), kValid when it holds
// at least one and every one names an offered function and has arguments that are a JSON object (or a
// string holding one) satisfying that function's "parameters", else kInvalid with the first reason.
struct ToolCallVerdict {
    enum Kind { kNone, kValid, kInvalid } kind = kNone;
    std::string reason;  // with kInvalid
};
ToolCallVerdict check_tool_calls(const nlohmann::json& message, const nlohmann::json& tools);

}  // namespace gguf_reap
