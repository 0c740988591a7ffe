// HTTP to a server this process started on the loopback interface (llama-server for eval's behaviour
// runs), through libcurl: one GET at a time, or several POSTs at once driven from the calling thread
// (curl's multi interface), so the caller keeps polling its own state (a child that died, an interrupt)
// between transfers. No proxy is ever used (the URL is 127.0.0.1) and nothing leaves the machine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gguf_reap {

struct HttpReply {
    long status = 0;         // the HTTP status; 0 when no reply arrived
    std::string body;        // the reply's body
    std::string error;       // curl's message when the transfer failed ("" when a reply arrived)
    bool timed_out = false;  // it failed because its time ran out
    bool connected() const { return error.empty(); }
};

// One GET, given at most `timeout_ms` in all. Never throws for a network failure (see `error`).
HttpReply http_get(const std::string& url, long timeout_ms);

// POSTs of JSON bodies in flight together; each reply is handed back with the tag it was posted with.
class HttpPool {
  public:
    HttpPool();
    ~HttpPool();
    HttpPool(const HttpPool&) = delete;
    HttpPool& operator=(const HttpPool&) = delete;

    // Starts a POST of `body` (Content-Type: application/json), given at most `timeout_ms` in all (0:
    // no limit). Throws IoError when curl cannot.
    void post(uint64_t tag, const std::string& url, std::string body, long timeout_ms = 0);
    // Transfers in flight.
    size_t active() const;
    // Moves the transfers on for at most `wait_ms` and returns those that finished, in any order.
    struct Done {
        uint64_t tag = 0;
        HttpReply reply;
    };
    std::vector<Done> poll(int wait_ms);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace gguf_reap
