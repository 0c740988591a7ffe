// The settings of gguf_reap/remote.h, held for the process: set once by the command (or an embedder),
// read by http_client, remote_file and remote_url at each request.
#include <mutex>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/remote.h"

namespace gguf_reap {

namespace {
std::mutex g_mu;
RemoteSettings g_settings;
}  // namespace

void set_remote_settings(const RemoteSettings& s) {
    if (s.http_stall_seconds == 0) throw UsageError("the HTTP stall timeout must be at least 1 s");
    if (s.http_connections == 0 || s.http_connections > 64)
        throw UsageError(fmt::format("{} HTTP connections: 1 to 64", s.http_connections));
    RemoteSettings t = s;
    while (t.hub_endpoint.ends_with('/')) t.hub_endpoint.pop_back();
    if (t.hub_endpoint.empty()) t.hub_endpoint = RemoteSettings{}.hub_endpoint;
    std::lock_guard lock(g_mu);
    g_settings = std::move(t);
}

RemoteSettings remote_settings() {
    std::lock_guard lock(g_mu);
    return g_settings;
}

}  // namespace gguf_reap
