#include "model/shard_set.h"

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <optional>
#include <regex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/hub_repo.h"
#include "io/remote_url.h"

namespace gguf_reap {

namespace {

const std::regex& split_regex() {
    static const std::regex re(R"(^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$)");
    return re;
}

struct SplitKeys {
    std::optional<uint16_t> no;
    std::optional<uint16_t> count;
    std::optional<int32_t> tensors;
};

// Reads split.* with the exact types llama.cpp's typed getters demand (u16/u16/i32).
SplitKeys read_split_keys(const Shard& s) {
    SplitKeys k;
    auto get = [&](const char* key, GgufType want) -> const Kv* {
        const Kv* kv = s.header.find(key);
        if (!kv) return nullptr;
        if (kv->type != want)
            throw InputError(s.path, kv->file_offset, fmt::format("kv '{}'", key),
                             fmt::format("must be of type {}, found {} (llama.cpp refuses the wrong type)",
                                         gguf_type_name(want), gguf_type_name(kv->type)));
        return kv;
    };
    if (const Kv* kv = get(kSplitNo, GgufType::kUint16)) k.no = static_cast<uint16_t>(*kv->as_uint());
    if (const Kv* kv = get(kSplitCount, GgufType::kUint16)) k.count = static_cast<uint16_t>(*kv->as_uint());
    if (const Kv* kv = get(kSplitTensorsCount, GgufType::kInt32))
        k.tensors = static_cast<int32_t>(*kv->as_int());
    return k;
}

Shard open_shard(const std::string& path, const ParseOptions& opts,
                 std::shared_ptr<InputFile> file = nullptr) {
    Shard s;
    s.path = path;
    s.file = file ? std::move(file) : InputFile::open(path);
    s.header = parse_gguf_header(*s.file, opts);
    return s;
}

uint64_t kv_offset(const Shard& s, const char* key) {
    const Kv* kv = s.header.find(key);
    return kv ? kv->file_offset : 0;
}

std::string kv_field(const char* key) {
    return fmt::format("kv '{}'", key);
}

}  // namespace

std::optional<SplitName> parse_split_name(std::string_view path) {
    std::smatch m;
    std::string p(path);
    if (!std::regex_match(p, m, split_regex())) return std::nullopt;
    SplitName n;
    n.prefix = m[1].str();
    n.number = std::stoi(m[2].str());
    n.count = std::stoi(m[3].str());
    return n;
}

std::string split_path(std::string_view prefix, int number, int count) {
    return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, number, count);
}

namespace {

// The shards of a remote set other than the given one, opened (pinned, their headers read) in
// parallel with it: each costs round trips, and one after another they added up (docs/remote.md).
// Started from the file name alone; the set is checked against the headers as for local files, and
// a shard's error is thrown only when the set turns out to need that shard. After a sibling's error
// no more are started (a name that says -of-00999 for a set of 3 asks for a few, not 998); a shard
// not tried is opened when it is needed, so the error is the first in shard order, as before.
class SiblingOpener {
  public:
    SiblingOpener(const std::string& prefix, const std::string& revision, int given, int count,
                  const ParseOptions& opts)
        : opts_(opts), count_(count) {
        results_.resize(static_cast<size_t>(count) + 1);
        for (int i = 1; i <= count; ++i)
            if (i != given) todo_.push_back(i);
        prefix_ = prefix;
        revision_ = revision;
        const size_t n = std::min<size_t>(todo_.size(), kParallel);
        try {
            for (size_t t = 0; t < n; ++t) threads_.emplace_back([this] { run(); });
        } catch (...) {
            join();
            throw;
        }
    }
    ~SiblingOpener() {  // the set was refused, or taken: no more shards are opened
        cancel_ = true;
        join();
    }
    SiblingOpener(const SiblingOpener&) = delete;
    SiblingOpener& operator=(const SiblingOpener&) = delete;

    int count() const { return count_; }
    // Shard `i` as opened, or its error thrown (opened now if it was not tried).
    Shard take(int i) {
        join();
        Result& r = results_[static_cast<size_t>(i)];
        if (!r.tried) return open_shard(split_path(prefix_, i, count_) + revision_, opts_);
        if (r.error) std::rethrow_exception(r.error);
        return std::move(r.shard);
    }

