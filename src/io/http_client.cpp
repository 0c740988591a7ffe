#include "io/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/remote.h"
#include "gguf_reap/version.h"
#include "io/http_request.h"
#include "io/remote_url.h"
#include "io/signals.h"

namespace gguf_reap {

namespace {

std::atomic<uint64_t> g_bytes{0}, g_requests{0}, g_retries{0};
std::mutex g_progress_mu;
std::function<void(uint64_t)> g_progress;
std::function<void(const std::string&)> g_notice;  // guarded by g_progress_mu

// The settings of gguf_reap/remote.h (docs/remote.md): attempts, the first backoff, the stall timeout.
uint64_t max_attempts() {
    return uint64_t{remote_settings().http_retries} + 1;
}
uint64_t first_backoff_ms() {
    return remote_settings().http_first_backoff_ms;
}
long stall_seconds() {
    return static_cast<long>(remote_settings().http_stall_seconds);
}
constexpr int kMaxRedirects = 10;
constexpr uint64_t kMaxBackoffMs = 30'000;
constexpr uint64_t kMaxRetryAfterMs = 120'000;
// A wait before a retry says so when it starts and at least this often (docs/remote.md, "Failures and
// retries").
constexpr uint64_t kNoticeEveryMs = 10'000;

std::string what_pinned(const HttpPin& pin) {
    return fmt::format("{} bytes, ETag {}", pin.size, pin.etag.empty() ? "none" : pin.etag);
}

bool transient_curl_error(CURLcode c) {
    switch (c) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_SSL_CONNECT_ERROR:
            return true;
        default:
            return false;
    }
}

// A failure worth another attempt, and how long to wait first (0: the backoff decides).
struct Retry {
    std::string why;
    uint64_t after_ms = 0;
};

std::optional<uint64_t> retry_after_ms(const Reply& r) {
    const auto v = r.header("retry-after");
    if (!v) return std::nullopt;
    uint64_t s = 0;
    const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), s);
    if (ec != std::errc() || p != v->data() + v->size()) return std::nullopt;  // an HTTP date: back off
    return std::min(s * 1000, kMaxRetryAfterMs);
}

bool token_goes_to(const std::string& url) {
    const std::string o = url_origin(url);
    return !o.empty() && o == url_origin(hub_endpoint());
}

// The outcome of a whole request with its redirects: done, or a transient failure to retry. Anything
// else is thrown from here.
struct Walk {
    Reply reply;  // of the final hop
    std::optional<Retry> retry;
    std::string final_url;
    std::string repo_commit;                 // X-Repo-Commit of the first hop
    std::string linked_etag;                 // X-Linked-Etag of the first hop
    std::optional<std::string> linked_size;  // X-Linked-Size of the first hop
};

[[noreturn]] void refuse_status(const std::string& display, const Reply& r, bool token_sent) {
    if (r.status == 404 || r.status == 410)
        throw Error(kExitBadInput, fmt::format("{}: not found (HTTP {})", display, r.status));
    if (r.status == 401 || r.status == 403)
        throw Error(kExitBadInput,
                    fmt::format("{}: access refused (HTTP {}{}): {}", display, r.status,
                                token_sent ? ", with the token given" : ", no token given", token_hint()));
    throw IoError(display, fmt::format("the server answered HTTP {}", r.status));
}

// Sends a request to `start` and follows its redirects. On 404/401/403 from a remembered redirect
// target (a signed URL that expired), the caller walks again from the origin.
Walk walk(const std::string& display, const std::string& start, BodyCheck* body, bool* token_sent,
          TextBody* text = nullptr) {
    Walk w;
    std::string url = start;
    for (int hop = 0;; ++hop) {
        const bool token = token_goes_to(url);
        *token_sent = *token_sent || (token && hub_token().has_value());
        g_requests.fetch_add(1, std::memory_order_relaxed);
        w.reply = http_send(url, body, token, text, stall_seconds());
        const Reply& r = w.reply;
        if (hop == 0) {
            w.repo_commit = r.header("x-repo-commit").value_or("");
            w.linked_etag = r.header("x-linked-etag").value_or("");
            w.linked_size = r.header("x-linked-size");
        }
        if (body && body->error) std::rethrow_exception(body->error);
        if (body && body->abandoned) throw Interrupted();
        if (r.code == CURLE_ABORTED_BY_CALLBACK) {
            if (!r.refused.empty()) throw IoError(display, r.refused);
            throw Interrupted();
        }
        if (r.code == CURLE_WRITE_ERROR && !r.refused.empty()) throw IoError(display, r.refused);
        if (r.code != CURLE_OK) {
            if (transient_curl_error(r.code)) {
                w.retry = Retry{r.curl_error};
                return w;
            }
            throw IoError(display, r.curl_error);
        }
        if (r.status >= 300 && r.status < 400 && r.status != 304) {
            if (r.location.empty())
                throw IoError(display, fmt::format("HTTP {} without a Location", r.status));
            if (hop + 1 >= kMaxRedirects)
                throw IoError(display, fmt::format("more than {} redirects", kMaxRedirects));
            url = r.location;
            continue;
        }
        w.final_url = url;
        if (r.status == 429 || r.status == 503) {
            w.retry = Retry{fmt::format("HTTP {}", r.status), retry_after_ms(r).value_or(0)};
            return w;
        }
        if (r.status >= 500 || r.status == 408) {
            w.retry = Retry{fmt::format("HTTP {}", r.status)};
            return w;
        }
        return w;
    }
}

