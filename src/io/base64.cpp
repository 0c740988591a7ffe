#include "io/base64.h"

#include <openssl/evp.h>

#include <climits>

namespace gguf_reap {

namespace {

bool in_alphabet(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

}  // namespace

std::string base64_encode(std::span<const uint8_t> bytes) {
    std::string out;
    // EVP_EncodeBlock takes an int: encode in pieces of 3 MiB (a multiple of 3, so no padding between).
    constexpr size_t kPiece = size_t{3} << 20;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::string buf;
    for (size_t at = 0; at < bytes.size(); at += kPiece) {
        const size_t n = std::min(kPiece, bytes.size() - at);
        buf.resize((n + 2) / 3 * 4 + 1);
        const int w = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(buf.data()), bytes.data() + at,
                                      static_cast<int>(n));
        out.append(buf.data(), static_cast<size_t>(w));
    }
    return out;
}

std::optional<std::vector<uint8_t>> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) return std::nullopt;
    size_t pad = 0;
    while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
    // EVP_DecodeBlock skips leading and trailing white space; the canonical form has none anywhere.
    for (size_t i = 0; i + pad < text.size(); ++i)
        if (!in_alphabet(text[i])) return std::nullopt;
    std::vector<uint8_t> out;
    out.reserve(text.size() / 4 * 3);
    constexpr size_t kPiece = size_t{4} << 20;  // a multiple of 4, under INT_MAX
    std::vector<uint8_t> buf;
    for (size_t at = 0; at < text.size(); at += kPiece) {
        const size_t n = std::min(kPiece, text.size() - at);
        buf.resize(n / 4 * 3);
        const int w = EVP_DecodeBlock(buf.data(), reinterpret_cast<const unsigned char*>(text.data() + at),
                                      static_cast<int>(n));
        if (w < 0) return std::nullopt;
        out.insert(out.end(), buf.begin(), buf.begin() + w);
    }
    // EVP_DecodeBlock counts the bytes the padding stands for as zeros.
    out.resize(out.size() - pad);
    return out;
}

}  // namespace gguf_reap
