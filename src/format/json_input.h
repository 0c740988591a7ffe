// JSON documents read from files (keeplists, manifests, score files, other tools' plans): one parse
// with the limits that keep a hostile file from exhausting memory or the stack of the DOM's recursive
// copies and destructors (the parser itself does not recurse). Every failure is an InputError naming
// the file: a syntax error with its byte offset, a number the parser refuses, or a limit.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/error.h"

namespace gguf_reap {

// `max_depth` 0: nesting is not checked here (the caller checks it another way). `what` completes
// "holds more than N values, more than WHAT needs", e.g. "a manifest".
template <class Json>
Json parse_json_input(const std::string& text, const std::string& path, int max_depth, size_t max_values,
                      std::string_view what) {
    size_t values = 0;
    try {
        return Json::parse(text, [&](int depth, typename Json::parse_event_t event, Json&) {
            if (max_depth > 0 && depth > max_depth)
                throw InputError(path, std::nullopt, "json",
                                 fmt::format("nested deeper than {} levels", max_depth));
            if (event == Json::parse_event_t::value && ++values > max_values)
                throw InputError(
                    path, std::nullopt, "json",
                    fmt::format("holds more than {} values, more than {} needs", max_values, what));
            return true;
        });
    } catch (const typename Json::parse_error& e) {
        throw InputError(path, e.byte > 0 ? e.byte - 1 : 0, "json", "not valid JSON");
    } catch (const typename Json::exception& e) {
        // Valid syntax the parser still refuses, e.g. a number beyond double range (out_of_range.406).
        throw InputError(path, std::nullopt, "json", fmt::format("not valid JSON ({})", e.what()));
    }
}

}  // namespace gguf_reap
