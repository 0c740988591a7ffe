#include "gguf_reap/keeplist.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "format/json_input.h"
#include "gguf_reap/error.h"
#include "io/output_file.h"
#include "io/paths.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "model/keep_count.h"
#include "model/keeplist_file.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "model/tensor_table.h"

namespace gguf_reap {

namespace {

constexpr uint64_t kMaxKeeplistBytes = 64ull << 20;
constexpr int kMaxDepth = 64;
// A parsed JSON value costs nlohmann 16+ bytes, so 64 MiB of "0," would cost 1.4 GB (measured). The
// largest keeplist llama.cpp can use, 512 blocks × 1,024 experts in keep + prune, holds 0.5 million
// values; this is 8× that and bounds the parse to ~100 MB.
constexpr size_t kMaxValues = size_t{4} << 20;

using json = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& path, const std::string& field, const std::string& msg) {
    throw InputError(path, std::nullopt, field, msg);
}

const json& member(const json& o, const char* key, const std::string& path, const std::string& at) {
    if (!o.is_object() || !o.contains(key)) bad(path, at, fmt::format("missing \"{}\"", key));
    return o[key];
}

uint64_t get_uint(const json& v, const std::string& path, const std::string& at) {
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
        bad(path, at, fmt::format("must be a non-negative integer, found {}", v.dump().substr(0, 40)));
    return v.get<uint64_t>();
}

std::vector<int64_t> get_ids(const json& v, const std::string& path, const std::string& at) {
    if (!v.is_array()) bad(path, at, "must be an array of expert ids");
    std::vector<int64_t> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        const json& e = v[i];
        if (!e.is_number_integer())
            bad(path, fmt::format("{}[{}]", at, i),
                fmt::format("expert id must be an integer, found {}", e.dump().substr(0, 40)));
        out.push_back(e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? INT64_MAX
                          : e.get<int64_t>());
    }
    return out;
}

// Depth check before handing a document to code that recurses.
void check_depth(const std::string& text, const std::string& path) {
    int depth = 0;
    bool in_string = false, escape = false;
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (in_string) {
            if (escape)
                escape = false;
            else if (c == '\\')
                escape = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"')
            in_string = true;
        else if (c == '[' || c == '{') {
            if (++depth > kMaxDepth)
                throw InputError(path, i, "json", fmt::format("nested deeper than {} levels", kMaxDepth));
        } else if (c == ']' || c == '}')
            --depth;
    }
}

}  // namespace

const KeepBlock* KeepList::find_block(int block) const {
    for (const auto& b : blocks)
        if (b.block == block) return &b;
    return nullptr;
}

KeepList KeepList::load(const std::string& path) {
    const std::string text = read_small_file(path, kMaxKeeplistBytes, "keeplist");
    return parse(text, path);
}

