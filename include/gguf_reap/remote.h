// How the library reaches models at URLs (docs/remote.md): the Hub's endpoint and token, and the HTTP
// client's retries, timeouts and connections. The library reads no environment variable: the command
// fills these from GGUF_REAP_HTTP_* and HF_* (src/cli/environment.cpp), an embedder sets them itself.
// Set them before the first remote read; a read in flight keeps the ones it started with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gguf_reap {

struct RemoteSettings {
    std::string hub_endpoint = "https://huggingface.co";  // what hf://ORG/REPO/PATH resolves against
    std::optional<std::string> hub_token;  // sent only to hub_endpoint's origin; never printed or logged
    std::string hub_token_file;  // read for the token when hub_token is unset, and named in 401/403 hints
    // The Hugging Face cache's root (models--ORG--REPO/snapshots/COMMIT/PATH): an hf:// file pinned to a
    // commit is read from there when the copy is the Hub's file (docs/remote.md); "" for none.
    std::string hub_cache;
    uint32_t http_retries = 6;  // attempts after the first, for a status or an error worth retrying
    uint64_t http_first_backoff_ms = 500;  // the first wait between attempts, doubling up to 30 s
    uint32_t http_stall_seconds = 30;      // the connect timeout, and the longest a transfer may send nothing
    uint32_t http_connections = 16;        // ranged GETs in flight per remote file, 1 to 64
};

// Throws UsageError naming the field when a value is out of range (a stall of 0 s, 0 or over 64
// connections).
void set_remote_settings(const RemoteSettings& s);
RemoteSettings remote_settings();

}  // namespace gguf_reap
