// Model paths that are URLs (docs/remote.md): https://HOST/…/NAME.gguf, http:// for a local mirror,
// and hf://ORG/REPO/PATH[@REVISION], which means ENDPOINT/ORG/REPO/resolve/REVISION/PATH. Also the
// Hub's credentials: where a token comes from and which host may see it. The endpoint and the token are
// the process's RemoteSettings (gguf_reap/remote.h), which the command fills from HF_*.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gguf_reap {

// Whether `path` names a remote file (http://, https:// or hf://) rather than a local one.
bool is_remote_path(std::string_view path);

// hf://ORG/REPO/PATH[@REVISION], parsed. Throws UsageError naming the path when it is malformed.
struct HubPath {
    std::string repo;      // ORG/REPO
    std::string file;      // PATH inside the repository
    std::string revision;  // "main" when not given
};
std::optional<HubPath> parse_hub_path(std::string_view path);

// The settings' hub_endpoint, without a trailing '/' (https://huggingface.co by default).
std::string hub_endpoint();
// ENDPOINT/ORG/REPO/resolve/REVISION/PATH.
std::string hub_resolve_url(const HubPath& p, std::string_view revision);

// A path split before its "@REVISION" (hf:// only; other paths have no suffix), so that shard names can
// be read from and made with the first part: {"hf://o/r/m-00001-of-00002.gguf", "@main"}.
std::pair<std::string, std::string> split_revision_suffix(std::string_view path);

// scheme://host:port of an absolute URL (the port made explicit), or "" when it cannot be parsed.
std::string url_origin(const std::string& url);

// The Hub token: the settings' hub_token, else the contents of their hub_token_file (the file the Hub's
// clients write), trimmed; nullopt when there is none. Never printed or logged.
std::optional<std::string> hub_token();
// The one line that tells a user how to give a token (401/403 messages).
std::string token_hint();

}  // namespace gguf_reap