KeepList KeepList::parse(const std::string& text, const std::string& path) {
    check_depth(text, path);
    // Nesting is checked above, before the parser sees the text.
    const json j = parse_json_input<json>(text, path, 0, kMaxValues, "any model's keeplist");
    if (!j.is_object()) bad(path, "json", "a keeplist must be a JSON object");
    KeepList kl;
    if (j.contains("drop") && !j.contains("blocks")) {
        kl.drop_form = true;
        const json& d = j["drop"];
        if (!d.is_object()) bad(path, "drop", "must be an object {\"block\": [expert ids]}");
        for (const auto& [k, v] : d.items()) {
            KeepBlock b;
            try {
                size_t used = 0;
                b.block = std::stoi(k, &used);
                if (used != k.size() || b.block < 0) throw std::invalid_argument(k);
            } catch (const std::exception&) {
                bad(path, "drop", fmt::format("key \"{}\" is not a block number", k.substr(0, 40)));
            }
            b.prune = get_ids(v, path, fmt::format("drop.{}", k));
            kl.blocks.push_back(std::move(b));
        }
        std::sort(kl.blocks.begin(), kl.blocks.end(),
                  [](const KeepBlock& a, const KeepBlock& b) { return a.block < b.block; });
        return kl;
    }
    if (j.contains("format") && j["format"] != "gguf-reap.keeplist")
        bad(path, "format",
            fmt::format("is {}, expected \"gguf-reap.keeplist\"", j["format"].dump().substr(0, 60)));
    // Compared before narrowing: version 2^32 + 1 must not pass as 1.
    const uint64_t version = get_uint(member(j, "version", path, "version"), path, "version");
    if (version != 1)
        bad(path, "version",
            fmt::format("keeplist version {} is not supported (this gguf-reap reads version 1)", version));
    kl.version = 1;
    if (j.contains("source")) {
        const json& s = j["source"];
        KeepListSource src;
        if (!s.is_object()) bad(path, "source", "must be an object");
        src.from_imatrix_only = s.contains("derived_from") && s["derived_from"] == "imatrix";
        if (!src.from_imatrix_only) {
            const json& arch = member(s, "architecture", path, "source");
            if (!arch.is_string()) bad(path, "source.architecture", "must be a string");
            src.architecture = arch.get<std::string>();
        }
        src.expert_count = get_uint(member(s, "expert_count", path, "source"), path, "source.expert_count");
        if (s.contains("expert_used_count"))
            src.expert_used_count = get_uint(s["expert_used_count"], path, "source.expert_used_count");
        if (s.contains("expert_group_count"))
            src.expert_group_count = get_uint(s["expert_group_count"], path, "source.expert_group_count");
        if (s.contains("tensor_count"))
            src.tensor_count = get_uint(s["tensor_count"], path, "source.tensor_count");
        if (s.contains("tensor_names_sha256")) {
            const json& h = s["tensor_names_sha256"];
            if (!h.is_string() || !is_sha256_hex(h.get<std::string>()))
                bad(path, "source.tensor_names_sha256", "must be a sha256 in 64 lowercase hex digits");
            src.tensor_names_sha256 = h.get<std::string>();
        }
        if (s.contains("shards") && s["shards"].is_array())
            for (const auto& sh : s["shards"])
                if (sh.is_object() && sh.contains("name") && sh["name"].is_string())
                    src.shards.emplace_back(
                        sh["name"].get<std::string>(),
                        sh.contains("size") ? get_uint(sh["size"], path, "source.shards.size") : 0);
        kl.source = src;
    }
    if (j.contains("method")) kl.method = j["method"];
    const json& blocks = member(j, "blocks", path, "blocks");
    if (!blocks.is_array()) bad(path, "blocks", "must be an array");
    for (size_t i = 0; i < blocks.size(); ++i) {
        const std::string at = fmt::format("blocks[{}]", i);
        const json& bj = blocks[i];
        KeepBlock b;
        const uint64_t id = get_uint(member(bj, "block", path, at), path, at + ".block");
        if (id > 100000) bad(path, at + ".block", fmt::format("block {} is out of range", id));
        b.block = static_cast<int>(id);
        b.keep = get_ids(member(bj, "keep", path, at), path, at + ".keep");
        if (bj.contains("prune")) b.prune = get_ids(bj["prune"], path, at + ".prune");
        if (bj.contains("dead")) b.dead = get_ids(bj["dead"], path, at + ".dead");
        if (bj.contains("protected") && bj["protected"].is_array())
            for (const auto& p : bj["protected"])
                if (p.is_object() && p.contains("expert") && p["expert"].is_number_integer())
                    b.protected_experts.push_back(
                        {p["expert"].get<int64_t>(), p.contains("reason") && p["reason"].is_string()
                                                         ? p["reason"].get<std::string>()
                                                         : ""});
        if (bj.contains("dead_reasons") && bj["dead_reasons"].is_array())
            for (const auto& p : bj["dead_reasons"])
                if (p.is_object() && p.contains("expert") && p["expert"].is_number_integer())
                    b.dead_reasons.push_back(
                        {p["expert"].get<int64_t>(), p.contains("reason") && p["reason"].is_string()
                                                         ? p["reason"].get<std::string>()
                                                         : ""});
        kl.blocks.push_back(std::move(b));
    }
    kl.n_keep = j.contains("n_keep") ? get_uint(j["n_keep"], path, "n_keep")
                                     : (kl.blocks.empty() ? 0 : kl.blocks.front().keep.size());
    return kl;
}

