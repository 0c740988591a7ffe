// The one door for settings from the environment (issue 39): the library reads no environment variable;
// the command reads them here, as zstd's programs/ does, and passes them on in requests and in the
// process's RemoteSettings (gguf_reap/remote.h). docs/remote.md and docs/eval.md list them.
#pragma once

#include <string>

#include "gguf_reap/remote.h"

namespace gguf_reap::cli {

// The variable's value, or "" when it is unset.
std::string env(const char* name);

// HF_ENDPOINT, HF_TOKEN, the token file (HF_TOKEN_PATH, else $HF_HOME/token, else
// $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token), the Hugging Face cache (HF_HUB_CACHE,
// else HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub), GGUF_REAP_HTTP_RETRIES,
// GGUF_REAP_HTTP_BACKOFF_MS, GGUF_REAP_HTTP_TIMEOUT and GGUF_REAP_HTTP_CONNECTIONS over the library's
// defaults. Throws UsageError naming the variable when a number is malformed or out of range.
RemoteSettings remote_settings_from_env();

// eval's base-logits cache when --cache-dir is not given: $XDG_CACHE_HOME/gguf-reap/kld, else
// ~/.cache/gguf-reap/kld, else .gguf-reap-cache.
std::string default_kld_cache_dir();

// True when file descriptor 2 is a terminal and TERM is not "dumb": the progress lines are drawn.
bool stderr_is_terminal();

}  // namespace gguf_reap::cli
