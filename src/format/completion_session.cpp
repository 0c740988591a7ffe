#include "format/completion_session.h"

#include <charconv>
#include <string>

#include <fmt/format.h>

#include "format/cursor.h"
#include "gguf_reap/error.h"

namespace gguf_reap {

std::vector<int32_t> parse_session_tokens(ByteSource& src, uint64_t max_tokens) {
    Cursor cur(src);
    const uint64_t at_magic = cur.pos();
    const auto magic = cur.read_le<uint32_t>("magic");
    if (magic != kSessionMagic)
        throw InputError(
            src.name(), at_magic, "magic",
            fmt::format("{:#010x}, not a llama.cpp session file ({:#010x})", magic, kSessionMagic));
    const uint64_t at_version = cur.pos();
    const auto version = cur.read_le<uint32_t>("version");
    if (version != kSessionVersion)
        throw InputError(src.name(), at_version, "version",
                         fmt::format("session file version {}; this gguf-reap reads version {} (llama.cpp "
                                     "34af94cd9's)",
                                     version, kSessionVersion));
    const uint64_t at_count = cur.pos();
    const auto n = cur.read_le<uint32_t>("n_tokens");
    if (n > max_tokens)
        throw InputError(
            src.name(), at_count, "n_tokens",
            fmt::format("{} tokens, more than the {} of the context it was run with", n, max_tokens));
    if (uint64_t{n} * 4 > cur.remaining())
        throw InputError(src.name(), at_count, "n_tokens",
                         fmt::format("{} tokens need {} bytes; the file has {} more (truncated file?)", n,
                                     uint64_t{n} * 4, cur.remaining()));
    std::vector<int32_t> ids(n);
    for (uint32_t i = 0; i < n; ++i)
        ids[i] = cur.read_le<int32_t>([&] { return fmt::format("token #{}", i); });
    return ids;
}

std::optional<int64_t> parse_prompt_token_count(std::string_view log) {
    // The first line that ends in the count: the prompt is echoed on the line before ("prompt: '...'"),
    // and a prompt that holds these words then ends its line in a quote, not in digits.
    constexpr std::string_view kKey = "llama_completion: number of tokens in prompt = ";
    for (size_t at = 0; (at = log.find(kKey, at)) != std::string_view::npos; at += kKey.size()) {
        const char* p = log.data() + at + kKey.size();
        const size_t eol = log.find('\n', at);
        const char* end = log.data() + (eol == std::string_view::npos ? log.size() : eol);
        int64_t v = 0;
        const auto [ptr, ec] = std::from_chars(p, end, v);
        if (ec == std::errc() && ptr != p && ptr == end && v >= 0) return v;
    }
    return std::nullopt;
}

}  // namespace gguf_reap
