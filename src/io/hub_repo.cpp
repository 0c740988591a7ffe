#include "io/hub_repo.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "gguf_reap/error.h"
#include "io/http_client.h"
#include "io/remote_url.h"

namespace gguf_reap {

namespace {

using nlohmann::json;

// An API answer is a few hundred bytes per file; a listing page holds at most a few thousand files.
constexpr uint64_t kMaxAnswerBytes = 16u << 20;
constexpr int kMaxPages = 1000;

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool is_commit(std::string_view s) {
    return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

bool is_sha256(std::string_view s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

bool quant_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

// llama.cpp's rule for a file that is a model rather than a sidecar (common/download.cpp).
bool is_model_file(const std::string& path) {
    if (!path.ends_with(".gguf")) return false;
    const auto slash = path.rfind('/');
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    for (const char* sidecar : {"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"})
        if (name.find(sidecar) != std::string::npos) return false;
    return true;
}

// QUANT as a word of `path`: after the start, '/', '-' or '.', before '.', '-' or '/'; without regard to
// case.
bool holds_quant(const std::string& path, const std::string& quant) {
    const std::string p = lower(path), q = lower(quant);
    for (size_t at = p.find(q); at != std::string::npos; at = p.find(q, at + 1)) {
        const bool before = at == 0 || p[at - 1] == '/' || p[at - 1] == '-' || p[at - 1] == '.';
        const size_t end = at + q.size();
        const bool after = end < p.size() && (p[end] == '.' || p[end] == '-' || p[end] == '/');
        if (before && after) return true;
    }
    return false;
}

// The .gguf model files grouped into sets: PREFIX-NNNNN-of-MMMMM.gguf by PREFIX and MMMMM, any other file
// alone. Each set's files are in the order of their numbers; `count` is what their names say.
struct QuantSet {
    std::string name;  // the first shard's path, or the file's
    int count = 1;
    std::map<int, HubFile> shards;
    uint64_t bytes = 0;
};

std::vector<QuantSet> model_sets(const std::vector<HubFile>& files) {
    static const std::regex split(R"(^(.+)-([0-9]{5})-of-([0-9]{5})\.gguf$)");
    std::map<std::string, QuantSet> sets;
    for (const HubFile& f : files) {
        if (!is_model_file(f.path)) continue;
        std::smatch m;
        std::string key = f.path;
        int number = 1, count = 1;
        if (std::regex_match(f.path, m, split)) {
            number = std::stoi(m[2].str());
            count = std::stoi(m[3].str());
            key = m[1].str() + "-of-" + m[3].str();
        }
        QuantSet& s = sets[key];
        s.count = count;
        s.name = count > 1 ? fmt::format("{}-{:05d}-of-{:05d}.gguf", key.substr(0, key.size() - 9), 1, count)
                           : f.path;
        s.bytes += f.size;
        s.shards.emplace(number, f);
    }
    std::vector<QuantSet> out;
    for (auto& [key, s] : sets) out.push_back(std::move(s));
    return out;
}

std::string describe(const QuantSet& s) {
    const std::string size = fmt::format("{:.2f} GB", static_cast<double>(s.bytes) / 1e9);
    if (s.count == 1) return fmt::format("{} ({})", s.name, size);
    return fmt::format("{} ({} shards, {})", s.name, s.count, size);
}

std::string list_sets(const std::vector<const QuantSet*>& sets) {
    std::string out;
    for (const QuantSet* s : sets) out += (out.empty() ? "" : "; ") + describe(*s);
    return out.empty() ? "none" : out;
}

json parse_answer(const std::string& display, const std::string& what, std::string_view text) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded())
        throw Error(kExitBadInput, fmt::format("{}: the Hub's answer to {} is not JSON", display, what));
    return j;
}

}  // namespace

std::optional<HubQuant> parse_hub_quant(std::string_view path) {
    if (!path.starts_with("hf://")) return std::nullopt;
    std::string_view rest = path.substr(5);
    const auto colon = rest.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const std::string_view repo = rest.substr(0, colon);
    const auto slash = repo.find('/');
    if (slash == std::string_view::npos || repo.find('/', slash + 1) != std::string_view::npos)
        return std::nullopt;  // hf://ORG/REPO/PATH (whose PATH may hold a ':')
    HubQuant q;
    q.repo = std::string(repo);
    q.revision = "main";
    std::string_view quant = rest.substr(colon + 1);
    if (const auto at = quant.rfind('@'); at != std::string_view::npos) {
        q.revision = std::string(quant.substr(at + 1));
        quant = quant.substr(0, at);
    }
    q.quant = std::string(quant);
    const bool ok = slash > 0 && slash + 1 < repo.size() && !q.quant.empty() &&
                    std::all_of(q.quant.begin(), q.quant.end(), quant_char) && !q.revision.empty() &&
                    q.revision.find('/') == std::string::npos;
    if (!ok)
        throw UsageError(
            fmt::format("{}: a repository and a quant are hf://ORG/REPO:QUANT[@REVISION], as "
                        "llama.cpp's -hf takes them (QUANT of letters, digits, '_', '-', '.')",
                        path));
    return q;
}

std::string hub_commit(const std::string& display, const std::string& repo, const std::string& revision) {
    if (is_commit(revision)) return revision;
    const std::string url = fmt::format("{}/api/models/{}/refs", hub_endpoint(), repo);
    const json j = parse_answer(display, url, http_get_text(display, url, kMaxAnswerBytes));
    std::vector<std::string> names[2];
    const char* kinds[2] = {"branches", "tags"};
    for (int k = 0; k < 2; ++k) {
        if (!j.is_object() || !j.contains(kinds[k]) || !j[kinds[k]].is_array()) continue;
        for (const json& ref : j[kinds[k]]) {
            if (!ref.is_object() || !ref.contains("name") || !ref["name"].is_string()) continue;
            const std::string name = ref["name"].get<std::string>();
            names[k].push_back(name);
            if (name != revision) continue;
            const std::string commit = ref.contains("targetCommit") && ref["targetCommit"].is_string()
                                           ? ref["targetCommit"].get<std::string>()
                                           : "";
            if (!is_commit(commit))
                throw Error(kExitBadInput, fmt::format("{}: the Hub names no commit for {} '{}' of {} ({})",
                                                       display, k == 0 ? "branch" : "tag", name, repo, url));
            return commit;
        }
    }
    auto join = [](const std::vector<std::string>& v) {
        return v.empty() ? std::string("none") : fmt::format("{}", fmt::join(v, ", "));
    };
    throw Error(kExitBadInput, fmt::format("{}: {} has no branch or tag '{}' (branches: {}; tags: {})",
                                           display, repo, revision, join(names[0]), join(names[1])));
}

std::vector<HubFile> parse_hub_tree(const std::string& display, std::string_view text) {
    const json j = parse_answer(display, "a file listing", text);
    if (!j.is_array())
        throw Error(kExitBadInput,
                    fmt::format("{}: the Hub's file listing is not a JSON array of files", display));
    std::vector<HubFile> files;
    for (const json& item : j) {
        if (!item.is_object() || !item.contains("type") || item["type"] != "file" || !item.contains("path") ||
            !item["path"].is_string())
            continue;
        HubFile f;
        f.path = item["path"].get<std::string>();
        // A path that would climb out of the repository or is no path at all is not a file of it.
        if (f.path.empty() || f.path.front() == '/' || f.path.find("..") != std::string::npos) continue;
        if (item.contains("size") && item["size"].is_number_unsigned()) f.size = item["size"].get<uint64_t>();
        if (item.contains("lfs") && item["lfs"].is_object() && item["lfs"].contains("oid") &&
            item["lfs"]["oid"].is_string()) {
            const std::string oid = item["lfs"]["oid"].get<std::string>();
            if (is_sha256(oid)) f.sha256 = oid;
        }
        files.push_back(std::move(f));
    }
    return files;
}

std::vector<HubFile> hub_tree(const std::string& display, const std::string& repo,
                              const std::string& commit) {
    std::string url = fmt::format("{}/api/models/{}/tree/{}?recursive=true", hub_endpoint(), repo, commit);
    std::vector<HubFile> files;
    for (int page = 0; !url.empty(); ++page) {
        if (page == kMaxPages)
            throw IoError(display,
                          fmt::format("the Hub's file listing of {} runs past {} pages", repo, kMaxPages));
        std::string next;
        auto more = parse_hub_tree(display, http_get_text(display, url, kMaxAnswerBytes, &next));
        files.insert(files.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
        url = next;
    }
    return files;
}

std::vector<HubFile> pick_hub_quant(const std::string& display, const std::vector<HubFile>& files,
                                    const std::string& quant) {
    const std::vector<QuantSet> sets = model_sets(files);
    std::vector<const QuantSet*> all, matching;
    for (const QuantSet& s : sets) {
        all.push_back(&s);
        if (holds_quant(s.name, quant)) matching.push_back(&s);
    }
    if (matching.empty())
        throw Error(kExitBadInput,
                    fmt::format("{}: no .gguf model matches the quant '{}'; the models are: {}", display,
                                quant, list_sets(all)));
    if (matching.size() > 1)
        throw Error(
            kExitBadInput,
            fmt::format("{}: the quant '{}' matches {} models: {}; name one by a longer quant or by its "
                        "path (hf://ORG/REPO/PATH)",
                        display, quant, matching.size(), list_sets(matching)));
    const QuantSet& s = *matching.front();
    std::vector<HubFile> out;
    for (int i = 1; i <= s.count; ++i) {
        const auto it = s.shards.find(i);
        if (it == s.shards.end())
            throw Error(kExitBadInput, fmt::format("{}: the Hub lists no shard {} of {} of {}", display, i,
                                                   s.count, s.name));
        out.push_back(it->second);
    }
    return out;
}

namespace {

// The sets resolved so far, and the sha256 of each of their files by "REPO@COMMIT/PATH".
struct Resolved {
    std::mutex mu;
    std::map<std::string, HubModel> models;
    std::map<std::string, std::string> sha256;
};
Resolved& resolved() {
    static Resolved r;
    return r;
}

}  // namespace

HubModel resolve_hub_quant(const std::string& display, const HubQuant& q) {
    // Once per process: the model's header is read through one path, its set through another, and a
    // branch that moves between the two must not give them different commits.
    Resolved& r = resolved();
    std::lock_guard<std::mutex> lock(r.mu);
    if (const auto it = r.models.find(display); it != r.models.end()) return it->second;
    HubModel m;
    m.commit = hub_commit(display, q.repo, q.revision);
    m.files = pick_hub_quant(display, hub_tree(display, q.repo, m.commit), q.quant);
    m.first_shard = fmt::format("hf://{}/{}@{}", q.repo, m.files.front().path, m.commit);
    for (const HubFile& f : m.files)
        if (!f.sha256.empty()) r.sha256[fmt::format("{}@{}/{}", q.repo, m.commit, f.path)] = f.sha256;
    return r.models.emplace(display, std::move(m)).first->second;
}

std::string hub_listed_sha256(const std::string& repo, const std::string& commit, const std::string& path) {
    Resolved& r = resolved();
    std::lock_guard<std::mutex> lock(r.mu);
    const auto it = r.sha256.find(fmt::format("{}@{}/{}", repo, commit, path));
    return it == r.sha256.end() ? std::string() : it->second;
}

}  // namespace gguf_reap
