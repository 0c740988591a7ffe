// Path helpers every layer uses for messages and output names.
#pragma once

#include <filesystem>
#include <string>

namespace gguf_reap {

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
