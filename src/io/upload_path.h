// How the documents meant for upload (eval.json, calibrate.json, keeplist.json, the receipt) name files:
// never by a path of this machine (issue 40).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/paths.h"

namespace gguf_reap {

// A path as a document meant for upload names it (eval.json, calibrate.json, keeplist.json, the receipt:
// no path of this machine in them): relative to `dir` (the document's directory, absolute and normal,
// as document_dir gives it) when it lies under it, else its base name. A string that is not an absolute
// path (a relative path, a word of a command, a number) is returned as it is.
inline std::string upload_path(const std::string& s, const std::filesystem::path& dir) {
    if (s.empty() || s.front() != '/') return s;
    const std::filesystem::path rel = std::filesystem::path(s).lexically_normal().lexically_relative(dir);
    const bool under = !rel.empty() && *rel.begin() != "..";
    return under ? rel.string() : base_name(s);
}

// The directory of the document `doc` will be, absolute and normal: upload_path's `dir`.
inline std::filesystem::path document_dir(const std::string& doc) {
    return std::filesystem::absolute(doc).parent_path().lexically_normal();
}

// What keeplist.json and the receipt record of other tools' paths (an imatrix's datasets, calibrate's
// command): each absolute path as its base name, every other word as it is. They are meant for upload
// and must not depend on where rank -o writes them, so nothing is made relative.
inline std::vector<std::string> upload_names(const std::vector<std::string>& words) {
    std::vector<std::string> out;
    for (const std::string& w : words) out.push_back(w.empty() || w.front() != '/' ? w : base_name(w));
    return out;
}

}  // namespace gguf_reap
