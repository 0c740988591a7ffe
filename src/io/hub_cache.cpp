#include "io/hub_cache.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "gguf_reap/remote.h"

namespace gguf_reap {

namespace {

namespace fs = std::filesystem;

bool is_hex(std::string_view s, size_t n) {
    return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

// A path inside the repository: not absolute, no "..", no empty part.
bool inside(const std::string& file) {
    if (file.empty() || file.front() == '/') return false;
    for (const auto& part : fs::path(file))
        if (part == ".." || part == ".") return false;
    return file.find("//") == std::string::npos;
}

}  // namespace

HubCacheEntry find_in_hub_cache(const std::string& repo, const std::string& commit, const std::string& file,
                                uint64_t size, const std::string& sha256) {
    const std::string root = remote_settings().hub_cache;
    const auto slash = repo.find('/');
    if (root.empty() || !is_hex(commit, 40) || !inside(file) || slash == std::string::npos) return {};
    HubCacheEntry e;
    e.path = fmt::format("{}/models--{}--{}/snapshots/{}/{}", root, repo.substr(0, slash),
                         repo.substr(slash + 1), commit, file);
    std::error_code ec;
    const fs::file_status st = fs::status(e.path, ec);  // through the symlinks
    if (ec || !fs::exists(st)) return e;
    e.present = true;
    if (!fs::is_regular_file(st)) {
        e.problem = "is not a regular file";
        return e;
    }
    const uint64_t have = fs::file_size(e.path, ec);
    if (ec) {
        e.problem = "cannot be read: " + ec.message();
        return e;
    }
    if (have != size) {
        e.problem = fmt::format("holds {} bytes, the Hub's file {}", have, size);
        return e;
    }
    // huggingface_hub and llama.cpp name an LFS file's blob by its sha256.
    const std::string blob = fs::canonical(e.path, ec).filename().string();
    if (!ec && !sha256.empty() && is_hex(blob, 64) && blob != sha256)
        e.problem = fmt::format("is the blob {}, the Hub's file has the sha256 {}", blob, sha256);
    return e;
}

std::string sha256_of_etag(const std::string& etag) {
    std::string_view t = etag;
    if (t.starts_with("W/")) t.remove_prefix(2);
    if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
    return is_hex(t, 64) ? std::string(t) : std::string();
}

std::string hf_download_command(const std::string& repo, const std::string& pattern,
                                const std::string& revision) {
    std::string cmd = fmt::format("hf download {} --include '{}'", repo, pattern);
    if (!revision.empty()) cmd += " --revision " + revision;
    return cmd;
}

}  // namespace gguf_reap
