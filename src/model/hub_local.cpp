#include "model/hub_local.h"

#include <memory>
#include <vector>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/remote.h"
#include "io/hub_cache.h"
#include "io/hub_repo.h"
#include "io/remote_file.h"
#include "io/remote_url.h"
#include "model/shard_set.h"

namespace gguf_reap {

namespace {

// The model's shards as hf://ORG/REPO/PATH[@REVISION] paths, in order, and what `hf download --include`
// is given to fetch them: the set's name with '*' for the shard number, or the one file's path.
struct HubShards {
    std::string repo;
    bool revision_given = false;
    std::vector<std::string> paths;
    std::string pattern;
};

HubShards hub_shards(const std::string& path) {
    HubShards s;
    if (const auto q = parse_hub_quant(path)) {
        const HubModel m = resolve_hub_quant(path, *q);
        s.repo = q->repo;
        s.revision_given = q->revision != "main";
        for (const HubFile& f : m.files)
            s.paths.push_back(fmt::format("hf://{}/{}@{}", q->repo, f.path, m.commit));
        const auto name = parse_split_name(m.files.front().path);
        s.pattern = name && m.files.size() > 1 ? fmt::format("{}-*-of-{:05d}.gguf", name->prefix, name->count)
                                               : m.files.front().path;
        return s;
    }
    const auto hub = parse_hub_path(path);
    if (!hub) throw UsageError(fmt::format("{}: not an hf:// path", path));
    s.repo = hub->repo;
    s.revision_given = hub->revision != "main";
    const std::string revision = split_revision_suffix(path).second;
    const auto name = parse_split_name(hub->file);
    if (!name || name->count <= 1 || name->number < 1 || name->number > name->count) {
        s.paths.push_back(path);
        s.pattern = hub->file;
        return s;
    }
    for (int i = 1; i <= name->count; ++i)
        s.paths.push_back(
            fmt::format("hf://{}/{}{}", hub->repo, split_path(name->prefix, i, name->count), revision));
    s.pattern = fmt::format("{}-*-of-{:05d}.gguf", name->prefix, name->count);
    return s;
}

}  // namespace

std::string local_model_file(const std::string& path) {
    if (!path.starts_with("hf://")) return path;
    const HubShards s = hub_shards(path);
    std::string first;
    for (const std::string& p : s.paths) {
        const std::shared_ptr<RemoteFile> f = RemoteFile::open(p);  // pinned: a HEAD, no byte of the file
        if (first.empty()) first = f->cache_path();
        if (!f->cache_path().empty()) continue;
        const std::string commit = f->hub_revision().substr(f->hub_revision().find('@') + 1);
        const auto hub = parse_hub_path(p);
        const HubCacheEntry e =
            find_in_hub_cache(s.repo, commit, hub->file, f->size(),
                              f->hub_sha256().empty() ? sha256_of_etag(f->etag()) : f->hub_sha256());
        const std::string command = hf_download_command(s.repo, s.pattern, s.revision_given ? commit : "");
        if (e.path.empty())  // no cache directory, or a server that names no commit
            throw Error(
                kExitBadInput,
                fmt::format("{}: llama.cpp's tools read only local files, and {}; download it with `{}`",
                            path,
                            remote_settings().hub_cache.empty()
                                ? "there is no Hugging Face cache to look in (set HF_HUB_CACHE)"
                                : "the server named no commit to look for in the Hugging Face cache",
                            command));
        if (e.present)
            throw Error(kExitBadInput,
                        fmt::format("{}: the Hugging Face cache's copy {} {}; download it again "
                                    "with `{} --force-download`",
                                    path, e.path, e.problem, command));
        throw Error(kExitBadInput,
                    fmt::format("{}: not in the Hugging Face cache ({} is not there), and "
                                "llama.cpp's tools read only local files; download it with `{}`",
                                path, e.path, command));
    }
    return first;
}

}  // namespace gguf_reap
