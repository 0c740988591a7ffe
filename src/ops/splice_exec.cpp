// preflight_splice and execute_splice: the checks before the first byte, then the copy.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "io/error.h"
#include "io/output_checks.h"
#include "io/units.h"
#include "ops/splice.h"

namespace gguf_reap {

namespace {

struct Input {
    std::string path;
    FileIdentity id;
};

const Input* same_file(const std::vector<Input>& inputs, const std::optional<FileIdentity>& id) {
    if (!id) return nullptr;
    for (const Input& in : inputs)
        if (in.id == *id) return &in;
    return nullptr;
}

// PREFIX-NNNNN-of-MMMMM.gguf files beside the output that are not part of the new set: left there,
// ShardSet::open (and llama.cpp's users) would take them for extra or missing shards.
std::vector<std::string> other_sets(const std::string& out_prefix, const std::vector<std::string>& outputs) {
    std::string prefix = out_prefix;
    if (prefix.size() >= 5 && prefix.compare(prefix.size() - 5, 5, ".gguf") == 0)
        prefix.resize(prefix.size() - 5);
    const std::string dir = parent_dir(prefix);
    const std::string base = std::filesystem::path(prefix).filename().string();
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        auto sn = parse_split_name(name);
        if (!sn || sn->prefix != base) continue;
        const std::string p = (std::filesystem::path(dir) / name).string();
        bool mine = false;
        for (const std::string& o : outputs) mine |= std::filesystem::path(o).filename() == name;
        if (!mine) found.push_back(p);
    }
    std::sort(found.begin(), found.end());
    return found;
}

}  // namespace

Preflight preflight_splice(const SplicePlan& plan, const SpliceInputs& inputs, const std::string& out_prefix,
                           bool force) {
    Preflight pf;
    std::vector<Input> ins;
    for (const std::string& p : inputs.paths)
        if (auto id = file_identity(p)) ins.push_back({p, *id});

    std::vector<std::string> outputs;
    for (const CopyJob* job : plan.jobs()) outputs.push_back(job->path);

    std::set<std::string> seen;
    std::map<dev_t, std::pair<std::string, uint64_t>> need;  // device → (a directory on it, bytes)
    for (size_t i = 0; i < outputs.size(); ++i) {
        const std::string& out = outputs[i];
        const std::string dir = parent_dir(out);
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0) throw IoError(dir, "output directory", errno);
        if (!S_ISDIR(st.st_mode)) throw IoError(dir, "output directory", ENOTDIR);
        const auto id = file_identity(out);
        std::error_code ec;
        const std::string canonical = std::filesystem::weakly_canonical(out, ec).string();
        if (!seen.insert(ec ? out : canonical).second)
            throw UsageError(fmt::format("{}: named twice as an output", out));
        for (size_t j = 0; j < i; ++j)
            if (id && file_identity(outputs[j]) == id)
                throw UsageError(fmt::format("{}: is the same file as the output {}", out, outputs[j]));
        if (const Input* in = same_file(ins, id))
            throw UsageError(fmt::format(
                "{}: is the same file as the input {} (an output never overwrites an input)", out, in->path));
        if (path_exists(out)) {
            if (std::filesystem::is_directory(out, ec))
                throw UsageError(fmt::format("{}: is a directory; an output file cannot replace it", out));
            if (!force) throw UsageError(fmt::format("{}: already exists (use --force to replace it)", out));
            pf.replaced.push_back(out);
        }
        const uint64_t size = plan.jobs()[i]->size;
        auto& [where, bytes] = need[st.st_dev];
        where = dir;
        bytes += size;
        pf.bytes_needed += size;
    }

    if (plan.shards.size() > 1) {
        for (const std::string& p : other_sets(out_prefix, outputs)) {
            if (const Input* in = same_file(ins, file_identity(p)))
                throw UsageError(
                    fmt::format("{}: a shard of another set under the output prefix is the input {}; "
                                "choose another output prefix",
                                p, in->path));
            if (!force)
                throw UsageError(
                    fmt::format("{}: belongs to another shard set under the same prefix and would be "
                                "taken for part of the output (use --force to remove it)",
                                p));
            pf.stale_siblings.push_back(p);
        }
    }

    for (const auto& [dev, what] : need) {
        const FreeSpace fs = free_space(what.first);
        if (fs.available < what.second)
            throw IoError(what.first,
                          fmt::format("not enough free space: the output needs {} ({} bytes), {} is "
                                      "available",
                                      human_bytes(what.second), what.second, human_bytes(fs.available)));
    }
    return pf;
}

CopyReport execute_splice(const SplicePlan& plan, const Preflight& preflight, const ExecuteOptions& options) {
    CopyReport r = run_copy_jobs(plan.jobs(), plan.sources, options.copy);
    for (const std::string& p : preflight.stale_siblings) ::unlink(p.c_str());
    return r;
}

}  // namespace gguf_reap