  private:
    static constexpr size_t kParallel = 8;
    struct Result {
        Shard shard;
        std::exception_ptr error;
        bool tried = false;
    };
    void run() {
        for (;;) {
            const size_t k = next_.fetch_add(1);
            if (k >= todo_.size() || cancel_) return;
            const int i = todo_[k];
            Result& r = results_[static_cast<size_t>(i)];
            r.tried = true;
            try {
                r.shard = open_shard(split_path(prefix_, i, count_) + revision_, opts_);
            } catch (...) {
                r.error = std::current_exception();
                cancel_ = true;  // the set cannot be opened (or its name is wrong): ask for no more
            }
        }
    }
    void join() {
        for (auto& t : threads_)
            if (t.joinable()) t.join();
    }
    const ParseOptions& opts_;
    int count_;
    std::string prefix_, revision_;
    std::vector<int> todo_;
    std::atomic<size_t> next_{0};
    std::atomic<bool> cancel_{false};  // the given shard's header disagrees with its name: stop
    std::vector<Result> results_;
    std::vector<std::thread> threads_;
};

}  // namespace

ShardSet ShardSet::open(const std::string& path, const ParseOptions& opts) {
    // hf://ORG/REPO:QUANT[@REVISION]: the set the quant picks, opened by its first shard at the commit.
    if (const auto quant = parse_hub_quant(path))
        return open(resolve_hub_quant(path, *quant).first_shard, opts);
    ShardSet set;
    // A URL's shards are named by the same rule; an hf:// path's "@REVISION" stays on every sibling.
    const bool remote = is_remote_path(path);
    // (Not a structured binding: the lambda below captures it, which clang 14 refuses.)
    const auto named_revision = split_revision_suffix(path);
    const std::string& revision = named_revision.second;
    const auto name = parse_split_name(named_revision.first);
    // hf://: the given shard is pinned first, so that it is the one that resolves the revision and the
    // siblings ask for its commit.
    std::shared_ptr<InputFile> given_file;
    if (remote && path.starts_with("hf://")) given_file = InputFile::open(path);
    std::optional<SiblingOpener> siblings;
    if (remote && name && name->count > 1 && name->number >= 1 && name->number <= name->count)
        siblings.emplace(name->prefix, revision, name->number, name->count, opts);
    Shard given = open_shard(path, opts, std::move(given_file));
    const SplitKeys gk = read_split_keys(given);

    // An unsplit file: no split.count, or split.count <= 1 (gguf-split --merge writes 0).
    if (!gk.count || *gk.count <= 1) {
        if (name && name->count > 1)
            throw InputError(
                path, std::nullopt, "file name",
                fmt::format("the name says shard {} of {}, but the file has {}", name->number, name->count,
                            gk.count ? fmt::format("{} = {}", kSplitCount, *gk.count)
                                     : fmt::format("no {} key", kSplitCount)));
        set.shards_.push_back(std::move(given));
    } else {
        const int count = *gk.count;
        if (!name)
            throw InputError(path, kv_offset(given, kSplitCount), kv_field(kSplitCount),
                             fmt::format("{} is {} but the file name does not follow "
                                         "PREFIX-NNNNN-of-MMMMM.gguf, so its siblings cannot be found",
                                         kSplitCount, count));
        if (name->count != count)
            throw InputError(
                path, kv_offset(given, kSplitCount), kv_field(kSplitCount),
                fmt::format("{} is {} but the file name says -of-{:05d}", kSplitCount, count, name->count));
        set.split_ = true;
        for (int i = 1; i <= count; ++i) {
            const std::string p = split_path(name->prefix, i, count) + revision;
            if (i == name->number) {
                set.shards_.push_back(std::move(given));
                continue;
            }
            auto missing = [&] {
                return InputError(p, std::nullopt, "shard",
                                  fmt::format("missing shard {} of {} (the set {} needs every shard)", i,
                                              count, split_path(name->prefix, 1, count) + revision));
            };
            std::error_code ec;
            if (!remote && !std::filesystem::exists(p, ec)) throw missing();
            try {
                set.shards_.push_back(siblings && siblings->count() == count ? siblings->take(i)
                                                                             : open_shard(p, opts));
            } catch (const Error& e) {
                // A server says "missing" with a 404 (Error, exit 2, "... not found (HTTP 404)").
                if (remote && e.exit_code() == kExitBadInput &&
                    std::string_view(e.what()).find("(HTTP 404)") != std::string_view::npos)
                    throw missing();
                throw;
            }
        }
        // Extra shards cannot be listed on a server: only local sets are checked for them.
        if (remote) {
            set.index();
            set.check_split();
            return set;
        }
        // Extra shards: same prefix with another -of- count or a number past the count.
        const std::filesystem::path prefix_path(name->prefix);
        const std::string base = prefix_path.filename().string();
        std::filesystem::path dir = prefix_path.parent_path();
        if (dir.empty()) dir = ".";
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
            const std::string fname = entry.path().filename().string();
            auto other = parse_split_name(fname);
            if (!other || other->prefix != base) continue;
            if (other->count != count || other->number < 1 || other->number > count)
                throw InputError(
                    entry.path().string(), std::nullopt, "shard",
                    fmt::format("extra shard beside a set of {}: remove it or move it away (it would "
                                "be mistaken for part of the model)",
                                count));
        }
    }

    set.index();
    set.check_split();
    return set;
}

