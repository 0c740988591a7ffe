// A text of eval's or calibrate's read and hashed (gguf_reap/text_input.h): one loop for both.
#pragma once

#include <string>

#include "gguf_reap/text_input.h"

namespace gguf_reap {

// Texts are read whole, to be hashed (and by calibrate cut): at most 1 GiB.
inline constexpr uint64_t kTextLimit = uint64_t{1} << 30;

struct LoadedText {
    TextFacts facts;    // name, path, sha256, bytes; the tokens are the caller's to count
    std::string bytes;  // the file's bytes
};
// IoError when it cannot be read; InputError when larger than kTextLimit.
LoadedText load_text(const TextInput& t);

}  // namespace gguf_reap
