#include "cli/options.h"

#include <algorithm>
#include <string_view>

namespace gguf_reap::cli {

// Every option is "--" and the field's name with '-' for '_' (kImatrixIn → --imatrix-in), but the
// output, which each command takes as -o. tools/request_fields.py (ctest request_fields) checks that each
// field a request declares is an option its command registers, spelled so.
std::string option_spelling(RequestField f) {
    if (std::string_view(f.name) == "out") return "-o";
    std::string s = std::string("--") + f.name;
    std::replace(s.begin(), s.end(), '_', '-');
    return s;
}

std::string option_message(const Message& m) {
    return render(m, option_spelling);
}

}  // namespace gguf_reap::cli
