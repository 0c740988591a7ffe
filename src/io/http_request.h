// One HTTP request through libcurl, one hop (io/http_client.cpp walks redirects, pins, retries and counts):
// its reply, the checks on a ranged body as it arrives, and a small document read whole. Used by
// http_client.cpp alone.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "io/http_client.h"

namespace gguf_reap {

// What one request (one hop) got back.
struct Reply {
    CURLcode code = CURLE_OK;
    long status = 0;
    std::map<std::string, std::string> headers;  // names lower-case, of the last response
    std::string location;                        // absolute, for a redirect
    uint64_t received = 0;                       // body bytes stored
    std::string refused;                         // a check failed: this says which (exit 3)
    std::string curl_error;
    std::optional<std::string> header(const char* name) const {
        auto it = headers.find(name);
        if (it == headers.end()) return std::nullopt;
        return it->second;
    }
};

// What a ranged body must be, checked when its first byte arrives.
struct BodyCheck {
    const HttpPin* pin = nullptr;
    uint64_t from = 0, to = 0;  // inclusive, as asked
    // Where the whole range goes: *base, taken from `acquire` when the first checked body byte
    // arrives, so that a request waiting on its round trip holds no memory; this attempt's bytes go
    // from *base + skip (a resumed attempt skips what earlier ones stored).
    uint8_t** base = nullptr;
    uint64_t skip = 0;
    const std::function<uint8_t*()>* acquire = nullptr;
    std::exception_ptr error;  // thrown by acquire
    bool abandoned = false;    // acquire said the bytes are no longer wanted
    bool checked = false;
};

// A small document fetched whole (a Hub API answer), at most `cap` bytes.
struct TextBody {
    std::string* out;
    uint64_t cap;
};

// One request to `url`, no redirect followed. `body` null: HEAD, or with `text` a GET of the whole answer.
// The bearer token goes with it when `with_token`; a transfer stalls out after `stall_seconds`.
Reply http_send(const std::string& url, BodyCheck* body, bool with_token, TextBody* text, long stall_seconds);

// Whether cancel_http() was called (a request in flight stops at its next progress callback).
bool http_cancelled();

}  // namespace gguf_reap
