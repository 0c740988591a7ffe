#include "model/vocab_text.h"

#include <array>
#include <cstdio>

#include <fmt/format.h>

#include "gguf_reap/error.h"

namespace gguf_reap {

namespace {

// GPT-2's bytes_to_unicode: bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for themselves; the other 68
// bytes, in order, are stored as U+0100 onwards.
const std::array<int, 512>& byte_of_code_point() {
    static const std::array<int, 512> table = [] {
        std::array<int, 512> t{};
        t.fill(-1);
        int next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
            t[static_cast<size_t>(printable ? b : next++)] = b;
        }
        return t;
    }();
    return table;
}

// The next code point of UTF-8 `s` at `i` (advancing i), or -1 (one byte consumed) when invalid.
int32_t next_code_point(const std::string& s, size_t& i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    const int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xe ? 3 : (b0 >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + static_cast<size_t>(len) > s.size()) {
        ++i;
        return -1;
    }
    int32_t cp = len == 1 ? b0 : b0 & (0x7f >> len);
    for (int k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
        if ((b >> 6) != 0x2) {
            ++i;
            return -1;
        }
        cp = (cp << 6) | (b & 0x3f);
    }
    const int32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        ++i;
        return -1;
    }
    i += static_cast<size_t>(len);
    return cp;
}

// Valid UTF-8 kept; every byte of an invalid sequence as "<0xNN>".
std::string valid_utf8(const std::string& bytes) {
    std::string out;
    for (size_t i = 0; i < bytes.size();) {
        const size_t start = i;
        if (next_code_point(bytes, i) < 0)
            out += fmt::format("<0x{:02X}>", static_cast<unsigned char>(bytes[start]));
        else
            out.append(bytes, start, i - start);
    }
    return out;
}

std::string decode_byte_level(const std::string& piece) {
    const auto& table = byte_of_code_point();
    std::string bytes;
    for (size_t i = 0; i < piece.size();) {
        const size_t start = i;
        const int32_t cp = next_code_point(piece, i);
        if (cp >= 0 && cp < 512 && table[static_cast<size_t>(cp)] >= 0)
            bytes += static_cast<char>(table[static_cast<size_t>(cp)]);
        else
            bytes.append(piece, start, i - start);  // an added token's own text
    }
    return bytes;
}

std::string decode_sentencepiece(const std::string& piece) {
    static const std::string kSpace = "\xe2\x96\x81";  // U+2581 '▁'
    if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>') {
        unsigned v = 0;
        if (std::sscanf(piece.c_str() + 3, "%2x", &v) == 1) return std::string(1, static_cast<char>(v));
    }
    std::string out;
    for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, kSpace.size(), kSpace) == 0) {
            out += ' ';
            i += kSpace.size();
        } else {
            out += piece[i++];
        }
    }
    return out;
}

}  // namespace

VocabText::VocabText(std::vector<std::string> pieces, std::string tokenizer)
    : pieces_(std::move(pieces)), tokenizer_(std::move(tokenizer)) {}

VocabText VocabText::of(const ShardSet& model) {
    const Kv* tokens = model.find_kv("tokenizer.ggml.tokens");
    auto pieces = tokens ? tokens->as_string_array() : std::nullopt;
    if (!pieces)
        throw InputError(model.shards().front().path,
                         tokens ? std::optional(tokens->file_offset) : std::nullopt, "tokenizer.ggml.tokens",
                         "the model has no vocabulary (an array of strings)");
    const Kv* kind = model.find_kv("tokenizer.ggml.model");
    return VocabText(std::move(*pieces), kind ? kind->as_string().value_or("") : "");
}

std::string VocabText::text(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return fmt::format("<token {}>", id);
    const std::string& piece = pieces_[static_cast<size_t>(id)];
    if (tokenizer_ == "gpt2") return valid_utf8(decode_byte_level(piece));
    if (tokenizer_ == "llama") return valid_utf8(decode_sentencepiece(piece));
    return valid_utf8(piece);
}

std::optional<std::string> VocabText::bytes(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return std::nullopt;
    const std::string& piece = pieces_[static_cast<size_t>(id)];
    if (tokenizer_ == "gpt2") return decode_byte_level(piece);
    if (tokenizer_ == "llama") return decode_sentencepiece(piece);
    return piece;
}

std::string quoted_text(const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
        switch (ch) {
            case '\n':
                out += "\\n";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '"':
                out += "\\\"";
                break;
            default:
                if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
                    out += fmt::format("\\x{:02x}", static_cast<unsigned char>(ch));
                else
                    out += ch;
        }
    }
    return out + "\"";
}

}  // namespace gguf_reap