void notice(const std::string& m) {
    std::function<void(const std::string&)> sink;
    {
        std::lock_guard<std::mutex> lock(g_progress_mu);
        sink = g_notice;
    }
    if (sink) sink(m);
}

}  // namespace

void http_notice(const std::string& line) {
    notice(line);
}

namespace {

std::string seconds(std::chrono::steady_clock::duration d) {
    return fmt::format("{:.1f} s", std::chrono::duration<double>(d).count());
}

// Waits before attempt `attempt` + 2, saying so at once and every kNoticeEveryMs: which attempt failed
// and why, and when the next one starts. A refused connection is otherwise half a minute of silence.
void pause_before(const std::string& display, uint64_t attempt, const Retry& retry) {
    uint64_t ms = retry.after_ms;
    if (ms == 0) ms = std::min(kMaxBackoffMs, first_backoff_ms() << std::min<uint64_t>(attempt, 16));
    g_retries.fetch_add(1, std::memory_order_relaxed);
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto until = start + std::chrono::milliseconds(ms);
    const auto said = [&](bool again) {
        notice(fmt::format("{}: {}attempt {} of {} failed: {}{}; next try in {}", display,
                           again ? "still waiting to retry (" : "", attempt + 1, max_attempts(), retry.why,
                           again ? ")" : "", seconds(until - clock::now())));
    };
    said(false);
    auto next_notice = start + std::chrono::milliseconds(kNoticeEveryMs);
    while (clock::now() < until) {
        check_interrupted();
        if (http_cancelled()) throw Interrupted();
        if (clock::now() >= next_notice) {
            said(true);
            next_notice += std::chrono::milliseconds(kNoticeEveryMs);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min<uint64_t>(ms, 50)));
    }
}

[[noreturn]] void give_up(const std::string& display, const Retry& r) {
    throw IoError(display, fmt::format("gave up after {} attempts: {}", max_attempts(), r.why));
}

}  // namespace

void curl_global_once() {
    static const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK)
        throw IoError("libcurl", fmt::format("initialisation failed: {}", curl_easy_strerror(rc)));
}

std::string changed_on_server(const std::string& what) {
    return fmt::format(
        "changed on the server while gguf-reap was reading it ({}); nothing made from it is "
        "kept: run again",
        what);
}

namespace {

// What a walk from the origin says of the file against its pin: the Hub's redirect names the file's
// X-Linked-Etag and X-Linked-Size again, and a signed URL that expired is where a new version would
// first show. "" when it agrees (or names neither).
std::string linked_change(const HttpPin& pin, const Walk& w) {
    if (!w.linked_etag.empty() && w.linked_etag != pin.linked_etag)
        return fmt::format("its X-Linked-Etag went from {} to {}",
                           pin.linked_etag.empty() ? "none" : pin.linked_etag, w.linked_etag);
    if (w.linked_size && *w.linked_size != std::to_string(pin.size))
        return fmt::format("its size went from {} to {} bytes (X-Linked-Size)", pin.size, *w.linked_size);
    return {};
}

}  // namespace

std::string RedirectCache::get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return url_;
}
void RedirectCache::set(std::string url) {
    std::lock_guard<std::mutex> lock(mu_);
    url_ = std::move(url);
}

HttpPin http_pin(const std::string& display, const std::string& url, RedirectCache& cache) {
    for (uint64_t attempt = 0;; ++attempt) {
        bool token_sent = false;
        Walk w = walk(display, url, nullptr, &token_sent);
        if (w.retry) {
            if (attempt + 1 >= max_attempts()) give_up(display, *w.retry);
            pause_before(display, attempt, *w.retry);
            continue;
        }
        const Reply& r = w.reply;
        if (r.status != 200) refuse_status(display, r, token_sent);
        HttpPin pin;
        pin.display = display;
        pin.origin_url = url;
        // The Hub's X-Linked-Size, where its redirect sends one, is the file's size; every range's
        // Content-Range must then agree with it.
        const auto len = w.linked_size ? w.linked_size : r.header("content-length");
        uint64_t size = 0;
        if (!len || std::from_chars(len->data(), len->data() + len->size(), size).ec != std::errc())
            throw IoError(display, "the server gave no Content-Length, so the file's size cannot be pinned");
        pin.size = size;
        pin.etag = r.header("etag").value_or("");
        pin.repo_commit = w.repo_commit;
        pin.linked_etag = w.linked_etag;
        cache.set(w.final_url);
        return pin;
    }
}

