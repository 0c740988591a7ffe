// Rendering helpers shared by commands (text and JSON). No logic a test of an operation needs.
#pragma once

#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "format/imatrix.h"

namespace gguf_reap::cli {

// A KV value as JSON: scalars as numbers/bools/strings; arrays as {"array_of": "STRING", "len": N}
// (the layout of ../shared/fixtures/expected.json).
nlohmann::ordered_json kv_json(const Kv& kv);

nlohmann::ordered_json imatrix_json(const ImatrixFile& im, bool with_entries);
void imatrix_text(const ImatrixFile& im, bool with_entries);

}  // namespace gguf_reap::cli
