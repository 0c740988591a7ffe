// card --upload-dir (ops/card/card_upload.h, docs/card.md "The upload folder").
#include "ops/card/card_upload.h"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/output_file.h"

namespace gguf_reap {

namespace {

namespace fs = std::filesystem;

constexpr const char* kReadme = "README.md";
constexpr size_t kCopyChunk = size_t{8} << 20;

// `from` copied into the temporary of `out` (a filesystem that allows no hard link between them).
void copy_into(const std::string& from, OutputFile& out) {
    std::ifstream in(from, std::ios::binary);
    if (!in) throw IoError(from, "open for reading", errno);
    std::vector<char> buf(kCopyChunk);
    uint64_t at = 0;
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto n = static_cast<size_t>(in.gcount());
        if (n == 0) break;
        out.write_at(at, buf.data(), n);
        at += n;
    }
    if (in.bad()) throw IoError(from, "read", errno);
}

// One file into DIR: a hard link of `from` under a temporary name, or a copy, renamed into place.
std::string put_file(const std::string& from, const std::string& to) {
    OutputFile out(to);
    std::error_code ec;
    const std::string link = out.temp_path() + ".link";
    fs::create_hard_link(from, link, ec);
    if (!ec) {
        // The link replaces the (empty) temporary, which commit() renames into place.
        fs::rename(link, out.temp_path(), ec);
        if (ec) {
            fs::remove(link, ec);
            throw IoError(out.temp_path(), "rename", ec.value());
        }
        out.commit();
        return "link";
    }
    copy_into(from, out);
    out.commit();
    return "copy";
}

// What DIR holds that a run may not replace; empty when nothing is in the way. Temporaries of a run that
// died are removed.
void check_contents(const std::string& dir, const std::set<std::string>& names,
                    const std::vector<UploadSource>& files, bool force) {
    std::error_code ec;
    std::vector<std::string> previous;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (OutputFile::is_temp_name(name)) {
            fs::remove(e.path(), ec);
            continue;
        }
        if (!names.count(name))
            throw UsageError(fmt::format(
                "{}: holds {}, which the card does not name: `hf upload` would publish it too; remove it, "
                "or give a new or empty folder",
                dir, name));
        // A hard link of an input (an earlier upload) is another path to the same file: only the input's
        // own path is refused.
        for (const UploadSource& f : files)
            if (f.name == name && fs::weakly_canonical(e.path(), ec) == fs::weakly_canonical(f.from, ec))
                throw UsageError(fmt::format(
                    "{}: {} is the input {} itself: give a new or empty folder, not the one the files are in",
                    dir, name, f.from));
        previous.push_back(name);
    }
    if (ec) throw IoError(dir, "list", ec.value());
    if (!previous.empty() && !force)
        throw UsageError(fmt::format(
            "{}: holds the files of an earlier upload folder ({}{}); use --force to replace them", dir,
            previous.front(), previous.size() > 1 ? fmt::format(" and {} more", previous.size() - 1) : ""));
}

}  // namespace

void check_upload_dir(const std::string& dir) {
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
        throw UsageError(fmt::format("{}: not a directory (give the folder to publish, new or empty)", dir));
}

std::vector<CardUploadFile> write_upload_dir(const std::string& dir, const std::vector<UploadSource>& files,
                                             const std::string& readme, bool force) {
    std::set<std::string> names{kReadme};
    for (const UploadSource& f : files)
        if (!names.insert(f.name).second)
            throw UsageError(fmt::format("{}: two files the card names are both called {}", dir, f.name));
    std::error_code ec;
    const bool made = !fs::exists(dir, ec);
    if (!made) check_contents(dir, names, files, force);
    std::set<std::string> existed;
    if (!made)
        for (const std::string& n : names)
            if (fs::exists(fs::path(dir) / n, ec)) existed.insert(n);
    fs::create_directories(dir, ec);
    if (ec) throw IoError(dir, "create directory", ec.value());
    std::vector<CardUploadFile> put;
    try {
        for (const UploadSource& f : files)
            put.push_back({f.name, put_file(f.from, (fs::path(dir) / f.name).string())});
        OutputFile out((fs::path(dir) / kReadme).string());
        out.write_at(0, readme.data(), readme.size());
        out.commit();
        put.push_back({kReadme, "written"});
    } catch (...) {
        // No half folder: what this run added goes again (a replaced file of an earlier upload cannot
        // come back), and DIR itself when this run made it.
        for (const CardUploadFile& p : put)
            if (!existed.count(p.name)) fs::remove(fs::path(dir) / p.name, ec);
        if (made) fs::remove(dir, ec);
        throw;
    }
    return put;
}

}  // namespace gguf_reap
