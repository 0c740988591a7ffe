// From request fields to the options that set them (gguf_reap/error.h, RequestField): the library names
// a field ("ratio", "imatrix_in"), the user reads the option ("--ratio", "--imatrix-in").
#pragma once

#include <string>

#include "gguf_reap/error.h"

namespace gguf_reap::cli {

// "--ratio" for RankOptions::kRatio.
std::string option_spelling(RequestField f);
// The message with every field spelled as its option.
std::string option_message(const Message& m);

}  // namespace gguf_reap::cli
