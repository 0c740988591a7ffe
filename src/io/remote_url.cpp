#include "io/remote_url.h"

#include <curl/curl.h>

#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/remote.h"

namespace gguf_reap {

namespace {

std::string trim(std::string s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return {};
    const auto last = s.find_last_not_of(" \t\r\n");
    return s.substr(first, last - first + 1);
}

}  // namespace

bool is_remote_path(std::string_view path) {
    return path.starts_with("http://") || path.starts_with("https://") || path.starts_with("hf://");
}

std::optional<HubPath> parse_hub_path(std::string_view path) {
    if (!path.starts_with("hf://")) return std::nullopt;
    std::string_view rest = path.substr(5);
    HubPath p;
    p.revision = "main";
    if (const auto at = rest.rfind('@');
        at != std::string_view::npos && rest.find('/', at) == std::string_view::npos) {
        p.revision = std::string(rest.substr(at + 1));
        rest = rest.substr(0, at);
    }
    const auto s1 = rest.find('/');
    const auto s2 = s1 == std::string_view::npos ? s1 : rest.find('/', s1 + 1);
    if (s1 == 0 || s2 == std::string_view::npos || s2 == s1 + 1 || s2 + 1 >= rest.size() ||
        p.revision.empty())
        throw UsageError(fmt::format("{}: a Hub path is hf://ORG/REPO/PATH[@REVISION]", path));
    p.repo = std::string(rest.substr(0, s2));
    p.file = std::string(rest.substr(s2 + 1));
    return p;
}

std::string hub_endpoint() {
    return remote_settings().hub_endpoint;
}

std::string hub_resolve_url(const HubPath& p, std::string_view revision) {
    return fmt::format("{}/{}/resolve/{}/{}", hub_endpoint(), p.repo, revision, p.file);
}

std::pair<std::string, std::string> split_revision_suffix(std::string_view path) {
    if (!path.starts_with("hf://")) return {std::string(path), {}};
    const auto at = path.rfind('@');
    if (at == std::string_view::npos || path.find('/', at) != std::string_view::npos)
        return {std::string(path), {}};
    return {std::string(path.substr(0, at)), std::string(path.substr(at))};
}

std::string url_origin(const std::string& url) {
    std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> u(curl_url(), curl_url_cleanup);
    if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return {};
    auto part = [&](CURLUPart what) {
        char* v = nullptr;
        if (curl_url_get(u.get(), what, &v, CURLU_DEFAULT_PORT) != CURLUE_OK || !v) return std::string();
        std::string s(v);
        curl_free(v);
        return s;
    };
    std::string host = part(CURLUPART_HOST);
    for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return fmt::format("{}://{}:{}", part(CURLUPART_SCHEME), host, part(CURLUPART_PORT));
}

std::optional<std::string> hub_token() {
    const RemoteSettings s = remote_settings();
    if (s.hub_token) {
        std::string t = trim(*s.hub_token);
        if (!t.empty()) return t;
    }
    if (s.hub_token_file.empty()) return std::nullopt;
    std::ifstream in(s.hub_token_file);
    if (!in) return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    std::string t = trim(ss.str());
    if (t.empty()) return std::nullopt;
    return t;
}

std::string token_hint() {
    const std::string file = remote_settings().hub_token_file;
    return fmt::format(
        "give a token with access: set HF_TOKEN, or log in with the Hub's client (`hf auth login`), which "
        "writes {}; it is sent only to {}",
        file.empty() ? "~/.cache/huggingface/token" : file, hub_endpoint());
}

}  // namespace gguf_reap
