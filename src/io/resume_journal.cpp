#include "io/resume_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gguf_reap/error.h"

namespace gguf_reap {

namespace {

constexpr const char* kFormat = "gguf-reap.resume";
constexpr int kVersion = 1;

std::pair<std::string, std::string> dir_and_name(const std::string& path) {
    const std::filesystem::path p(path);
    return {p.parent_path().empty() ? "." : p.parent_path().string(), p.filename().string()};
}

void fsync_path(const std::string& path, int flags, const std::string& name) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd < 0) throw IoError(name, "open for fsync", errno);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) throw IoError(name, "fsync", err);
}

}  // namespace

std::string resume_journal_path(const std::string& out_prefix) {
    std::string prefix = out_prefix;
    if (prefix.ends_with(".gguf")) prefix.resize(prefix.size() - 5);
    const auto [dir, name] = dir_and_name(prefix);
    return fmt::format("{}/.{}.gguf-reap-resume.json", dir, name);
}

std::string partial_path(const std::string& final_path) {
    const auto [dir, name] = dir_and_name(final_path);
    return fmt::format("{}/.{}.gguf-reap-partial", dir, name);
}

std::optional<ResumeJournal> ResumeJournal::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    try {
        const nlohmann::json j = nlohmann::json::parse(in);
        if (j.at("format") != kFormat || j.at("version") != kVersion) return std::nullopt;
        ResumeJournal r;
        r.identity = j.at("identity").get<std::string>();
        r.keeplist_sha256 = j.at("keeplist_sha256").get<std::string>();
        for (const auto& s : j.at("sources"))
            r.sources.push_back({s.at("path").get<std::string>(), s.at("size").get<uint64_t>(),
                                 s.at("etag").get<std::string>()});
        for (const auto& f : j.at("files"))
            r.files.push_back({f.at("path").get<std::string>(), f.at("partial").get<std::string>(),
                               f.at("size").get<uint64_t>(), f.at("done").get<uint64_t>()});
        return r;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

void ResumeJournal::save(const std::string& path) const {
    nlohmann::ordered_json j;
    j["format"] = kFormat;
    j["version"] = kVersion;
    j["identity"] = identity;
    j["keeplist_sha256"] = keeplist_sha256;
    j["sources"] = nlohmann::ordered_json::array();
    for (const Source& s : sources)
        j["sources"].push_back({{"path", s.path}, {"size", s.size}, {"etag", s.etag}});
    j["files"] = nlohmann::ordered_json::array();
    for (const File& f : files)
        j["files"].push_back({{"path", f.path}, {"partial", f.partial}, {"size", f.size}, {"done", f.done}});
    const std::string text = j.dump(1) + "\n";
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << text;
        out.flush();
        if (!out) throw IoError(path, "write the resume journal");
    }
    fsync_path(tmp, O_RDONLY, path);
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw IoError(path, "rename", errno);
    fsync_path(dir_and_name(path).first, O_RDONLY | O_DIRECTORY, path);
}

}  // namespace gguf_reap
