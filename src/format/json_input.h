// JSON documents read from files (keeplists, manifests, score files, other tools' plans): one parse
// with the limits that keep a hostile file from exhausting memory or the stack of the DOM's recursive
// copies and destructors (the parser itself does not recurse). Every failure is an InputError naming
// the file: a syntax error with its byte offset, a number the parser refuses, or a limit.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// A value of a document being read, with its place for messages ("outputs[].smoke"): a field that is
// missing, or of another JSON type, is an InputError naming the file and the field. `missing` is the
// message for a missing field (it may say which program writes the document).
template <class Json>
class BasicJsonIn {
  public:
    using vt = typename Json::value_t;
    BasicJsonIn(const Json& j, const std::string& file, std::string where, const Message& missing)
        : j_(j), file_(file), where_(std::move(where)), missing_(missing) {}

    // The field `key`, of JSON type `t` (number_float: any number; number_integer: any integer).
    BasicJsonIn at(const char* key, vt t) const {
        if (!j_.is_object() || !j_.contains(key)) throw InputError(file_, std::nullopt, name(key), missing_);
        const Json& v = j_[key];
        const bool ok = t == vt::number_float     ? v.is_number()
                        : t == vt::number_integer ? v.is_number_integer()
                                                  : v.type() == t;
        if (!ok) fail(key, fmt::format("is {}, not {}", v.type_name(), Json(t).type_name()));
        return BasicJsonIn(v, file_, name(key), missing_);
    }
    // The same, or null when it is absent or null (a field some documents hold, or later versions).
    std::optional<BasicJsonIn> maybe(const char* key, vt t) const {
        if (!j_.is_object() || !j_.contains(key) || j_[key].is_null()) return std::nullopt;
        return at(key, t);
    }
    std::string str(const char* key) const { return at(key, vt::string).j_.template get<std::string>(); }
    int64_t integer(const char* key) const { return at(key, vt::number_integer).j_.template get<int64_t>(); }
    uint64_t count(const char* key) const { return at(key, vt::number_unsigned).j_.template get<uint64_t>(); }
    // Optional fields: "", 0, false or null when absent.
    std::string str_or(const char* key) const {
        const auto v = maybe(key, vt::string);
        return v ? v->j_.template get<std::string>() : std::string();
    }
    int64_t integer_or(const char* key) const { return maybe(key, vt::number_integer) ? integer(key) : 0; }
    uint64_t count_or(const char* key) const { return maybe(key, vt::number_unsigned) ? count(key) : 0; }
    bool flag(const char* key) const {
        const auto v = maybe(key, vt::boolean);
        return v && v->j_.template get<bool>();
    }
    std::optional<double> number(const char* key) const {
        const auto v = maybe(key, vt::number_float);
        return v ? std::optional<double>(v->j_.template get<double>()) : std::nullopt;
    }
    // An array of strings (another value in it reads as ""); empty when absent.
    std::vector<std::string> words(const char* key) const {
        std::vector<std::string> w;
        if (const auto v = maybe(key, vt::array))
            for (const Json& x : v->j_) w.push_back(x.is_string() ? x.template get<std::string>() : "");
        return w;
    }
    // The elements of the array `key`; none when it is absent and not `required`.
    std::vector<BasicJsonIn> items(const char* key, bool required = false) const {
        std::vector<BasicJsonIn> v;
        const auto a = required ? std::optional<BasicJsonIn>(at(key, vt::array)) : maybe(key, vt::array);
        if (a)
            for (const Json& x : a->j_) v.emplace_back(x, file_, a->where_ + "[]", missing_);
        return v;
    }
    const Json& value() const { return j_; }
    // An InputError about the field `key` of this value.
    [[noreturn]] void fail(const char* key, const std::string& what) const {
        throw InputError(file_, std::nullopt, name(key), what);
    }

  private:
    std::string name(const char* key) const {
        return where_.empty() ? key : fmt::format("{}.{}", where_, key);
    }
    const Json& j_;
    const std::string& file_;
    std::string where_;
    const Message& missing_;
};

}  // namespace gguf_reap
