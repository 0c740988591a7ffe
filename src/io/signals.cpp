#include "io/signals.h"

#include <atomic>
#include <csignal>

#include "gguf_reap/error.h"

namespace gguf_reap {

namespace {
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_signal(int) {
    g_interrupted.store(true, std::memory_order_relaxed);
}
}  // namespace

void install_signal_handlers() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: blocking calls return EINTR so loops notice promptly
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() {
    return g_interrupted.load(std::memory_order_relaxed);
}

void check_interrupted() {
    if (interrupted()) throw Interrupted();
}

}  // namespace gguf_reap
