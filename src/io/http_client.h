// HTTP for remote models (docs/remote.md), on libcurl: a HEAD that pins a file's size and ETag, and
// ranged GETs that are checked byte for byte against that pin. Redirects are followed here, hop by
// hop, so that the Hub token goes only to $HF_ENDPOINT's origin and never to the host a redirect
// leads to. Every response is checked (status 206, Content-Range exactly as asked with the pinned
// size, the pinned ETag, the length); what fails a check is refused (IoError, exit 3) rather than
// retried. 5xx, 429 (after its Retry-After), 408, timeouts and dropped connections are retried with
// exponential backoff, and a body cut short resumes at the byte where it stopped. 404 and 401/403
// are bad input (exit 2). TLS is always verified.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace gguf_reap {

// A remote file as pinned at the start: its name for messages (the user's URL), where requests go
// first, and what every response must agree with.
struct HttpPin {
    std::string display;     // the path the user gave (hf://… or the URL); never a redirect target
    std::string origin_url;  // the first URL asked (hf:// resolved to its pinned commit)
    uint64_t size = 0;
    std::string etag;         // "" when the server sent none (then nothing to compare)
    std::string repo_commit;  // X-Repo-Commit of the first response, "" without one
    // X-Linked-Etag of the first response, "" without one: the Hub sends it (and X-Linked-Size, then the
    // pinned size) on the redirect from /resolve/, whose target may send no ETag of its own. Compared
    // again at the end-of-run check and on every walk from the origin (docs/remote.md "What is pinned").
    std::string linked_etag;
    // The file's identity for a resume and for messages: the X-Linked-Etag when there is one, else the ETag.
    const std::string& identity() const { return linked_etag.empty() ? etag : linked_etag; }
};

// "changed on the server while gguf-reap was reading it (WHAT); nothing made from it is kept: run again",
// the message (exit 3) of a source that is no longer what was pinned.
std::string changed_on_server(const std::string& what);

// The final URL a pin's requests were last redirected to, remembered so that ranges do not walk the
// redirect chain each time (a signed CDN URL that expires is walked again from the origin).
class RedirectCache {
  public:
    std::string get() const;
    void set(std::string url);

  private:
    mutable std::mutex mu_;
    std::string url_;
};

// HEAD of `url`, redirects followed; size (the first response's X-Linked-Size, else the final
// Content-Length) and ETag of the final response, and the first response's X-Repo-Commit and X-Linked-Etag.
// `display` names the file in errors. Throws Error (exit 2: 404, 401, 403), IoError (exit 3), Interrupted.
HttpPin http_pin(const std::string& display, const std::string& url, RedirectCache& cache);

// Bytes [offset, offset + n) of the pinned file into dst, checked against the pin.
void http_get_range(const HttpPin& pin, RedirectCache& cache, uint64_t offset, uint64_t n, uint8_t* dst);
// The same, with the destination asked for only when the first body byte has arrived and passed the
// checks (so that a request waiting on its round trip holds no buffer): `acquire` returns where the n
// bytes go, or nullptr when they are no longer wanted (then Interrupted is thrown). It may block; it
// is called at most once, from the calling thread.
void http_get_range(const HttpPin& pin, RedirectCache& cache, uint64_t offset, uint64_t n,
                    const std::function<uint8_t*()>& acquire);

// GET of a small document (a Hub API answer), whole: redirects followed under the token rule, failures
// retried as for ranges, 404/401/403 refused as for a pin. At most `cap` bytes (IoError past it). With
// `link_next`, the URL of the answer's Link rel="next" header goes there ("" without one): the Hub pages a
// long listing so. Never used for a model's bytes, which are only ever asked for by range.
std::string http_get_text(const std::string& display, const std::string& url, uint64_t cap,
                          std::string* link_next = nullptr);
// Process-wide counts: bytes of ranged bodies received, requests sent (HEADs, GETs, redirects,
// retries), retries.
struct HttpCounts {
    uint64_t bytes = 0;
    uint64_t requests = 0;
    uint64_t retries = 0;
};
HttpCounts http_counts();
// Stops every transfer and retry wait at once (they throw Interrupted): the read-ahead pool's threads
// at exit, so that a run that failed does not wait for fetches nobody will read.
void cancel_http();

// Called with the body bytes of each completed range (a progress line), or cleared with {}.
void set_http_progress(std::function<void(uint64_t)> sink);
// Called with a line for people while a request is being retried: "URL: attempt 2 of 7 failed: Couldn't
// connect to server; next try in 1.0 s", when each wait starts and at least every 10 s of it. The CLI
// shows them on stderr; cleared with {}.
void set_http_notice(std::function<void(const std::string&)> sink);
// A line for people through the same sink (a copy in the Hugging Face cache that is not used, and why).
void http_notice(const std::string& line);

// curl_global_init, once for the process, for this client and io/loopback_http alike; throws IoError when
// libcurl cannot start.
void curl_global_once();

}  // namespace gguf_reap
