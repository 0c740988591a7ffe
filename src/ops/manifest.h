// A manifest: sha256 of every shard of a model and of every tensor payload in it, so that a copy can be
// verified later (after an upload and a download) without the source model. Written by
// `audit --manifest-out FILE` as JSON plus a `sha256sum -c` compatible text file beside it; read by
// `audit --manifest FILE`. Schema (docs/audit.md), version 1:
//   { "format": "gguf-reap.manifest", "version": 1, "tool": "gguf-reap 0.1.0",
//     "shards": [ { "name": "out-00001-of-00003.gguf", "size": N, "sha256": "<64 hex>",
//                   "tensors": [ { "name", "offset" (absolute in the file), "nbytes", "sha256" } ] } ] }
// Shard names are file names without a directory: a copy is verified wherever it lives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace gguf_reap {

struct ManifestTensor {
    std::string name;
    uint64_t offset = 0;  // absolute byte offset of the payload in its shard file
    uint64_t nbytes = 0;
    std::string sha256;
};

struct ManifestShard {
    std::string name;  // file name only
    uint64_t size = 0;
    std::string sha256;
    std::vector<ManifestTensor> tensors;  // in file order
};

struct Manifest {
    std::string tool;
    std::vector<ManifestShard> shards;  // in shard order

    const ManifestShard* find_shard(std::string_view name) const;

    nlohmann::ordered_json to_json() const;
    // One "<sha256>  <name>" line per shard: `cd OUTDIR && sha256sum -c FILE` checks the shards.
    std::string sha256sum_text() const;

    // Throws InputError naming the file, the byte offset (JSON syntax) or the JSON path of a bad field.
    static Manifest parse(const std::string& text, const std::string& path_for_messages);
    static Manifest load(const std::string& path);
};

// The text file written beside a JSON manifest: "x.json" → "x.sha256", anything else gets ".sha256".
std::string manifest_sums_path(const std::string& json_path);

// Refuses a manifest destination (the JSON or the text file beside it) that is one of `inputs` (same
// device and inode, symlinks followed) — always — or that exists without `force`. Throws UsageError.
void check_manifest_destination(const std::string& path, const std::vector<std::string>& inputs, bool force);

// Writes the JSON to `path` and the sha256sum text to manifest_sums_path(path), each through a temporary
// file renamed into place. Throws IoError.
void save_manifest(const Manifest& m, const std::string& path);

}  // namespace gguf_reap
