#include "cli/environment.h"

#include <unistd.h>

#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "gguf_reap/error.h"

namespace gguf_reap::cli {

namespace {

// A whole number from `name` in [lo, hi], or `fallback` when the variable is unset or empty.
uint64_t env_number(const char* name, uint64_t fallback, uint64_t lo, uint64_t hi) {
    const std::string v = env(name);
    if (v.empty()) return fallback;
    uint64_t n = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size())
        throw UsageError(fmt::format("{}={}: not a number", name, v));
    if (n < lo || n > hi) throw UsageError(fmt::format("{}={}: {} to {}", name, v, lo, hi));
    return n;
}

std::string token_file() {
    if (std::string p = env("HF_TOKEN_PATH"); !p.empty()) return p;
    if (std::string home = env("HF_HOME"); !home.empty()) return home + "/token";
    if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/huggingface/token";
    if (std::string home = env("HOME"); !home.empty()) return home + "/.cache/huggingface/token";
    return {};
}

// The Hugging Face cache, as huggingface_hub finds it: HF_HUB_CACHE (or its older name
// HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub.
std::string hub_cache_dir() {
    for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
        if (std::string p = env(name); !p.empty()) return p;
    if (std::string home = env("HF_HOME"); !home.empty()) return home + "/hub";
    if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/huggingface/hub";
    if (std::string home = env("HOME"); !home.empty()) return home + "/.cache/huggingface/hub";
    return {};
}

}  // namespace

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

RemoteSettings remote_settings_from_env() {
    RemoteSettings s;
    if (std::string e = env("HF_ENDPOINT"); !e.empty()) s.hub_endpoint = e;
    if (std::string t = env("HF_TOKEN"); !t.empty()) s.hub_token = t;
    s.hub_token_file = token_file();
    s.hub_cache = hub_cache_dir();
    s.http_retries = static_cast<uint32_t>(env_number("GGUF_REAP_HTTP_RETRIES", s.http_retries, 0, 1000));
    s.http_first_backoff_ms = env_number("GGUF_REAP_HTTP_BACKOFF_MS", s.http_first_backoff_ms, 0, 3'600'000);
    s.http_stall_seconds =
        static_cast<uint32_t>(env_number("GGUF_REAP_HTTP_TIMEOUT", s.http_stall_seconds, 1, 86'400));
    s.http_connections =
        static_cast<uint32_t>(env_number("GGUF_REAP_HTTP_CONNECTIONS", s.http_connections, 1, 64));
    return s;
}

std::string default_kld_cache_dir() {
    if (std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/gguf-reap/kld";
    if (std::string h = env("HOME"); !h.empty()) return h + "/.cache/gguf-reap/kld";
    return ".gguf-reap-cache";
}

bool stderr_is_terminal() {
    return ::isatty(2) == 1 && env("TERM") != "dumb";
}

}  // namespace gguf_reap::cli
