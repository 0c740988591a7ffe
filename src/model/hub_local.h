// An hf:// model given to a program that reads only local files (llama.cpp's tools, which eval and
// calibrate run): its copy in the local Hugging Face cache (io/hub_cache.h, docs/remote.md "The local
// Hugging Face cache"), or a refusal that names the one command that puts it there.
#pragma once

#include <string>

namespace gguf_reap {

// `path` itself when it is not an hf:// path. For hf://ORG/REPO:QUANT[@REVISION] and
// hf://ORG/REPO/PATH[@REVISION], pinned as every command pins them (a HEAD per shard, no byte of a
// file): the cache's copy of the first shard (ROOT/models--ORG--REPO/snapshots/COMMIT/PATH), when the
// cache holds every shard as the Hub's file. Throws Error (exit 2) otherwise, naming the command that
// downloads it (`hf download ORG/REPO --include 'PATTERN'`, with --revision COMMIT when a revision was
// given, and --force-download when the copy there is not the Hub's file).
std::string local_model_file(const std::string& path);

}  // namespace gguf_reap
