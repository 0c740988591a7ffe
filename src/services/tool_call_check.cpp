// Tool calls checked against the offered tools (services/tool_call_check.h).
#include "services/tool_call_check.h"

#include <cmath>

#include <fmt/format.h>

namespace gguf_reap {

namespace {

using json = nlohmann::json;

bool has_type(const json& v, const std::string& type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    if (type == "number") return v.is_number();
    if (type == "integer") {
        if (v.is_number_integer()) return true;
        if (!v.is_number_float()) return false;
        const double d = v.get<double>();
        return std::isfinite(d) && std::floor(d) == d;
    }
    return true;  // a type name not in the subset is not checked
}

}  // namespace

std::string schema_violation(const json& value, const json& schema, const std::string& where) {
    if (schema.is_boolean()) return schema.get<bool>() ? "" : where + ": the schema allows no value";
    if (!schema.is_object()) return {};
    if (const auto t = schema.find("type"); t != schema.end()) {
        bool ok = false;
        std::string names;
        if (t->is_string()) {
            ok = has_type(value, t->get<std::string>());
            names = t->get<std::string>();
        } else if (t->is_array()) {
            for (const json& n : *t) {
                if (!n.is_string()) continue;
                ok = ok || has_type(value, n.get<std::string>());
                names += (names.empty() ? "" : " or ") + n.get<std::string>();
            }
        } else {
            ok = true;
        }
        if (!ok) return fmt::format("{}: {} is not of type {}", where, value.dump(), names);
    }
    if (const auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
        bool listed = false;
        for (const json& x : *e) listed = listed || x == value;
        if (!listed) return fmt::format("{}: {} is not one of {}", where, value.dump(), e->dump());
    }
    if (value.is_object()) {
        if (const auto r = schema.find("required"); r != schema.end() && r->is_array())
            for (const json& k : *r)
                if (k.is_string() && !value.contains(k.get<std::string>()))
                    return fmt::format("{}: the required key \"{}\" is missing", where, k.get<std::string>());
        if (const auto p = schema.find("properties"); p != schema.end() && p->is_object())
            for (auto it = p->begin(); it != p->end(); ++it)
                if (const auto v = value.find(it.key()); v != value.end())
                    if (std::string w = schema_violation(*v, it.value(), where + "." + it.key()); !w.empty())
                        return w;
    }
    if (value.is_array())
        if (const auto items = schema.find("items"); items != schema.end() && items->is_object())
            for (size_t i = 0; i < value.size(); ++i)
                if (std::string w = schema_violation(value[i], *items, fmt::format("{}[{}]", where, i));
                    !w.empty())
                    return w;
    return {};
}

ToolCallVerdict check_tool_calls(const json& message, const json& tools) {
    const auto calls = message.find("tool_calls");
    if (calls == message.end() || calls->is_null() || (calls->is_array() && calls->empty())) return {};
    const auto bad = [](std::string why) {
        return ToolCallVerdict{ToolCallVerdict::kInvalid, std::move(why)};
    };
    if (!calls->is_array()) return bad("\"tool_calls\" is not an array");
    for (size_t i = 0; i < calls->size(); ++i) {
        const json& c = (*calls)[i];
        const std::string at = fmt::format("tool_calls[{}]", i);
        const json* fn = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
        if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
            return bad(at + ": no function name");
        const std::string name = (*fn)["name"].get<std::string>();
        const json* offered = nullptr;
        if (tools.is_array())
            for (const json& t : tools)
                if (t.is_object() && t.contains("function") && t["function"].is_object() &&
                    t["function"].value("name", json()) == name)
                    offered = &t["function"];
        if (!offered) return bad(fmt::format("{}: \"{}\" is not an offered tool", at, name));
        json args;
        const json& a = fn->contains("arguments") ? (*fn)["arguments"] : json();
        if (a.is_string()) {
            args = json::parse(a.get<std::string>(), nullptr, false);
            if (args.is_discarded())
                return bad(fmt::format("{} ({}): the arguments are not JSON: {}", at, name,
                                       a.get<std::string>().substr(0, 80)));
        } else {
            args = a;
        }
        if (!args.is_object())
            return bad(fmt::format("{} ({}): the arguments are not a JSON object: {}", at, name,
                                   args.dump().substr(0, 80)));
        const json schema = offered->contains("parameters") ? (*offered)["parameters"] : json(true);
        if (std::string w = schema_violation(args, schema, at + ".arguments"); !w.empty())
            return bad(fmt::format("{} ({})", w, name));
    }
    return {ToolCallVerdict::kValid, {}};
}

}  // namespace gguf_reap