json KeepList::to_json() const {
    json j;
    j["format"] = "gguf-reap.keeplist";
    j["version"] = version;
    if (source && source->from_imatrix_only) {
        j["source"] = {{"expert_count", source->expert_count}, {"derived_from", "imatrix"}};
    } else if (source) {
        json s;
        s["architecture"] = source->architecture;
        s["expert_count"] = source->expert_count;
        s["expert_used_count"] = source->expert_used_count;
        s["expert_group_count"] = source->expert_group_count;
        s["tensor_count"] = source->tensor_count;
        if (!source->tensor_names_sha256.empty()) s["tensor_names_sha256"] = source->tensor_names_sha256;
        json sh = json::array();
        for (const auto& [name, size] : source->shards) sh.push_back({{"name", name}, {"size", size}});
        s["shards"] = sh;
        j["source"] = s;
    }
    j["n_keep"] = n_keep;
    j["method"] = method;
    json bl = json::array();
    for (const auto& b : blocks) {
        json o;
        o["block"] = b.block;
        o["keep"] = b.keep;
        o["prune"] = b.prune;
        o["dead"] = b.dead;
        json p = json::array();
        for (const auto& pe : b.protected_experts)
            p.push_back({{"expert", pe.expert}, {"reason", pe.reason}});
        o["protected"] = p;
        if (!b.dead_reasons.empty()) {
            json dr = json::array();
            for (const auto& x : b.dead_reasons) dr.push_back({{"expert", x.expert}, {"reason", x.reason}});
            o["dead_reasons"] = dr;
        }
        bl.push_back(o);
    }
    j["blocks"] = bl;
    return j;
}

std::string KeepList::text() const {
    return to_json().dump(1) + "\n";
}

void KeepList::save(const std::string& path) const {
    const std::string text = this->text();
    OutputFile out(path);
    out.write_at(0, text.data(), text.size());
    out.commit();
}

namespace {

// The one wording of a keeplist refused for a model of another layout, in every command.
[[noreturn]] void refuse_layout(const std::string& path, const std::string& field, const std::string& ranked,
                                const std::string& model_name, const std::string& has) {
    throw InputError(
        path, std::nullopt, "source." + field,
        fmt::format("ranked on a model with {}, but {} has {}: a keeplist applies only to a model "
                    "with the same architecture, expert layout and tensor names (another model, "
                    "or an already pruned one?)",
                    ranked, model_name, has));
}

void check_arch_and_experts(const KeepListSource& s, const std::string& path, const std::string& arch,
                            uint64_t expert_count, const std::string& model_name) {
    if (!s.from_imatrix_only && !s.architecture.empty() && s.architecture != arch)
        refuse_layout(path, "architecture", fmt::format("architecture '{}'", s.architecture), model_name,
                      fmt::format("architecture '{}'", arch));
    if (s.expert_count != expert_count)
        refuse_layout(path, "expert_count", fmt::format("{} experts per block", s.expert_count), model_name,
                      fmt::format("{}", expert_count));
}

}  // namespace

KeepListSource keeplist_source_of(const ShardSet& set, const MoeLayout& layout) {
    KeepListSource src;
    src.architecture = layout.arch;
    src.expert_count = layout.expert_count;
    src.expert_used_count = layout.expert_used_count;
    src.expert_group_count = layout.expert_group_count;
    src.tensor_count = set.tensors().size();
    std::vector<std::string> names;
    names.reserve(set.tensors().size());
    for (const TensorRef& t : set.tensors()) names.push_back(set.info(t).name);
    std::sort(names.begin(), names.end());
    Sha256 h;
    for (const std::string& n : names) {
        h.update(n.data(), n.size());
        h.update("\n", 1);
    }
    src.tensor_names_sha256 = h.finish_hex();
    for (const Shard& s : set.shards())
        src.shards.emplace_back(base_name(s.path), s.file ? s.file->size() : 0);
    return src;
}

