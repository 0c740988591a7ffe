// The one way gguf-reap runs work on several threads: parallel_for over indices, or run_workers for
// workers that pull their own items (the copy engine, audit's shard pass).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace gguf_reap {

// Runs fn(w) for w in [0, workers) each on its own thread (the calling thread takes worker 0); joins
// them all, then rethrows the first error by worker index. Workers that must stop early on another's
// failure share a flag of their own. Should a thread fail to start, the workers already running are
// joined before the error (std::system_error) propagates.
template <typename Fn>
void run_workers(size_t workers, Fn fn) {
    if (workers <= 1) {
        if (workers == 1) fn(size_t{0});
        return;
    }
    std::vector<std::exception_ptr> errors(workers);
    const auto guarded = [&](size_t w) {
        try {
            fn(w);
        } catch (...) {
            errors[w] = std::current_exception();
        }
    };
    std::vector<std::thread> pool;
    pool.reserve(workers - 1);
    std::exception_ptr start_error;
    try {
        for (size_t w = 1; w < workers; ++w) pool.emplace_back(guarded, w);
    } catch (...) {
        start_error = std::current_exception();
    }
    if (!start_error) guarded(0);
    for (auto& th : pool) th.join();
    if (start_error) std::rethrow_exception(start_error);
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

// Runs fn(i) for i in [0, n) on up to `threads` threads; after an error no new index starts, and the
// first error by index is rethrown.
template <typename Fn>
void parallel_for(size_t n, int threads, Fn fn) {
    const size_t t = std::min<size_t>(n, static_cast<size_t>(std::max(1, threads)));
    if (t <= 1) {
        for (size_t i = 0; i < n; ++i) fn(i);
        return;
    }
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors(n);
    run_workers(t, [&](size_t) {
        for (size_t i; (i = next.fetch_add(1)) < n;) {
            try {
                fn(i);
            } catch (...) {
                errors[i] = std::current_exception();
                next.store(n);  // stop handing out work
            }
        }
    });
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

// `threads` as the user gave it (0: one per core).
inline int resolve_threads(int threads) {
    return threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace gguf_reap
