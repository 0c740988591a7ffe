#include "io/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "io/units.h"

namespace gguf_reap {

namespace {
constexpr auto kRedraw = std::chrono::milliseconds(200);
constexpr int kBarWidth = 20;
}  // namespace

std::string format_eta(double seconds) {
    if (!(seconds >= 0) || seconds > 99 * 3600) return "--:--";
    const auto s = static_cast<uint64_t>(seconds + 0.5);
    if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string format_progress_line(const std::string& label, uint64_t done, uint64_t total, double seconds) {
    const double frac = total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
    const int filled = static_cast<int>(frac * kBarWidth);
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total - std::min(done, total)) / rate : -1.0;
    return fmt::format("{} [{}{}] {:3.0f}%  {} / {}  {}/s  ETA {}", label, std::string(filled, '#'),
                       std::string(kBarWidth - filled, ' '), frac * 100.0, human_bytes(done),
                       human_bytes(total), human_bytes(static_cast<uint64_t>(rate)), format_eta(eta));
}

Progress::Progress(std::string label, uint64_t total, bool enabled, std::FILE* out)
    : label_(std::move(label)), total_(total), out_(out) {
    if (enabled) thread_ = std::thread([this] { loop(); });
}

Progress::~Progress() {
    finish();
}

void Progress::finish() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) {
        thread_.join();
        // Erase the line so that the summary (or an error) starts on a clean line.
        std::fputs("\r\033[K", out_);
        std::fflush(out_);
    }
}

void Progress::loop() {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    while (!cv_.wait_for(lock, kRedraw, [this] { return stopping_; })) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const std::string line = format_progress_line(label_, done(), total_, secs);
        std::fprintf(out_, "\r%s\033[K", line.c_str());
        std::fflush(out_);
    }
}

}  // namespace gguf_reap