std::string keeplist_applies_to(const KeepList& kl, const std::string& path, const KeepListSource& m,
                                const std::string& model_name) {
    if (!kl.source) return "";
    const KeepListSource& s = *kl.source;
    check_arch_and_experts(s, path, m.architecture, m.expert_count, model_name);
    if (s.from_imatrix_only) return "";
    // Fields an older or hand-made keeplist may lack (read as 0 or "") are not compared.
    if (s.expert_used_count != 0) {
        if (s.expert_used_count != m.expert_used_count)
            refuse_layout(path, "expert_used_count",
                          fmt::format("{} experts used per token", s.expert_used_count), model_name,
                          fmt::format("{}", m.expert_used_count));
        if (std::max<uint64_t>(1, s.expert_group_count) != std::max<uint64_t>(1, m.expert_group_count))
            refuse_layout(path, "expert_group_count",
                          fmt::format("{} expert group(s)", std::max<uint64_t>(1, s.expert_group_count)),
                          model_name, fmt::format("{}", std::max<uint64_t>(1, m.expert_group_count)));
    }
    if (s.tensor_count != 0 && s.tensor_count != m.tensor_count)
        refuse_layout(path, "tensor_count", fmt::format("{} tensors", s.tensor_count), model_name,
                      fmt::format("{}", m.tensor_count));
    if (!s.tensor_names_sha256.empty() && !m.tensor_names_sha256.empty() &&
        s.tensor_names_sha256 != m.tensor_names_sha256)
        refuse_layout(path, "tensor_names_sha256",
                      fmt::format("tensor names of sha256 {}", s.tensor_names_sha256.substr(0, 16)),
                      model_name,
                      fmt::format("other tensor names (sha256 {})", m.tensor_names_sha256.substr(0, 16)));
    bool same = s.shards.size() == m.shards.size();
    for (size_t i = 0; same && i < s.shards.size(); ++i)
        same =
            s.shards[i].first == m.shards[i].first &&
            (s.shards[i].second == 0 || m.shards[i].second == 0 || s.shards[i].second == m.shards[i].second);
    if (same) return "";
    const std::string ranked =
        s.shards.empty() ? std::string("a model the keeplist does not name") : s.shards.front().first;
    const std::string applied = m.shards.empty() ? model_name : m.shards.front().first;
    return fmt::format("ranked on {}, applied to {} (the same architecture, expert layout and tensor names)",
                       ranked, applied);
}

namespace {

// One block's ids checked (in range, each once, kept ones ascending), and its keep and prune lists
// completed from whichever the file gives.
void complete_block(KeepBlock& b, bool drop_form, int64_t E,
                    const std::function<void(const std::string&)>& fail) {
    auto check_ids = [&](const std::vector<int64_t>& ids, const char* what) {
        std::set<int64_t> seen;
        for (int64_t id : ids) {
            if (id < 0 || id >= E)
                fail(fmt::format("block {}: {} id {} is out of range (the model has experts 0..{})", b.block,
                                 what, id, E - 1));
            if (!seen.insert(id).second)
                fail(fmt::format("block {}: {} id {} is listed twice", b.block, what, id));
        }
    };
    if (drop_form) {
        check_ids(b.prune, "dropped");
        std::set<int64_t> drop(b.prune.begin(), b.prune.end());
        b.keep.clear();
        for (int64_t e = 0; e < E; ++e)
            if (!drop.count(e)) b.keep.push_back(e);
        b.prune.assign(drop.begin(), drop.end());
    } else {
        check_ids(b.keep, "kept");
        if (!std::is_sorted(b.keep.begin(), b.keep.end()))
            fail(fmt::format("block {}: kept ids must be in ascending order (source order is preserved)",
                             b.block));
        if (!b.prune.empty()) {
            check_ids(b.prune, "pruned");
            std::set<int64_t> all(b.keep.begin(), b.keep.end());
            for (int64_t p : b.prune)
                if (!all.insert(p).second)
                    fail(fmt::format("block {}: expert {} is both kept and pruned", b.block, p));
            if (static_cast<int64_t>(all.size()) != E)
                fail(fmt::format("block {}: keep and prune cover {} of the {} experts", b.block, all.size(),
                                 E));
        } else {
            std::set<int64_t> keep(b.keep.begin(), b.keep.end());
            for (int64_t e = 0; e < E; ++e)
                if (!keep.count(e)) b.prune.push_back(e);
        }
    }
}

}  // namespace

