// What an operation reports while it runs. Operations never print: the CLI turns these into log lines
// and a progress display on a terminal; tests may collect them or leave them empty.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "gguf_reap/error.h"

namespace gguf_reap {

struct Events {
    std::function<void(const std::string&)> on_debug;  // -v
    std::function<void(const std::string&)> on_info;
    std::function<void(const std::string&)> on_warn;
    // A long pass over `total` bytes begins; progress(n) may then be called from any thread (it must be
    // thread-safe); progress_end() follows however the pass ends.
    std::function<void(std::string_view label, uint64_t total)> on_progress_begin;
    std::function<void(uint64_t)> on_progress;
    std::function<void()> on_progress_end;
    // How messages in pieces spell request fields (error.h, Message): field_name when empty; the CLI
    // spells them as its options.
    FieldSpelling spell;

    void debug(const std::string& m) const {
        if (on_debug) on_debug(m);
    }
    void info(const std::string& m) const {
        if (on_info) on_info(m);
    }
    void warn(const std::string& m) const {
        if (on_warn) on_warn(m);
    }
    void info(const Message& m) const { info(render(m, spell)); }
    void warn(const Message& m) const { warn(render(m, spell)); }
};

// Calls events.on_progress_end when it goes, so a pass that throws still closes its display.
class ProgressScope {
  public:
    ProgressScope(const Events& e, std::string_view label, uint64_t total) : e_(e) {
        if (e_.on_progress_begin) e_.on_progress_begin(label, total);
    }
    ~ProgressScope() {
        if (e_.on_progress_end) e_.on_progress_end();
    }
    ProgressScope(const ProgressScope&) = delete;
    ProgressScope& operator=(const ProgressScope&) = delete;
    // A callback for copy engines and readers: bytes just finished.
    std::function<void(uint64_t)> sink() const { return e_.on_progress; }

  private:
    const Events& e_;
};

}  // namespace gguf_reap
