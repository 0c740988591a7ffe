// parallel_for: the small work-sharing loop rank uses for its read pass and its per-block decisions.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace gguf_reap {

// Runs fn(i) for i in [0, n) on up to `threads` threads; rethrows the first error (by index).
template <typename Fn>
void parallel_for(size_t n, int threads, Fn fn) {
    const size_t t = std::min<size_t>(n, static_cast<size_t>(std::max(1, threads)));
    if (t <= 1) {
        for (size_t i = 0; i < n; ++i) fn(i);
        return;
    }
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors(n);
    std::vector<std::thread> pool;
    for (size_t w = 0; w < t; ++w)
        pool.emplace_back([&] {
            for (size_t i; (i = next.fetch_add(1)) < n;) {
                try {
                    fn(i);
                } catch (...) {
                    errors[i] = std::current_exception();
                    next.store(n);  // stop handing out work
                }
            }
        });
    for (auto& th : pool) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

// `threads` as the user gave it (0: one per core).
inline int resolve_threads(int threads) {
    return threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace gguf_reap
