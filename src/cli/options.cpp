#include "cli/options.h"

#include <algorithm>

namespace gguf_reap::cli {

// Every option is "--" and the field's name with '-' for '_' (kImatrixIn → --imatrix-in), but the
// output, which each command takes as -o. request_error_test checks that each spelling is an option a
// command registers.
std::string option_spelling(RequestField f) {
    if (f == RequestField::kOut) return "-o";
    std::string s = std::string("--") + field_name(f);
    std::replace(s.begin(), s.end(), '_', '-');
    return s;
}

std::string option_message(const Message& m) {
    return render(m, option_spelling);
}

}  // namespace gguf_reap::cli
