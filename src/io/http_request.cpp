// One HTTP request through libcurl, one hop (io/http_request.h).
#include "io/http_request.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/version.h"
#include "io/remote_url.h"
#include "io/signals.h"

namespace gguf_reap {

namespace {

std::atomic<bool> g_cancel{false};

// One easy handle per thread, reset for each request: its connection stays open for the next one.
struct Handle {
    CURL* h = nullptr;
    Handle() {
        curl_global_once();
        h = curl_easy_init();
    }
    ~Handle() {
        if (h) curl_easy_cleanup(h);
    }
};
CURL* thread_handle() {
    thread_local Handle handle;
    if (!handle.h) throw IoError("libcurl", "cannot create a handle");
    return handle.h;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

struct Transfer {
    Reply* reply;
    BodyCheck* body;  // null for HEAD and for a TextBody
    CURL* h;
    TextBody* text = nullptr;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    std::string line(data, size * n);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.starts_with("HTTP/")) {
        t->reply->headers.clear();
        return size * n;
    }
    const auto colon = line.find(':');
    if (colon == std::string::npos) return size * n;
    std::string value = line.substr(colon + 1);
    const auto first = value.find_first_not_of(" \t");
    value = first == std::string::npos ? std::string() : value.substr(first);
    t->reply->headers[lower(line.substr(0, colon))] = value;
    return size * n;
}

// The checks on a 206 before its first byte is stored; "" when it is what was asked.
std::string check_partial(const Reply& r, const BodyCheck& b) {
    const HttpPin& pin = *b.pin;
    const std::string want = fmt::format("bytes {}-{}/{}", b.from, b.to, pin.size);
    const auto cr = r.header("content-range");
    if (!cr) return fmt::format("asked for bytes {}-{}, the answer has no Content-Range", b.from, b.to);
    if (*cr != want)
        return fmt::format("asked for bytes {}-{} of {}, the server answered Content-Range '{}'", b.from,
                           b.to, pin.size, *cr);
    if (!pin.etag.empty()) {
        const auto etag = r.header("etag");
        if (!etag || *etag != pin.etag)
            return fmt::format(
                "changed on the server while gguf-reap was reading it: ETag {} at the start, "
                "now {}; nothing made from it is kept, run again",
                pin.etag, etag ? *etag : "absent");
    }
    if (const auto len = r.header("content-length"); len && *len != std::to_string(b.to - b.from + 1))
        return fmt::format("asked for {} bytes, the server announced Content-Length {}", b.to - b.from + 1,
                           *len);
    return {};
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    Reply& r = *t->reply;
    const size_t len = size * n;
    long status = 0;
    if (t->text) {
        curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &status);
        if (status != 200) return len;  // an error page or a redirect body
        if (len > t->text->cap - t->text->out->size()) {
            r.refused = fmt::format("the answer is longer than {} bytes", t->text->cap);
            return 0;
        }
        t->text->out->append(data, len);
        r.received += len;
        return len;
    }
    if (!t->body) return len;
    curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 206 && status != 200) return len;  // an error page or a redirect body: not ours
    BodyCheck& b = *t->body;
    if (status == 200) {
        r.refused = fmt::format(
            "asked for bytes {}-{}, the server answered 200 with the whole file: it does not serve ranges "
            "(gguf-reap never downloads a whole file to use a part of it)",
            b.from, b.to);
        return 0;
    }
    if (!b.checked) {
        r.refused = check_partial(r, b);
        if (!r.refused.empty()) return 0;
        b.checked = true;
    }
    const uint64_t want = b.to - b.from + 1;
    if (len > want - r.received) {
        r.refused = fmt::format("asked for {} bytes, the server sent more", want);
        return 0;
    }
    if (!*b.base) {
        try {
            *b.base = (*b.acquire)();
        } catch (...) {
            b.error = std::current_exception();
            return 0;
        }
        if (!*b.base) {
            b.abandoned = true;
            return 0;
        }
    }
    std::memcpy(*b.base + b.skip + r.received, data, len);
    r.received += len;
    return len;
}

int on_progress(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return interrupted() || http_cancelled() ? 1 : 0;
}

}  // namespace

Reply http_send(const std::string& url, BodyCheck* body, bool with_token, TextBody* text,
                long stall_seconds) {
    CURL* h = thread_handle();
    curl_easy_reset(h);
    Reply r;
    Transfer t{&r, body, h, text};
    curl_slist* headers = nullptr;
    std::string range;
    std::string auth;
    if (with_token)
        if (const auto token = hub_token()) {
            auth = "Authorization: Bearer " + *token;
            headers = curl_slist_append(headers, auth.c_str());
        }
    char errbuf[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // hop by hop, for the token rule
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "gguf-reap/" GGUF_REAP_VERSION_STRING);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, stall_seconds);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, stall_seconds);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (body) {
        range = fmt::format("{}-{}", body->from, body->to);
        curl_easy_setopt(h, CURLOPT_RANGE, range.c_str());
    } else if (text) {
        headers = curl_slist_append(headers, "Accept: application/json");
    } else {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    }
    if (headers) curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    r.code = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    if (r.status >= 300 && r.status < 400) {
        char* loc = nullptr;
        if (curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc) r.location = loc;
    }
    if (r.code != CURLE_OK) r.curl_error = errbuf[0] ? errbuf : curl_easy_strerror(r.code);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
    curl_slist_free_all(headers);
    std::fill(auth.begin(), auth.end(), '\0');
    return r;
}

bool http_cancelled() {
    return g_cancel.load();
}

void cancel_http() {
    g_cancel = true;
}

}  // namespace gguf_reap
