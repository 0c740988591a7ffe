// rank --from-plan: another tool's plan (gguf_reap/plan_interchange.h), read by the read step
// (rank_input.cpp) once the inputs are, and held against their MoE blocks and experts. The decision
// then keeps what it keeps (rank_keep.h).
#pragma once

#include <string>

#include "gguf_reap/rank.h"

namespace gguf_reap {

// The plan at `path` with its sha256 (with `hash`; else ""), checked against the blocks and experts of
// `in` (the model at `model_path`, "" without one; `external`: the blocks came from score files).
// Throws UsageError for a plan of another model, InputError for a bad file.
RankInput::Imported import_plan(const std::string& path, bool hash, const std::string& model_path,
                                bool external, const RankInput& in);

}  // namespace gguf_reap
