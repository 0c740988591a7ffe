// The local Hugging Face cache (docs/remote.md, "The local Hugging Face cache"), in the layout
// huggingface_hub and llama.cpp write: ROOT/models--ORG--REPO/snapshots/COMMIT/PATH, an entry that is
// usually a symlink into ROOT/models--ORG--REPO/blobs/, ROOT the settings' hub_cache. A file of an hf://
// model, once pinned to a commit, is read from there when the copy is the Hub's file (io/remote_file.h).
#pragma once

#include <cstdint>
#include <string>

namespace gguf_reap {

// What the cache holds for PATH of `repo` at `commit`.
struct HubCacheEntry {
    std::string path;      // ROOT/models--ORG--REPO/snapshots/COMMIT/PATH; "" with no cache, or no commit
    bool present = false;  // something is there
    std::string problem;   // "" when it is the Hub's file, else why it is not ("holds 10 bytes, ...")
    bool usable() const { return present && problem.empty(); }
};

// The entry for PATH of `repo` at `commit` (40 hex digits; any other revision has no snapshot) against
// the pinned `size` and, when known, the Hub's `sha256` (lfs.oid, or the X-Linked-Etag): the copy is the
// Hub's file when its size is `size` and, where the entry leads to a blob named by a sha256, that name is
// `sha256`. A dangling symlink (its blob removed) is nothing there. Reads the file system only.
HubCacheEntry find_in_hub_cache(const std::string& repo, const std::string& commit, const std::string& file,
                                uint64_t size, const std::string& sha256);

// The sha256 an ETag names (the Hub's X-Linked-Etag of an LFS file: "HEX", quoted, perhaps W/), or "".
std::string sha256_of_etag(const std::string& etag);

// The one command that puts files into the cache: hf download ORG/REPO --include 'PATTERN', then
// --revision REVISION when `revision` is not empty.
std::string hf_download_command(const std::string& repo, const std::string& pattern,
                                const std::string& revision);

}  // namespace gguf_reap
