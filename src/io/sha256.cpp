#include "io/sha256.h"

#include <openssl/evp.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "gguf_reap/error.h"
#include "io/input_file.h"
#include "io/sequential_reader.h"

namespace gguf_reap {

namespace {
void init(EVP_MD_CTX* ctx) {
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1)
        throw IoError("libcrypto", "EVP_DigestInit_ex(sha256) failed");
}
}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_) throw IoError("libcrypto", "EVP_MD_CTX_new failed");
    init(ctx_);
}

Sha256::~Sha256() {
    EVP_MD_CTX_free(ctx_);
}

Sha256::Sha256(Sha256&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
    if (this != &other) {
        EVP_MD_CTX_free(ctx_);
        ctx_ = std::exchange(other.ctx_, nullptr);
    }
    return *this;
}

void Sha256::update(const void* data, size_t n) {
    if (n == 0) return;
    if (EVP_DigestUpdate(ctx_, data, n) != 1) throw IoError("libcrypto", "EVP_DigestUpdate failed");
}

Sha256::Digest Sha256::finish() {
    Digest d{};
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_, d.data(), &len) != 1 || len != d.size())
        throw IoError("libcrypto", "EVP_DigestFinal_ex failed");
    init(ctx_);
    return d;
}

std::string Sha256::finish_hex() {
    const Digest d = finish();
    return to_hex(d);
}

void Sha256::reset() {
    init(ctx_);
}

std::string to_hex(std::span<const uint8_t> bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out(bytes.size() * 2, '0');
    for (size_t i = 0; i < bytes.size(); ++i) {
        out[2 * i] = kDigits[bytes[i] >> 4];
        out[2 * i + 1] = kDigits[bytes[i] & 0xf];
    }
    return out;
}

std::string sha256_hex(const void* data, size_t n) {
    Sha256 h;
    h.update(data, n);
    return h.finish_hex();
}

bool is_sha256_hex(std::string_view s) {
    if (s.size() != 64) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

std::optional<Sha256::Digest> sha256_from_hex(std::string_view s) {
    if (!is_sha256_hex(s)) return std::nullopt;
    auto nibble = [](char c) { return static_cast<uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
    Sha256::Digest d;
    for (size_t i = 0; i < d.size(); ++i)
        d[i] = static_cast<uint8_t>(nibble(s[2 * i]) << 4 | nibble(s[2 * i + 1]));
    return d;
}

std::string sha256_file(const InputFile& f) {
    Sha256 h;
    f.advise_sequential(0, f.size());
    read_sequential(f, 0, f.size(), size_t{1} << 20, [&](std::span<const uint8_t> v) { h.update(v); });
    return h.finish_hex();
}

std::string sha256_file(const std::string& path) {
    return sha256_file(*InputFile::open(path));
}

}  // namespace gguf_reap
