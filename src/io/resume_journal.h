// The journal of a resumable splice (from a URL; docs/splice.md "Resume"): what the output is made
// from, and how many leading bytes of each output's partial file are known to be on the disk. It sits
// beside the outputs as ".<prefix>.gguf-reap-resume.json" and is replaced atomically (temporary, fsync,
// rename, fsync of the directory), always after the data it vouches for was fsync'ed, so that after a
// crash at any instant it never claims a byte the disk may not hold.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gguf_reap {

struct ResumeJournal {
    struct Source {
        std::string path;  // the URL as given
        uint64_t size = 0;
        std::string etag;
    };
    struct File {
        std::string path;     // final name
        std::string partial;  // where its bytes are written until it is complete
        uint64_t size = 0;
        uint64_t done = 0;  // leading bytes fsync'ed
    };
    std::string identity;  // hex sha256 of the sources' pins, the keeplist and every byte of the plan
    std::string keeplist_sha256;
    std::vector<Source> sources;
    std::vector<File> files;

    // The journal at `path`, or nullopt when there is none or it is not one of ours (a journal is
    // replaced whole, never torn: anything unreadable is treated as absent and the run starts over).
    static std::optional<ResumeJournal> load(const std::string& path);
    // Writes it to `path` atomically and durably. Throws IoError.
    void save(const std::string& path) const;
};

// ".<prefix>.gguf-reap-resume.json" in the prefix's directory.
std::string resume_journal_path(const std::string& out_prefix);
// ".<name>.gguf-reap-partial" beside the final name.
std::string partial_path(const std::string& final_path);

}  // namespace gguf_reap
