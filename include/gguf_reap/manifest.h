// A manifest: sha256 of every shard of a model and of every tensor payload in it, so that a copy can be
// verified later (after an upload and a download) without the source model. Written by
// `audit --manifest-out FILE` as JSON plus a `sha256sum -c` compatible text file beside it; read by
// `audit --manifest FILE` (verify this very model) and `audit --source-manifest FILE` (verify a pruned
// output of this model without reading it). Schema (docs/audit.md), version 2:
//   { "format": "gguf-reap.manifest", "version": 2, "tool": "gguf-reap 0.1.0",
//     "shards": [ { "name": "out-00001-of-00003.gguf", "size": N, "sha256": "<64 hex>",
//                   "header": "<base64 of the bytes before the data section's padding>",
//                   "tensors": [ { "name", "offset" (absolute in the file), "nbytes", "sha256",
//                                  expert-indexed tensors also "slab_bytes", "slabs": ["<64 hex>", ...]
//                                  (one per expert, in expert order) } ] } ] }
// Version 1 (no header, no slabs) is still read; it serves --manifest only.
// Shard names are file names without a directory: a copy is verified wherever it lives.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace gguf_reap {

// The "format" member of every manifest.
inline constexpr const char* kManifestFormat = "gguf-reap.manifest";

// Digests are held as 32 bytes, not as their 64 hex digits: a Kimi-K3 source manifest has 412,160.
// (The same type as Sha256::Digest, src/io/sha256.h.)
using ManifestDigest = std::array<uint8_t, 32>;
struct ManifestTensor {
    std::string name;
    uint64_t offset = 0;  // absolute byte offset of the payload in its shard file
    uint64_t nbytes = 0;
    ManifestDigest sha256{};
    // Expert-indexed tensors (version 2): expert e's bytes are [offset + e·slab_bytes, +slab_bytes).
    uint64_t slab_bytes = 0;
    std::vector<ManifestDigest> slabs;  // sha256 of each expert's slab; empty for other tensors
};

struct ManifestShard {
    std::string name;  // file name only
    uint64_t size = 0;
    std::string sha256;
    std::vector<ManifestTensor> tensors;  // in file order
    std::vector<uint8_t> header;          // version 2: bytes [0, end of the tensor infos) of the file
};

struct Manifest {
    static constexpr int kVersion = 2;  // what to_json writes
    int version = kVersion;             // what parse read
    std::string tool;
    std::vector<ManifestShard> shards;  // in shard order

    const ManifestShard* find_shard(std::string_view name) const;

    nlohmann::ordered_json to_json() const;
    // One "<sha256>  <name>" line per shard: `cd OUTDIR && sha256sum -c FILE` checks the shards.
    std::string sha256sum_text() const;

    // Throws InputError naming the file, the byte offset (JSON syntax) or the JSON path of a bad field.
    // One SAX pass: no tree of the slab hashes is built, and load() streams the file (no copy of its text).
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
