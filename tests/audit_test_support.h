// Shared by audit_test.cpp and audit_shards_test.cpp: an independent writer of pruned outputs (from
// the real llama.cpp-made fixtures, by serialize_header and byte copies: no splice code), and small
// tools to break a byte, a key or a shard of what it wrote.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "format/ggml_types.h"
#include "format/gguf.h"
#include "gguf_reap/audit.h"
#include "gguf_reap/error.h"
#include "io/input_file.h"
#include "model/shard_set.h"
#include "ops/audit/audit_steps.h"
#include "test_util.h"

namespace gguf_reap::audit_test {

namespace fs = std::filesystem;
using test::fixture;
using test::TempDir;

inline constexpr const char* kQ8 = "models/tiny-deepseek2-Q8_0.gguf";
inline constexpr const char* kIq2 = "models/tiny-deepseek2-IQ2_XXS.gguf";
inline constexpr const char* kIq2Shard1 = "shards/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf";

using Keep = std::map<int, std::vector<int64_t>>;

// prune_specs/tiny-deepseek2.drop-dead.json and drop-live.json, as kept ids.
inline Keep keep_all_but(const std::map<int, std::vector<int64_t>>& drop) {
    Keep k;
    for (const auto& [block, ids] : drop)
        for (int64_t e = 0; e < 16; ++e)
            if (std::find(ids.begin(), ids.end(), e) == ids.end()) k[block].push_back(e);
    return k;
}
inline Keep drop_dead() {
    return keep_all_but({{1, {3, 7, 12}}, {2, {0, 9, 14}}, {3, {5, 10, 15}}});
}
inline Keep drop_live() {
    return keep_all_but({{1, {0, 2, 4}}, {2, {1, 2, 6}}, {3, {0, 1, 3}}});
}

// ---- an independent writer of pruned outputs ---------------------------------------------------------

struct BuildSpec {
    std::string source = kQ8;  // relative to the fixtures; an unsplit model
    Keep keep;                 // empty: no pruning
    int shards = 3;
    bool provenance = true;
    bool swap_tensors = false;  // write two neighbouring tensors in the wrong order
    bool swap_kvs = false;      // write the source's <arch>.block_count after the key that follows it
    std::vector<Kv> extra_kvs;  // keys the source lacks, after its own
};

// Expert axis by name, as the reference describes it (not through MoeLayout): stacked expert weights on
// ne[2], router rows on ne[1], exp_probs_b on ne[0].
inline int expert_axis(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    if (name.find("_exps.weight") != std::string::npos) return 2;
    if (name.find("ffn_gate_inp.weight") != std::string::npos) return 1;
    if (name.find("exp_probs_b.bias") != std::string::npos) return 0;
    return -1;
}

inline int block_of(const std::string& name) {
    return std::stoi(name.substr(4, name.find('.', 4) - 4));
}

inline std::vector<std::string> build_output(const BuildSpec& spec, const std::string& prefix) {
    const ShardSet src = ShardSet::open(fixture(spec.source));
    const std::vector<uint8_t> bytes = test::read_file(src.shards().front().path);
    const std::string arch = src.architecture();
    const uint64_t E = *src.arch_uint("expert_count");
    const uint64_t N = spec.keep.empty() ? E : spec.keep.begin()->second.size();

    struct Out {
        TensorInfo info;
        std::vector<std::pair<uint64_t, uint64_t>> ranges;  // source offset, length
    };
    std::vector<Out> tensors;
    for (const TensorRef& r : src.tensors()) {
        Out o{src.info(r), {}};
        const int axis = expert_axis(o.info.name);
        if (axis >= 0 && !spec.keep.empty()) {
            const uint64_t slab = o.info.nbytes / E;
            for (int64_t e : spec.keep.at(block_of(o.info.name)))
                o.ranges.emplace_back(r.abs_offset + static_cast<uint64_t>(e) * slab, slab);
            o.info.ne[static_cast<size_t>(axis)] = static_cast<int64_t>(N);
            o.info.nbytes = slab * N;
        } else {
            o.ranges.emplace_back(r.abs_offset, o.info.nbytes);
        }
        tensors.push_back(std::move(o));
    }
    if (spec.swap_tensors) std::swap(tensors[5], tensors[6]);

    std::vector<Kv> meta;
    for (const Kv& kv : src.metadata().kvs) {
        // With provenance, docs/splice.md "Name and base model": the name says what the build is, and the
        // source is its one base model (these fixtures name no organization or repository).
        if (spec.provenance && kv.key == "general.name") {
            const std::string name = *kv.as_string();
            meta.push_back(
                Kv::make_string("general.name", fmt::format("{} ({} of {} routed experts)", name, N, E)));
            meta.push_back(Kv::make_u32("general.base_model.count", 1));
            meta.push_back(Kv::make_string("general.base_model.0.name", name));
            continue;
        }
        meta.push_back(kv.key == arch + ".expert_count" ? *Kv::make_int_like(kv, N) : kv);
    }
    if (spec.swap_kvs) {
        const auto at = std::find_if(meta.begin(), meta.end(),
                                     [&](const Kv& kv) { return kv.key == arch + ".block_count"; });
        std::iter_swap(at, at + 1);
    }
    meta.insert(meta.end(), spec.extra_kvs.begin(), spec.extra_kvs.end());
    if (spec.provenance) {
        meta.push_back(Kv::make_string("gguf_reap.version", "gguf-reap 0.1.0"));
        meta.push_back(Kv::make_u32("gguf_reap.source_expert_count", static_cast<uint32_t>(E)));
        meta.push_back(Kv::make_string("gguf_reap.keeplist_sha256", std::string(64, 'a')));
        for (const auto& [block, ids] : spec.keep)
            meta.push_back(Kv::make_u32_array(fmt::format("gguf_reap.kept.{}", block), ids));
    }

    std::vector<std::string> paths;
    const size_t n = static_cast<size_t>(spec.shards);
    for (size_t s = 0; s < n; ++s) {
        std::vector<Kv> kvs = s == 0 ? meta : std::vector<Kv>{};
        if (n > 1) {
            kvs.push_back(Kv::make_u16("split.no", static_cast<uint16_t>(s)));
            kvs.push_back(Kv::make_u16("split.count", static_cast<uint16_t>(n)));
            kvs.push_back(Kv::make_i32("split.tensors.count", static_cast<int32_t>(tensors.size())));
        }
        const size_t lo = s * tensors.size() / n, hi = (s + 1) * tensors.size() / n;
        std::vector<TensorInfo> infos;
        for (size_t i = lo; i < hi; ++i) infos.push_back(tensors[i].info);
        const uint32_t align = header_alignment(kvs);
        assign_offsets(infos, align);
        std::vector<uint8_t> file = serialize_header(3, kvs, infos, align);
        for (size_t i = lo; i < hi; ++i) {
            for (const auto& [off, len] : tensors[i].ranges)
                file.insert(file.end(), bytes.begin() + static_cast<ptrdiff_t>(off),
                            bytes.begin() + static_cast<ptrdiff_t>(off + len));
            file.resize(*pad_to(file.size(), align), 0);
        }
        paths.push_back(n > 1 ? split_path(prefix, static_cast<int>(s + 1), static_cast<int>(n))
                              : prefix + ".gguf");
        test::write_file(paths.back(), file);
    }
    return paths;
}

// ---- helpers --------------------------------------------------------------------------------------------

struct Where {
    std::string path;
    uint64_t abs = 0;  // first data byte
    uint64_t nbytes = 0;
    uint32_t alignment = 32;
};

inline Where locate(const std::vector<std::string>& shards, const std::string& tensor) {
    for (const auto& p : shards) {
        auto f = InputFile::open(p);
        const Header h = parse_gguf_header(*f);
        for (const auto& t : h.tensors)
            if (t.name == tensor) return {p, h.data_start + t.offset, t.nbytes, h.alignment};
    }
    ADD_FAILURE() << "no tensor " << tensor;
    return {};
}

inline uint64_t kv_value_at(const std::string& path, const std::string& key) {
    auto f = InputFile::open(path);
    const Header h = parse_gguf_header(*f);
    const Kv* kv = h.find(key);
    EXPECT_NE(kv, nullptr) << key;
    return kv ? kv->file_offset + 8 + kv->key.size() + 4 : 0;
}

inline void flip(const std::string& path, uint64_t offset, uint8_t mask = 0x5a) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ mask);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
}

inline void write_at(const std::string& path, uint64_t offset, const void* data, size_t n) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

inline AuditReport audit(const std::string& output, const std::string& source = "",
                         const std::string& keeplist = "", int threads = 0) {
    AuditOptions o;
    o.output = output;
    if (!source.empty()) o.source = source;
    if (!keeplist.empty()) o.keeplist = keeplist;
    o.threads = threads;
    return run_audit(o);
}

inline std::string all_lines(const AuditReport& r) {
    std::string s;
    for (const auto& f : r.findings) s += fmt::format("[{}] {}\n", finding_kind_name(f.kind), f.line());
    return s;
}

class AuditTest : public ::testing::Test {
  protected:
    void SetUp() override { REQUIRE_FIXTURES(); }
    std::vector<std::string> pruned(const Keep& keep = drop_dead(), int shards = 3, bool provenance = true) {
        BuildSpec s;
        s.keep = keep;
        s.shards = shards;
        s.provenance = provenance;
        return build_output(s, dir.file("out"));
    }
    TempDir dir;
};

}  // namespace gguf_reap::audit_test