void validate_keeplist(KeepList& kl, const MoeLayout& layout, const std::string& path) {
    auto fail = [&](const std::string& msg) { throw UsageError(fmt::format("{}: {}", path, msg)); };
    const int64_t E = static_cast<int64_t>(layout.expert_count);
    if (layout.blocks.empty()) fail("the model has no MoE blocks: there are no experts to remove");
    // Every command calls keeplist_applies_to first, with the model's name; this is the same check for
    // callers that have only the layout.
    if (kl.source) check_arch_and_experts(*kl.source, path, layout.arch, layout.expert_count, "the model");
    std::set<int> model_blocks, list_blocks;
    for (const auto& b : layout.blocks) model_blocks.insert(b.block);
    for (const auto& b : kl.blocks)
        if (!list_blocks.insert(b.block).second) fail(fmt::format("block {} is listed twice", b.block));
    for (int b : model_blocks)
        if (!list_blocks.count(b))
            fail(fmt::format("block {} of the model has experts but is missing from the keeplist", b));
    for (int b : list_blocks)
        if (!model_blocks.count(b))
            fail(fmt::format("block {} is in the keeplist but is not an MoE block of the model", b));

    for (KeepBlock& b : kl.blocks) complete_block(b, kl.drop_form, E, fail);
    const size_t n = kl.blocks.front().keep.size();
    for (const auto& b : kl.blocks)
        if (b.keep.size() != n)
            fail(fmt::format(
                "block {} keeps {} experts but block {} keeps {}: llama.cpp's expert_count is one number "
                "for every block",
                b.block, b.keep.size(), kl.blocks.front().block, n));
    // The K rules (model/keep_count.h); whole groups are checked after n_keep, with the groups themselves.
    const auto no = keep_count_refusal({E, static_cast<int64_t>(layout.expert_used_count),
                                        static_cast<int64_t>(layout.expert_group_count), layout.arch},
                                       static_cast<int64_t>(n));
    if (no) {
        switch (no->breach) {
            case KeepCountBreach::kOutOfRange:  // more than E cannot be: the ids are unique and below E
                fail("keeps no experts");
                break;
            case KeepCountBreach::kBelowUsed:
                fail(fmt::format(
                    "keeps {} experts per block, fewer than expert_used_count = {} (llama.cpp requires "
                    "expert_used_count <= expert_count)",
                    n, layout.expert_used_count));
                break;
            case KeepCountBreach::kCountChange:
                fail(fmt::format("keeps {} of {} experts per block: {}", n, layout.expert_count, no->why));
                break;
            case KeepCountBreach::kNotGroupMultiple:
                break;
        }
    }
    if (kl.n_keep != 0 && kl.n_keep != n && !kl.drop_form)
        fail(fmt::format("n_keep is {} but the blocks keep {} experts each", kl.n_keep, n));
    kl.n_keep = n;
    if (layout.expert_group_count > 1) {
        const uint64_t G = layout.expert_group_count;
        if (no && no->breach == KeepCountBreach::kNotGroupMultiple)
            fail(fmt::format("keeps {} experts per block, not a multiple of expert_group_count = {}", n, G));
        const int64_t per_group = E / static_cast<int64_t>(G);
        for (const auto& b : kl.blocks) {
            std::vector<size_t> counts(G, 0);
            for (int64_t id : b.keep) ++counts[static_cast<size_t>(id / per_group)];
            for (size_t g = 0; g < G; ++g)
                if (counts[g] != n / G)
                    fail(fmt::format(
                        "block {}: group {} (experts {}..{}) keeps {} experts, but every group must keep "
                        "{} so that group-limited routing still works",
                        b.block, g, static_cast<int64_t>(g) * per_group,
                        static_cast<int64_t>(g + 1) * per_group - 1, counts[g], n / G));
        }
    }
}

}  // namespace gguf_reap
