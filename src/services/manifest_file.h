// Manifests and opened models or reserved output files (include/gguf_reap/manifest.h has the manifest).
#pragma once

#include <string>

#include "gguf_reap/manifest.h"
#include "io/output_file.h"
#include "model/shard_set.h"

namespace gguf_reap {

// The model a version 2 manifest describes, built from the shard headers it carries (no files: shard
// "paths" are "MANIFEST:NAME", for messages), each checked against the manifest's own tensor list and
// sizes. What `audit --source-manifest` checks an output against. Throws InputError naming the manifest
// and the field (a version 1 manifest, a missing or unparsable header, a tensor list that disagrees).
ShardSet manifest_model(const Manifest& m, const std::string& path);

// The same into files reserved before the work (OutputFile(path), OutputFile(manifest_sums_path(path))),
// so that an unwritable destination is refused before the audit reads a byte.
void save_manifest(const Manifest& m, OutputFile& json_out, OutputFile& sums_out);

}  // namespace gguf_reap