// split.no sequence and split.count in every shard, split.tensors.count in the first.
void ShardSet::check_split() const {
    if (!split_) return;
    const int count = static_cast<int>(shards_.size());
    for (int i = 0; i < count; ++i) {
        const Shard& s = shards_[static_cast<size_t>(i)];
        const SplitKeys k = read_split_keys(s);
        if (!k.no)
            throw InputError(s.path, std::nullopt, kv_field(kSplitNo),
                             fmt::format("missing key {} in a split shard", kSplitNo));
        if (*k.no != i)
            throw InputError(s.path, kv_offset(s, kSplitNo), kv_field(kSplitNo),
                             fmt::format("{} is {} but the file is shard {} of {} (expected {})", kSplitNo,
                                         *k.no, i + 1, count, i));
        if (k.count && *k.count != count)
            throw InputError(s.path, kv_offset(s, kSplitCount), kv_field(kSplitCount),
                             fmt::format("{} is {} but the set has {} shards", kSplitCount, *k.count, count));
    }
    const Shard& first = shards_.front();
    const SplitKeys k = read_split_keys(first);
    if (!k.tensors)
        throw InputError(first.path, std::nullopt, kv_field(kSplitTensorsCount),
                         fmt::format("missing key {} in the first shard", kSplitTensorsCount));
    if (*k.tensors < 0 || static_cast<size_t>(*k.tensors) != order_.size())
        throw InputError(first.path, kv_offset(first, kSplitTensorsCount), kv_field(kSplitTensorsCount),
                         fmt::format("{} is {} but the {} shards hold {} tensors", kSplitTensorsCount,
                                     *k.tensors, shards_.size(), order_.size()));
}

// The global index; duplicate names across shards are refused as llama.cpp refuses them.
void ShardSet::index() {
    for (size_t si = 0; si < shards_.size(); ++si) {
        const Shard& s = shards_[si];
        for (size_t ti = 0; ti < s.header.tensors.size(); ++ti) {
            const TensorInfo& t = s.header.tensors[ti];
            TensorRef r{si, ti, s.header.data_start + t.offset, t.nbytes};
            if (!by_name_.emplace(t.name, order_.size()).second) {
                const TensorRef& first = order_[by_name_[t.name]];
                throw InputError(
                    s.path, t.info_offset, fmt::format("tensor '{}'", t.name),
                    fmt::format("duplicate tensor name (also in {})", shards_[first.shard].path));
            }
            order_.push_back(r);
        }
    }
}

ShardSet ShardSet::from_header(const std::string& name, Header header) {
    ShardSet set;
    Shard s;
    s.path = name;
    s.header = std::move(header);
    const SplitKeys k = read_split_keys(s);
    if (k.count && *k.count > 1)
        throw InputError(name, kv_offset(s, kSplitCount), kv_field(kSplitCount),
                         fmt::format("{} is {}: a shard of a set needs its siblings, which only "
                                     "ShardSet::open finds",
                                     kSplitCount, *k.count));
    set.shards_.push_back(std::move(s));
    set.index();
    return set;
}

ShardSet ShardSet::from_headers(std::vector<std::pair<std::string, Header>> headers) {
    if (headers.size() == 1) return from_header(headers.front().first, std::move(headers.front().second));
    if (headers.empty() || headers.size() > 65535)
        throw std::invalid_argument("ShardSet::from_headers: 1 to 65535 headers");
    ShardSet set;
    set.split_ = true;
    for (auto& [name, header] : headers) {
        Shard s;
        s.path = name;
        s.header = std::move(header);
        const SplitKeys k = read_split_keys(s);
        if (!k.count)
            throw InputError(name, std::nullopt, kv_field(kSplitCount),
                             fmt::format("missing key {} in shard {} of a set of {}", kSplitCount,
                                         set.shards_.size() + 1, headers.size()));
        set.shards_.push_back(std::move(s));
    }
    set.index();
    set.check_split();
    return set;
}

std::string ShardSet::architecture() const {
    const Kv* kv = find_kv("general.architecture");
    if (!kv) return {};
    return kv->as_string().value_or("");
}

std::optional<uint64_t> ShardSet::arch_uint(std::string_view suffix) const {
    const Kv* kv = find_kv(architecture() + "." + std::string(suffix));
    if (!kv) return std::nullopt;
    return kv->as_uint();
}

const TensorRef* ShardSet::find_tensor(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : &order_[it->second];
}

uint64_t ShardSet::total_bytes() const {
    uint64_t n = 0;
    for (const auto& s : shards_) n += s.file ? s.file->size() : 0;
    return n;
}

}  // namespace gguf_reap
