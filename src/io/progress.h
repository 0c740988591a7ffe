// A progress line on a terminal: bytes done, rate, ETA, redrawn at most 5 times a second from its own
// thread. Counting is a relaxed atomic add, so copy threads never wait on the display. Disabled (no
// thread, no output) unless the caller asks for it, which the CLI does only when stderr is a tty.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace gguf_reap {

class Progress {
  public:
    // `out` receives the line ("\r...") while enabled; nothing is ever written when !enabled.
    Progress(std::string label, uint64_t total, bool enabled, std::FILE* out = stderr);
    ~Progress();
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    void add(uint64_t n) { done_.fetch_add(n, std::memory_order_relaxed); }
    uint64_t done() const { return done_.load(std::memory_order_relaxed); }
    // Stops the display and erases the line (idempotent).
    void finish();

  private:
    void loop();
    std::string label_;
    uint64_t total_;
    std::FILE* out_;
    std::atomic<uint64_t> done_{0};
    std::mutex mutex_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::thread thread_;
};

// A time left as "M:SS" or "H:MM:SS" ("--:--" when unknown or past 99 hours).
std::string format_eta(double seconds);
// "splice [#########           ]  45%  1.2 GiB / 2.7 GiB  850.0 MiB/s  ETA 0:03" (width ≤ 80).
std::string format_progress_line(const std::string& label, uint64_t done, uint64_t total, double seconds);

}  // namespace gguf_reap
