// A model's identity as eval, calibrate and card record it: the sha256 over every shard's header bytes
// [0, data_start), in shard order. Two files of the same tensors and keys have the same identity wherever
// they live; a copy that differs in any key or tensor info does not.
#pragma once

#include <string>

#include "model/shard_set.h"

namespace gguf_reap {

// Reads the header bytes of every shard (not the tensor data). Throws IoError.
std::string source_identity(const ShardSet& s);

}  // namespace gguf_reap
