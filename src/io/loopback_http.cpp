#include "io/loopback_http.h"

#include <curl/curl.h>

#include <map>
#include <mutex>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/remote.h"
#include "io/http_client.h"

namespace gguf_reap {

namespace {

// A reply larger than this is not one llama-server sends for the requests made here.
constexpr size_t kMaxBody = size_t{256} << 20;

size_t on_data(char* data, size_t size, size_t n, void* user) {
    auto* body = static_cast<std::string*>(user);
    const size_t bytes = size * n;
    if (body->size() + bytes > kMaxBody) return 0;  // curl reports a write error
    body->append(data, bytes);
    return bytes;
}

// The options every transfer here has: a loopback URL, no proxy whatever the environment says, no
// signals (curl's own alarm() for DNS timeouts would fight the project's signal handling), the connect
// timeout of every HTTP transfer (gguf_reap/remote.h).
void common_options(CURL* h, const std::string& url, std::string* body) {
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, static_cast<long>(remote_settings().http_stall_seconds));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
}

}  // namespace

HttpReply http_get(const std::string& url, long timeout_ms) {
    curl_global_once();
    HttpReply r;
    CURL* h = curl_easy_init();
    if (!h) throw IoError("libcurl", "curl_easy_init failed");
    common_options(h, url, &r.body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    const CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    } else {
        r.error = curl_easy_strerror(rc);
        r.timed_out = rc == CURLE_OPERATION_TIMEDOUT;
    }
    curl_easy_cleanup(h);
    return r;
}

struct HttpPool::Impl {
    struct Transfer {
        uint64_t tag = 0;
        std::string url, request, body;
        curl_slist* headers = nullptr;
    };
    CURLM* multi = nullptr;
    std::map<CURL*, Transfer> transfers;

    void finish(CURL* h) {
        curl_multi_remove_handle(multi, h);
        curl_slist_free_all(transfers[h].headers);
        curl_easy_cleanup(h);
        transfers.erase(h);
    }
};

HttpPool::HttpPool() : impl_(std::make_unique<Impl>()) {
    curl_global_once();
    impl_->multi = curl_multi_init();
    if (!impl_->multi) throw IoError("libcurl", "curl_multi_init failed");
}

HttpPool::~HttpPool() {
    while (!impl_->transfers.empty()) impl_->finish(impl_->transfers.begin()->first);
    curl_multi_cleanup(impl_->multi);
}

void HttpPool::post(uint64_t tag, const std::string& url, std::string body, long timeout_ms) {
    CURL* h = curl_easy_init();
    if (!h) throw IoError("libcurl", "curl_easy_init failed");
    Impl::Transfer& t = impl_->transfers[h];
    t.tag = tag;
    t.url = url;
    t.request = std::move(body);
    t.headers = curl_slist_append(nullptr, "Content-Type: application/json");
    common_options(h, t.url, &t.body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, t.headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, t.request.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t.request.size()));
    if (curl_multi_add_handle(impl_->multi, h) != CURLM_OK) {
        impl_->finish(h);
        throw IoError("libcurl", "curl_multi_add_handle failed");
    }
}

size_t HttpPool::active() const {
    return impl_->transfers.size();
}

std::vector<HttpPool::Done> HttpPool::poll(int wait_ms) {
    int running = 0;
    curl_multi_perform(impl_->multi, &running);
    if (running > 0) {
        curl_multi_poll(impl_->multi, nullptr, 0, wait_ms, nullptr);
        curl_multi_perform(impl_->multi, &running);
    }
    std::vector<Done> done;
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(impl_->multi, &left)) {
        if (m->msg != CURLMSG_DONE) continue;
        CURL* h = m->easy_handle;
        Impl::Transfer& t = impl_->transfers[h];
        Done d;
        d.tag = t.tag;
        if (m->data.result == CURLE_OK) {
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &d.reply.status);
            d.reply.body = std::move(t.body);
        } else {
            d.reply.error = curl_easy_strerror(m->data.result);
            d.reply.timed_out = m->data.result == CURLE_OPERATION_TIMEDOUT;
        }
        done.push_back(std::move(d));
        impl_->finish(h);
    }
    return done;
}

}  // namespace gguf_reap
