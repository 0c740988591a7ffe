// JSON documents read from files (keeplists, manifests, score files, other tools' plans): one parse
// with the limits that keep a hostile file from exhausting memory or the stack of the DOM's recursive
// copies and destructors (the parser itself does not recurse). Every failure is an InputError naming
// the file: a syntax error with its byte offset, a number the parser refuses, or a limit.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gguf_reap/error.h"

namespace gguf_reap {

// The limits of one parse, checked event by event in document order. `max_depth` 0: nesting is not
// checked here (the caller checks it another way). `what` completes "holds more than N values, more
// than WHAT needs", e.g. "a manifest".
struct JsonLimits {
    const std::string& path;
    int max_depth = 0;
    size_t max_values = 0;
    std::string_view what;
    size_t values = 0;

    // An event `depth` containers deep (an array or object opening, a key, a value).
    void at_depth(int depth) const {
        if (max_depth > 0 && depth > max_depth)
            throw InputError(path, std::nullopt, "json",
                             fmt::format("nested deeper than {} levels", max_depth));
    }
    // A string, number, boolean or null.
    void count_value() {
        if (++values > max_values)
            throw InputError(path, std::nullopt, "json",
                             fmt::format("holds more than {} values, more than {} needs", max_values, what));
    }
};

// The InputError for what nlohmann's parser refuses: a syntax error (parse_error, named with its byte
// offset) or valid syntax it still refuses, e.g. a number beyond double range (out_of_range.406). A
// SAX handler is given these in parse_error(); the DOM parser throws them.
[[noreturn]] inline void throw_json_input_error(const std::string& path, const nlohmann::json::exception& e) {
    if (const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e))
        throw InputError(path, pe->byte > 0 ? pe->byte - 1 : 0, "json", "not valid JSON");
    throw InputError(path, std::nullopt, "json", fmt::format("not valid JSON ({})", e.what()));
}

template <class Json>
Json parse_json_input(const std::string& text, const std::string& path, int max_depth, size_t max_values,
                      std::string_view what) {
    JsonLimits limits{path, max_depth, max_values, what};
    try {
        return Json::parse(text, [&](int depth, typename Json::parse_event_t event, Json&) {
            limits.at_depth(depth);
            if (event == Json::parse_event_t::value) limits.count_value();
            return true;
        });
    } catch (const typename Json::exception& e) {
        throw_json_input_error(path, e);
    }
}

// Optional fields of a document already parsed (card reads the keeplist's method and the eval report
// this way): the value when `key` is there with that JSON type, otherwise nothing.
template <class T = double, class Json>
std::optional<T> opt_number(const Json& j, const std::string& key) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
    return j[key].template get<T>();
}
template <class Json>
std::string opt_string(const Json& j, const std::string& key) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
    return j[key].template get<std::string>();
}

}  // namespace gguf_reap
