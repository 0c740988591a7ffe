// Path helpers every layer uses for messages and output names.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "gguf_reap/error.h"

namespace gguf_reap {

// A name the user gives a kind of text or a panel (--text NAME=FILE, --prompts NAME=FILE), which may
// become part of a file name (calibrate's DIR/NAME.imatrix.gguf): 1 to 64 letters, digits, '_', '-', '.'.
inline bool valid_input_name(const std::string& n) {
    if (n.empty() || n.size() > 64) return false;
    for (char c : n)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.'))
            return false;
    return true;
}

// The NAME=FILE items of one option (--text, --prompts; each with .name and .path): RequestError naming
// the option when a NAME is not a valid_input_name or is given twice ("give each `each` one name").
template <class Item>
void check_input_names(RequestField option, const std::vector<Item>& items, std::string_view each) {
    std::set<std::string> names;
    for (const Item& t : items) {
        if (!valid_input_name(t.name))
            throw RequestError(
                {option, fmt::format(" '{}={}': NAME must be 1 to 64 letters, digits, '_', '-' or '.'",
                                     t.name, t.path)});
        if (!names.insert(t.name).second)
            throw RequestError(
                {option, fmt::format(" {} is given twice; give each {} one name", t.name, each)});
    }
}

// The file name without its directory ("model-00001-of-00002.gguf").
inline std::string base_name(const std::string& path) {
    return std::filesystem::path(path).filename().string();
}

// The directory a file will be written into ("." for a bare name).
inline std::string parent_dir(const std::string& path) {
    const std::filesystem::path p(path);
    return p.parent_path().empty() ? std::string(".") : p.parent_path().string();
}

}  // namespace gguf_reap