void http_get_range(const HttpPin& pin, RedirectCache& cache, uint64_t offset, uint64_t n, uint8_t* dst) {
    const std::function<uint8_t*()> acquire = [dst] { return dst; };
    http_get_range(pin, cache, offset, n, acquire);
}

void http_get_range(const HttpPin& pin, RedirectCache& cache, uint64_t offset, uint64_t n,
                    const std::function<uint8_t*()>& acquire) {
    if (n == 0) return;
    uint8_t* dst = nullptr;
    if (offset > pin.size || n > pin.size - offset)
        throw IoError(pin.display, fmt::format("read of bytes {}-{} past the end of the {}-byte file", offset,
                                               offset + n - 1, pin.size));
    uint64_t done = 0;
    bool from_origin = false;
    for (uint64_t attempt = 0;;) {
        BodyCheck body;
        body.pin = &pin;
        body.from = offset + done;
        body.to = offset + n - 1;
        body.base = &dst;
        body.skip = done;
        body.acquire = &acquire;
        const std::string start = from_origin ? pin.origin_url : cache.get();
        bool token_sent = false;
        Walk w = walk(pin.display, start, &body, &token_sent);
        if (from_origin)
            if (const std::string what = linked_change(pin, w); !what.empty())
                throw IoError(pin.display, changed_on_server(what));
        done += w.reply.received;
        g_bytes.fetch_add(w.reply.received, std::memory_order_relaxed);
        if (done == n && w.reply.status == 206 && !w.retry) {
            // After a walk from the origin, its target is the one to remember: the expired one would
            // cost every later range a refusal and a walk of its own.
            if (from_origin) cache.set(w.final_url);
            break;
        }
        if (w.reply.received > 0) attempt = 0;  // a cut body that made progress resumes without penalty
        if (!w.retry && w.reply.status == 206) w.retry = Retry{"the body ended early"};
        if (!w.retry) {
            const long st = w.reply.status;
            if ((st == 404 || st == 410 || st == 401 || st == 403) && !from_origin &&
                start != pin.origin_url) {
                from_origin = true;  // the remembered redirect target expired: ask the origin again
                continue;
            }
            if (st == 416)
                throw IoError(pin.display,
                              fmt::format("the server refused bytes {}-{} (HTTP 416): the file is "
                                          "no longer the {} pinned at the start",
                                          offset + done, offset + n - 1, what_pinned(pin)));
            if (st == 200)
                throw IoError(pin.display,
                              fmt::format("asked for bytes {}-{}, the server answered 200 with the "
                                          "whole file: it does not serve ranges",
                                          offset + done, offset + n - 1));
            refuse_status(pin.display, w.reply, token_sent);
        }
        if (!w.final_url.empty()) cache.set(w.final_url);
        if (attempt + 1 >= max_attempts()) give_up(pin.display, *w.retry);
        pause_before(pin.display, attempt, *w.retry);
        ++attempt;
    }
    std::function<void(uint64_t)> sink;
    {
        std::lock_guard<std::mutex> lock(g_progress_mu);
        sink = g_progress;
    }
    if (sink) sink(n);
}

namespace {

// The URL of a Link header's rel="next" (RFC 8288), "" without one.
std::string link_next_url(const std::string& link) {
    size_t at = 0;
    while ((at = link.find('<', at)) != std::string::npos) {
        const auto close = link.find('>', at);
        if (close == std::string::npos) break;
        const auto comma = link.find(',', close);
        const std::string params =
            link.substr(close + 1, comma == std::string::npos ? comma : comma - close - 1);
        if (params.find("rel=\"next\"") != std::string::npos || params.find("rel=next") != std::string::npos)
            return link.substr(at + 1, close - at - 1);
        at = close;
    }
    return {};
}

}  // namespace

std::string http_get_text(const std::string& display, const std::string& url, uint64_t cap,
                          std::string* link_next) {
    for (uint64_t attempt = 0;; ++attempt) {
        std::string out;
        TextBody text{&out, cap};
        bool token_sent = false;
        Walk w = walk(display, url, nullptr, &token_sent, &text);
        if (w.retry) {
            if (attempt + 1 >= max_attempts()) give_up(display, *w.retry);
            pause_before(display, attempt, *w.retry);
            continue;
        }
        if (w.reply.status != 200) refuse_status(display, w.reply, token_sent);
        if (link_next) *link_next = link_next_url(w.reply.header("link").value_or(""));
        return out;
    }
}

HttpCounts http_counts() {
    return {g_bytes.load(), g_requests.load(), g_retries.load()};
}

void set_http_progress(std::function<void(uint64_t)> sink) {
    std::lock_guard<std::mutex> lock(g_progress_mu);
    g_progress = std::move(sink);
}

void set_http_notice(std::function<void(const std::string&)> sink) {
    std::lock_guard<std::mutex> lock(g_progress_mu);
    g_notice = std::move(sink);
}

}  // namespace gguf_reap
