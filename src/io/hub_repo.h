// A model named the way llama.cpp's `-hf` names one (docs/remote.md, "A repository and a quant"):
// hf://ORG/REPO:QUANT[@REVISION], resolved as llama.cpp 34af94cd9 resolves it (common/download.cpp,
// common/hf-cache.cpp). The revision becomes a commit through the Hub's refs API (a 40-hex revision is a
// commit already); the commit's file list comes from its tree API; the quant picks one set of .gguf files
// (a split set whole). What comes out is the plain hf://ORG/REPO/PATH@COMMIT of the set's first shard,
// which every command already reads (io/remote_file.h), pinned to that commit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gguf_reap {

// hf://ORG/REPO:QUANT[@REVISION], parsed; nullopt for any other path (hf://ORG/REPO/PATH included).
// Throws UsageError naming the path when it has the form but an empty or malformed part.
struct HubQuant {
    std::string repo;      // ORG/REPO
    std::string quant;     // as given (matched without regard to case)
    std::string revision;  // "main" when not given
};
std::optional<HubQuant> parse_hub_quant(std::string_view path);

// One file of a commit's tree listing.
struct HubFile {
    std::string path;    // inside the repository
    uint64_t size = 0;   // bytes
    std::string sha256;  // lfs.oid: the file's sha256, "" for a file not stored in LFS
};

// The commit `revision` names in `repo`: itself when it is 40 hex digits, else the branch or tag of that
// name (GET ENDPOINT/api/models/ORG/REPO/refs). Throws Error (exit 2) naming the branches and tags when
// there is none of that name.
std::string hub_commit(const std::string& display, const std::string& repo, const std::string& revision);

// Every file of `repo` at `commit` (GET ENDPOINT/api/models/ORG/REPO/tree/COMMIT?recursive=true, pages
// followed), parsed from the Hub's JSON; `display` names the model in errors. Throws Error (exit 2) for an
// answer that is not a listing, IoError for transport failures.
std::vector<HubFile> hub_tree(const std::string& display, const std::string& repo, const std::string& commit);
// The same from a listing's JSON text (the tests and the fuzz target give it directly).
std::vector<HubFile> parse_hub_tree(const std::string& display, std::string_view json);

// The .gguf set `quant` picks among `files` (in the listing's order of its shards): the model files
// (llama.cpp's rule: not mmproj, imatrix, mtp-, eagle3-, dflash- or dspark-) grouped into sets by their
// -NNNNN-of-MMMMM names, and the one set whose path holds QUANT as a word (after the start, '/', '-', '.'
// or '_', before '.', '-' or '/'), compared without regard to case. Throws Error (exit 2) listing the
// candidates when no set or more than one matches, or when the set's listing lacks a shard.
std::vector<HubFile> pick_hub_quant(const std::string& display, const std::vector<HubFile>& files,
                                    const std::string& quant);

// hf://ORG/REPO:QUANT[@REVISION] resolved: the commit, the set's files, and the hf://ORG/REPO/PATH@COMMIT
// of its first shard. Once per process and path (the same answer after the first); thread-safe.
struct HubModel {
    std::string commit;
    std::vector<HubFile> files;
    std::string first_shard;
};
HubModel resolve_hub_quant(const std::string& display, const HubQuant& q);

// The sha256 (lfs.oid) the Hub's listing gave for PATH of `repo` at `commit`, when a set resolved in this
// process (resolve_hub_quant) holds that file; "" otherwise. The Hub's word, not checked here: a splice
// reads only ranges of the file.
std::string hub_listed_sha256(const std::string& repo, const std::string& commit, const std::string& path);

}  // namespace gguf_reap
