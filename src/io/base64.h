// Base64 (RFC 4648, with padding, no line breaks) through OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock:
// how a manifest carries a shard's header bytes inside JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gguf_reap {

std::string base64_encode(std::span<const uint8_t> bytes);
// nullopt when `text` is not canonical base64 (length not a multiple of 4, a character outside the
// alphabet, padding anywhere but at the end).
std::optional<std::vector<uint8_t>> base64_decode(std::string_view text);

}  // namespace gguf_reap
