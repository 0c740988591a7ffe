// SHA-256 over OpenSSL's EVP interface, streaming: feed bytes as they are read, never a whole file.
// EVP picks the CPU's SHA extensions when present (SHA-NI on x86-64, ARMv8 crypto), which is what
// makes hashing keep up with the disk.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace gguf_reap {

class Sha256 {
  public:
    using Digest = std::array<uint8_t, 32>;

    Sha256();  // throws IoError when libcrypto cannot set up a digest
    ~Sha256();
    Sha256(Sha256&& other) noexcept;
    Sha256& operator=(Sha256&& other) noexcept;
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    void update(const void* data, size_t n);
    void update(std::span<const uint8_t> bytes) { update(bytes.data(), bytes.size()); }
    // The digest of everything fed since construction or the last reset(); resets for reuse.
    Digest finish();
    std::string finish_hex();
    void reset();

  private:
    evp_md_ctx_st* ctx_ = nullptr;
};

// Lower-case hex of a byte string.
std::string to_hex(std::span<const uint8_t> bytes);
// One-shot digest, lower-case hex.
std::string sha256_hex(const void* data, size_t n);
class InputFile;
// The digest of a whole file, lower-case hex (what sha256sum prints), read front to back with pread
// through a SequentialReader of 1 MiB; stops with Interrupted on SIGINT/SIGTERM. IoError when it cannot be
// read.
std::string sha256_file(const InputFile& f);
std::string sha256_file(const std::string& path);
// True for exactly 64 lower-case hex digits (the form sha256sum prints).
bool is_sha256_hex(std::string_view s);
// The digest those 64 digits spell; nullopt for anything else.
std::optional<Sha256::Digest> sha256_from_hex(std::string_view s);

}  // namespace gguf_reap
