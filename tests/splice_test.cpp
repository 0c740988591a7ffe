// splice on the real llama.cpp fixtures: the plan alone (no disk) and written files, checked against
// the independent reference pruner's results in expected.json, re-read under ggml's rules.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>

#include "format/ggml_types.h"
#include "gguf_reap/error.h"
#include "gguf_reap/splice.h"
#include "io/preflight.h"
#include "io/signals.h"
#include "services/splice_plan.h"
#include "splice_test_support.h"

namespace gguf_reap {
namespace {

using test::drop_spec;
using test::error_of;
using test::expected_json;
using test::fixture;
using test::splice_api;
using test::TempDir;

const char* kSpecs[] = {"drop-dead", "drop-live"};

std::vector<int64_t> ne_of(const TensorInfo& t) {
    return std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims);
}

// Every rewritten tensor has the oracle's data sha256 and ne; every other tensor is the source's.
void expect_matches_oracle(const ShardSet& src, const ShardSet& out, const nlohmann::json& oracle) {
    const auto& shas = oracle["pruned_tensor_data_sha256"];
    const auto& nes = oracle["pruned_tensor_ne"];
    ASSERT_EQ(out.tensors().size(), src.tensors().size());
    for (size_t i = 0; i < src.tensors().size(); ++i) {
        const TensorInfo& s = src.info(src.tensors()[i]);
        const TensorInfo& o = out.info(out.tensors()[i]);
        ASSERT_EQ(o.name, s.name) << "tensor order is the source order";
        EXPECT_EQ(o.type, s.type) << s.name;
        if (shas.contains(s.name)) {
            EXPECT_EQ(test::tensor_sha(out, out.tensors()[i]), shas[s.name].get<std::string>()) << s.name;
            EXPECT_EQ(ne_of(o), nes[s.name].get<std::vector<int64_t>>()) << s.name;
        } else {
            EXPECT_EQ(o.ne, s.ne) << s.name;
            EXPECT_EQ(test::tensor_sha(out, out.tensors()[i]), test::tensor_sha(src, src.tensors()[i]))
                << s.name;
        }
    }
    EXPECT_EQ(out.arch_uint("expert_count"), oracle["expert_count"].get<uint64_t>());
}

TEST(SplicePlan, FixturesMatchOracleWithoutDisk) {
    REQUIRE_FIXTURES();
    TempDir dir;
    for (const auto& [rel, exp] : expected_json()["models"].items()) {
        for (const char* spec : kSpecs) {
            SCOPED_TRACE(rel + " " + spec);
            auto s = splice_api(fixture(rel), drop_spec(spec), dir.file("never"), {}, /*execute=*/false);
            const auto& oracle = exp["pruning_oracle"][spec];
            ASSERT_EQ(s->opened->plan->shards.size(), 1u);
            const PlannedFile& f = s->opened->plan->shards[0];
            EXPECT_EQ(f.tensors.size(), 70u);
            EXPECT_EQ(f.sliced_tensors, 15u);
            EXPECT_EQ(f.slabs, 15u * 13u);
            EXPECT_EQ(s->opened->plan->kept_expert_count, 13u);
            for (const PlannedTensor& t : f.tensors) {
                const auto bytes = test::planned_bytes(*s->opened->plan, f.job, t.data_offset, t.info.nbytes);
                const std::string sha = test::sha256_hex(bytes.data(), bytes.size());
                if (oracle["pruned_tensor_data_sha256"].contains(t.info.name)) {
                    EXPECT_EQ(sha, oracle["pruned_tensor_data_sha256"][t.info.name].get<std::string>())
                        << t.info.name;
                    EXPECT_EQ(ne_of(t.info),
                              oracle["pruned_tensor_ne"][t.info.name].get<std::vector<int64_t>>());
                    EXPECT_GE(t.expert_axis, 0);
                } else {
                    EXPECT_EQ(t.expert_axis, -1) << t.info.name;
                    EXPECT_EQ(t.extents, 1u) << t.info.name;
                }
            }
            // Exact size: header, then every tensor padded to the alignment.
            uint64_t data = 0;
            for (const PlannedTensor& t : f.tensors) data += (t.info.nbytes + 31) / 32 * 32;
            EXPECT_EQ(f.job.size, f.header_bytes + data);
            EXPECT_EQ(f.header_bytes % 32, 0u);
        }
    }
}

TEST(SplicePlan, AdjacentKeptSlabsMerge) {
    REQUIRE_FIXTURES();
    TempDir dir;
    // drop-dead keeps 16 - 3 experts in runs: blk.1 drops 3, 7, 12 → runs 0-2, 4-6, 8-11, 13-15.
    auto s = splice_api(fixture("models/tiny-deepseek2-Q8_0.gguf"), drop_spec("drop-dead"), dir.file("x"), {},
                        false);
    for (const PlannedTensor& t : s->opened->plan->shards[0].tensors) {
        if (t.info.name == "blk.1.ffn_down_exps.weight") {
            EXPECT_EQ(t.extents, 4u);
        } else if (t.info.name == "blk.2.ffn_up_exps.weight") {
            EXPECT_EQ(t.extents, 3u);  // drops 0, 9, 14
        }
    }
}

TEST(SpliceRun, FixtureModelsMatchOracle) {
    REQUIRE_FIXTURES();
    for (const auto& [rel, exp] : expected_json()["models"].items()) {
        for (const char* spec : kSpecs) {
            SCOPED_TRACE(rel + " " + spec);
            TempDir dir;
            auto s = splice_api(fixture(rel), drop_spec(spec), dir.file("pruned"));
            ShardSet out = ShardSet::open(dir.file("pruned.gguf"));
            expect_matches_oracle(*s->opened->model, out, exp["pruning_oracle"][spec]);
            EXPECT_EQ(std::filesystem::file_size(dir.file("pruned.gguf")),
                      s->opened->plan->shards[0].job.size);
            // Nothing else in the directory: no temporaries left.
            EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
        }
    }
}

TEST(SpliceRun, ShardedSourceMatchesOracle) {
    REQUIRE_FIXTURES();
    const auto& oracle_all =
        expected_json()["models"]["models/tiny-deepseek2-IQ2_XXS.gguf"]["pruning_oracle"];
    for (const char* spec : kSpecs) {
        SCOPED_TRACE(spec);
        TempDir dir;
        // Opened from the middle shard: any shard names the set.
        auto s = splice_api(fixture("shards/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf"), drop_spec(spec),
                            dir.file("pruned"));
        ASSERT_EQ(s->opened->plan->shards.size(), 3u) << "as many shards as the source by default";
        ShardSet out = ShardSet::open(dir.file("pruned-00003-of-00003.gguf"));
        ASSERT_TRUE(out.is_split());
        expect_matches_oracle(*s->opened->model, out, oracle_all[spec]);
        // Shards 2 and 3 carry exactly split.no, split.count, split.tensors.count with llama.cpp's types.
        for (size_t i = 0; i < 3; ++i) {
            const Header& h = out.shards()[i].header;
            const Kv* no = h.find("split.no");
            const Kv* count = h.find("split.count");
            const Kv* tensors = h.find("split.tensors.count");
            ASSERT_TRUE(no && count && tensors);
            EXPECT_EQ(no->type, GgufType::kUint16);
            EXPECT_EQ(count->type, GgufType::kUint16);
            EXPECT_EQ(tensors->type, GgufType::kInt32);
            EXPECT_EQ(*no->as_uint(), i);
            EXPECT_EQ(*count->as_uint(), 3u);
            EXPECT_EQ(*tensors->as_int(), 70);
            if (i > 0) {
                ASSERT_EQ(h.kvs.size(), 3u);
                EXPECT_EQ(h.kvs[0].key, "split.no");
                EXPECT_EQ(h.kvs[1].key, "split.tensors.count");  // llama-gguf-split's order
                EXPECT_EQ(h.kvs[2].key, "split.count");
            }
        }
        // Shard 1: source KVs in source order (split.* replaced in place; general.name says what the build
        // is, followed by the two base-model keys), then provenance.
        const auto& src_kvs = s->opened->model->metadata().kvs;
        const auto& all_kvs = out.metadata().kvs;
        ASSERT_EQ(all_kvs.size(), src_kvs.size() + 2 + 3 + 3);
        std::vector<Kv> out_kvs;
        for (const Kv& kv : all_kvs)
            if (kv.key.rfind("general.base_model.", 0) != 0) out_kvs.push_back(kv);
        for (size_t i = 0; i < src_kvs.size(); ++i) {
            EXPECT_EQ(out_kvs[i].key, src_kvs[i].key);
            EXPECT_EQ(out_kvs[i].type, src_kvs[i].type);
            if (src_kvs[i].key == "deepseek2.expert_count") {
                EXPECT_EQ(*out_kvs[i].as_uint(), 13u);
            } else if (src_kvs[i].key == "general.name") {
                EXPECT_EQ(*out_kvs[i].as_string(), *src_kvs[i].as_string() + " (13 of 16 routed experts)");
                EXPECT_EQ(all_kvs[i + 1].key, "general.base_model.count");
                EXPECT_EQ(all_kvs[i + 2].key, "general.base_model.0.name");
                EXPECT_EQ(all_kvs[i + 2].as_string(), src_kvs[i].as_string());
            } else if (src_kvs[i].key.rfind("split.", 0) != 0) {
                EXPECT_EQ(out_kvs[i].raw, src_kvs[i].raw) << src_kvs[i].key;
            }
        }
        EXPECT_EQ(out_kvs[src_kvs.size()].key, "gguf_reap.version");
    }
}

TEST(SpliceRun, ProvenanceKeys) {
    REQUIRE_FIXTURES();
    TempDir dir;
    SpliceOptions o;
    o.tool_version = "gguf-reap 9.9.9";
    auto s =
        splice_api(fixture("models/tiny-deepseek2-Q4_K_M.gguf"), drop_spec("drop-live"), dir.file("p"), o);
    ShardSet out = ShardSet::open(dir.file("p.gguf"));
    const auto& kvs = out.metadata().kvs;
    // The source's keys, general.base_model.count and .0.name after general.name, then provenance.
    const size_t n_src = s->opened->model->metadata().kvs.size() + 2;
    ASSERT_EQ(kvs.size(), n_src + 6);
    EXPECT_EQ(kvs[n_src].key, "gguf_reap.version");
    EXPECT_EQ(kvs[n_src].as_string(), "gguf-reap 9.9.9");
    EXPECT_EQ(kvs[n_src + 1].key, "gguf_reap.source_expert_count");
    EXPECT_EQ(kvs[n_src + 1].type, GgufType::kUint32);
    EXPECT_EQ(kvs[n_src + 1].as_uint(), 16u);
    EXPECT_EQ(kvs[n_src + 2].key, "gguf_reap.keeplist_sha256");
    // The sha256 of the keeplist file's bytes (the drop spec's, in ../shared/fixtures/SHA256SUMS).
    EXPECT_EQ(kvs[n_src + 2].as_string(), "19658b17761727dbaeead502dfd145ae8c4117ebbdaf5402a9a9dbdbada4199e");
    const std::vector<std::vector<uint32_t>> kept = {{1, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                                                     {0, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                                                     {2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}};
    for (int b = 1; b <= 3; ++b) {
        const Kv& kv = kvs[n_src + 2 + static_cast<size_t>(b)];
        EXPECT_EQ(kv.key, "gguf_reap.kept." + std::to_string(b));
        ASSERT_EQ(kv.type, GgufType::kArray);
        ASSERT_EQ(kv.elem_type, GgufType::kUint32);
        ASSERT_EQ(kv.count, 13u);
        std::vector<uint32_t> ids(13);
        std::memcpy(ids.data(), kv.raw.data() + 12, 13 * 4);
        EXPECT_EQ(ids, kept[static_cast<size_t>(b - 1)]);
    }
    // --no-provenance: exactly the source KVs.
    o.provenance = false;
    auto s2 =
        splice_api(fixture("models/tiny-deepseek2-Q4_K_M.gguf"), drop_spec("drop-live"), dir.file("q"), o);
    ShardSet out2 = ShardSet::open(dir.file("q.gguf"));
    EXPECT_EQ(out2.metadata().kvs.size(), n_src - 2);
}

TEST(SpliceRun, ResplicingReplacesOldProvenance) {
    REQUIRE_FIXTURES();
    TempDir dir;
    splice_api(fixture("models/tiny-deepseek2-Q8_0.gguf"), drop_spec("drop-dead"), dir.file("a"));
    // Second pass on the 13-expert output: drop expert 0 of every block → 12.
    const std::string kl =
        test::write_text(dir.file("k.json"), R"({"drop": {"1": [0], "2": [0], "3": [0]}})");
    auto s = splice_api(dir.file("a.gguf"), kl, dir.file("b"));
    ShardSet out = ShardSet::open(dir.file("b.gguf"));
    EXPECT_EQ(out.arch_uint("expert_count"), 12u);
    size_t n = 0;
    for (const Kv& kv : out.metadata().kvs) n += kv.key.rfind("gguf_reap.", 0) == 0;
    EXPECT_EQ(n, 6u) << "one set of provenance keys, describing the last step";
    EXPECT_EQ(out.find_kv("gguf_reap.source_expert_count")->as_uint(), 13u);
}

TEST(SpliceRun, SplitModes) {
    REQUIRE_FIXTURES();
    const std::string shards = fixture("shards/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf");
    const std::string model = fixture("models/tiny-deepseek2-IQ2_XXS.gguf");
    const auto& oracle =
        expected_json()["models"]["models/tiny-deepseek2-IQ2_XXS.gguf"]["pruning_oracle"]["drop-dead"];
    struct Case {
        std::string src;
        SplitMode mode;
        uint64_t value;
        size_t shards;
    };
    const Case cases[] = {{shards, SplitMode::kCount, 1, 1},        {model, SplitMode::kCount, 4, 4},
                          {model, SplitMode::kMaxTensors, 10, 7},   {shards, SplitMode::kMaxTensors, 70, 1},
                          {model, SplitMode::kMaxSize, 1000000, 5}, {model, SplitMode::kMaxSize, 1, 70}};
    for (const Case& c : cases) {
        SCOPED_TRACE(fmt::format("{} mode {} value {}", c.src, static_cast<int>(c.mode), c.value));
        TempDir dir;
        SpliceOptions o;
        o.split_mode = c.mode;
        o.split_value = c.value;
        auto s = splice_api(c.src, drop_spec("drop-dead"), dir.file("o"), o);
        ASSERT_EQ(s->opened->plan->shards.size(), c.shards);
        const std::string first =
            c.shards == 1 ? dir.file("o.gguf") : dir.file(fmt::format("o-00001-of-{:05}.gguf", c.shards));
        ShardSet out = ShardSet::open(first);
        EXPECT_EQ(out.shards().size(), c.shards);
        expect_matches_oracle(*s->opened->model, out, oracle);
        if (c.shards == 1) {
            for (const char* k : {"split.no", "split.count", "split.tensors.count"})
                EXPECT_EQ(out.find_kv(k), nullptr) << k;
        }
        for (const PlannedFile& f : s->opened->plan->shards) {
            EXPECT_GE(f.tensors.size(), 1u);
            if (c.mode == SplitMode::kMaxTensors) {
                EXPECT_LE(f.tensors.size(), c.value);
            }
            if (c.mode == SplitMode::kMaxSize && f.tensors.size() > 1) {
                EXPECT_LE(f.job.size, c.value);
            }
            EXPECT_EQ(std::filesystem::file_size(f.job.path), f.job.size);
        }
    }
}

TEST(SplicePlan, AShardOfExactlyTheMaximumSizeIsKept) {
    // --split-max-size S allows a shard of S bytes: the first shard's own size as the limit leaves it whole.
    REQUIRE_FIXTURES();
    TempDir dir;
    const std::string model = fixture("models/tiny-deepseek2-IQ2_XXS.gguf");
    SpliceOptions o;
    o.split_mode = SplitMode::kMaxSize;
    o.split_value = 1000000;
    const auto s = splice_api(model, drop_spec("drop-dead"), dir.file("o"), o, false);
    ASSERT_GT(s->opened->plan->shards.size(), 2u);
    const PlannedFile& first = s->opened->plan->shards[0];
    o.split_value = first.job.size;
    const auto t = splice_api(model, drop_spec("drop-dead"), dir.file("o"), o, false);
    EXPECT_EQ(t->opened->plan->shards[0].job.size, first.job.size);
    EXPECT_EQ(t->opened->plan->shards[0].tensors.size(), first.tensors.size());
}

TEST(SplicePlan, DefaultShardsAreBalancedByBytes) {
    REQUIRE_FIXTURES();
    TempDir dir;
    SpliceOptions o;
    o.split_mode = SplitMode::kCount;
    o.split_value = 3;
    auto s = splice_api(fixture("models/tiny-deepseek2-Q8_0.gguf"), drop_spec("drop-dead"), dir.file("o"), o,
                        false);
    ASSERT_EQ(s->opened->plan->shards.size(), 3u);
    uint64_t largest_tensor = 0;
    for (const auto& f : s->opened->plan->shards)
        for (const auto& t : f.tensors) largest_tensor = std::max(largest_tensor, t.info.nbytes);
    const uint64_t share = s->opened->plan->bytes_written() / 3;
    for (const auto& f : s->opened->plan->shards) {
        EXPECT_LE(f.job.size, share + largest_tensor) << f.job.path;
        EXPECT_GE(f.job.size + largest_tensor, share) << f.job.path;
    }
}

TEST(SplicePlan, EveryCutIsTheNearestToAnEvenShare) {
    // Shards "as equal as possible": the bytes before the s-th cut come closer to s/k of the whole than
    // they would with the tensor on either side of the cut moved across it (a tensor goes where its
    // middle falls). The slack is for the headers, which shard sizes count and tensor sizes do not.
    REQUIRE_FIXTURES();
    TempDir dir;
    const int64_t slack = 4096;
    for (const auto& [rel, exp] : expected_json()["models"].items())
        for (uint64_t k = 2; k <= 5; ++k) {
            SCOPED_TRACE(fmt::format("{}, {} shards", rel, k));
            SpliceOptions o;
            o.split_mode = SplitMode::kCount;
            o.split_value = k;
            const auto s = splice_api(fixture(rel), drop_spec("drop-dead"), dir.file("o"), o, false);
            const auto& shards = s->opened->plan->shards;
            ASSERT_EQ(shards.size(), k);
            const auto total = static_cast<int64_t>(s->opened->plan->bytes_written());
            const auto moved = [](const PlannedFile& f, const PlannedTensor& t) {
                return static_cast<int64_t>(*pad_to(t.info.nbytes, f.alignment));
            };
            int64_t before = 0;
            for (uint64_t c = 1; c < k; ++c) {
                before += static_cast<int64_t>(shards[c - 1].job.size);
                const int64_t target = total * static_cast<int64_t>(c) / static_cast<int64_t>(k);
                const int64_t off = std::abs(before - target);
                const int64_t back = moved(shards[c - 1], shards[c - 1].tensors.back());
                const int64_t ahead = moved(shards[c], shards[c].tensors.front());
                if (shards[c - 1].tensors.size() > 1) {
                    EXPECT_LE(off, std::abs(before - back - target) + slack) << "cut " << c;
                }
                if (shards[c].tensors.size() > 1) {
                    EXPECT_LE(off, std::abs(before + ahead - target) + slack) << "cut " << c;
                }
            }
        }
}

TEST(SplicePlan, ImpossibleSplitsAreRefused) {
    REQUIRE_FIXTURES();
    TempDir dir;
    SpliceOptions o;
    o.split_mode = SplitMode::kCount;
    o.split_value = 71;
    try {
        splice_api(fixture("models/tiny-deepseek2-Q8_0.gguf"), drop_spec("drop-dead"), dir.file("o"), o,
                   false);
        FAIL() << "71 shards of 70 tensors";
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "cannot write 70 tensors into 71 shards: every shard needs a tensor");
    }
}

TEST(SpliceOutputPaths, Naming) {
    EXPECT_EQ(splice_output_paths("out/m", 1), std::vector<std::string>{"out/m.gguf"});
    EXPECT_EQ(splice_output_paths("out/m.gguf", 1), std::vector<std::string>{"out/m.gguf"});
    EXPECT_EQ(splice_output_paths("out/m.gguf", 2),
              (std::vector<std::string>{"out/m-00001-of-00002.gguf", "out/m-00002-of-00002.gguf"}));
}

// ---- validation before the first byte ------------------------------------------------------------

TEST(SplicePreflight, OutputNeverAliasesAnInput) {
    REQUIRE_FIXTURES();
    TempDir dir;
    const std::string src = dir.file("m.gguf");
    std::filesystem::copy_file(fixture("models/tiny-deepseek2-Q8_0.gguf"), src);
    // The output prefix names the source itself, a hard link to it, and a symlink to it.
    EXPECT_EQ(error_of<UsageError>(
                  [&] { splice_api(src, drop_spec("drop-dead"), dir.file("m"), {}, true, "", true); }),
              src + ": is the same file as the input " + src + " (an output never overwrites an input)");
    std::filesystem::create_hard_link(src, dir.file("hard.gguf"));
    EXPECT_EQ(error_of<UsageError>(
                  [&] { splice_api(src, drop_spec("drop-dead"), dir.file("hard"), {}, true, "", true); }),
              dir.file("hard.gguf") + ": is the same file as the input " + src +
                  " (an output never overwrites an input)");
    std::filesystem::create_symlink(src, dir.file("link.gguf"));
    EXPECT_EQ(error_of<UsageError>(
                  [&] { splice_api(src, drop_spec("drop-dead"), dir.file("link"), {}, true, "", true); }),
              dir.file("link.gguf") + ": is the same file as the input " + src +
                  " (an output never overwrites an input)");
    // The keeplist is an input too.
    const std::string kl = dir.file("k.gguf");
    std::filesystem::copy_file(drop_spec("drop-dead"), kl);
    EXPECT_EQ(error_of<UsageError>([&] { splice_api(src, kl, dir.file("k"), {}, true, "", true); }),
              kl + ": is the same file as the input " + kl + " (an output never overwrites an input)");
    EXPECT_EQ(std::filesystem::file_size(src), 15343136u);
}

TEST(SplicePreflight, ExistingOutputNeedsForce) {
    REQUIRE_FIXTURES();
    TempDir dir;
    test::write_text(dir.file("o.gguf"), "old");
    const std::string m = fixture("models/tiny-deepseek2-Q8_0.gguf");
    EXPECT_EQ(error_of<UsageError>([&] { splice_api(m, drop_spec("drop-dead"), dir.file("o")); }),
              dir.file("o.gguf") + ": already exists (use --force to replace it)");
    EXPECT_EQ(test::read_file(dir.file("o.gguf")).size(), 3u);
    splice_api(m, drop_spec("drop-dead"), dir.file("o"), {}, true, "", /*force=*/true);
    EXPECT_EQ(ShardSet::open(dir.file("o.gguf")).arch_uint("expert_count"), 13u);
}

TEST(SplicePreflight, ShardsOfAnotherSetUnderThePrefix) {
    REQUIRE_FIXTURES();
    TempDir dir;
    const std::string m = fixture("models/tiny-deepseek2-Q8_0.gguf");
    SpliceOptions three;
    three.split_mode = SplitMode::kCount;
    three.split_value = 3;
    splice_api(m, drop_spec("drop-dead"), dir.file("o"), three);
    SpliceOptions two = three;
    two.split_value = 2;
    // The third shard of the old set would be taken for an extra shard of the new one: refused
    // without --force, removed with it.
    EXPECT_EQ(
        error_of<UsageError>([&] { splice_api(m, drop_spec("drop-dead"), dir.file("o"), two); }),
        dir.file("o-00001-of-00003.gguf") +
            ": belongs to another shard set under the same prefix and would be taken for part of the output "
            "(use --force to remove it)");
    splice_api(m, drop_spec("drop-dead"), dir.file("o"), two, true, "", true);
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
        names.insert(e.path().filename().string());
    EXPECT_EQ(names, (std::set<std::string>{"o-00001-of-00002.gguf", "o-00002-of-00002.gguf"}));
    EXPECT_EQ(ShardSet::open(dir.file("o-00002-of-00002.gguf")).shards().size(), 2u);
}

TEST(SplicePreflight, FreeSpaceIsChecked) {
    REQUIRE_FIXTURES();
    TempDir dir;
    // The preflight every writing command runs, with an output larger than any disk.
    const std::string msg = error_of<IoError>([&] {
        check_outputs({{dir.file("o.gguf"), uint64_t{1} << 62}}, {}, false, ops::SpliceRequest::kForce);
    });
    EXPECT_NE(msg.find(dir.path().string() + ": not enough free space: the output needs 4096.0 PiB"),
              std::string::npos)
        << msg;
}

TEST(SplicePreflight, MissingOutputDirectoryIsCreated) {
    REQUIRE_FIXTURES();
    TempDir dir;
    splice_api(fixture("models/tiny-deepseek2-Q8_0.gguf"), drop_spec("drop-dead"), dir.file("nope/deeper/o"));
    EXPECT_TRUE(std::filesystem::is_regular_file(dir.file("nope/deeper/o.gguf")));
    // Where a directory cannot be made (a file stands in its way), nothing else is tried.
    std::ofstream(dir.file("file")) << "x";
    EXPECT_NE(error_of<IoError>([&] {
                  splice_api(fixture("models/tiny-deepseek2-Q8_0.gguf"), drop_spec("drop-dead"),
                             dir.file("file/o"));
              }).find(dir.file("file") + ": create directory: "),
              std::string::npos);
}

// ---- atomic and interruptible ----------------------------------------------------------------------

TEST(SpliceRun, InterruptLeavesNoFinalNameAndNoTemporary) {
    REQUIRE_FIXTURES();
    TempDir dir;
    auto s = splice_api(fixture("shards/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf"), drop_spec("drop-dead"),
                        dir.file("o"), {}, false);
    CopyOptions co;
    co.threads = 2;
    co.work_item_bytes = 64 << 10;  // many small items, so the interrupt lands mid-copy
    co.buffer_bytes = 64 << 10;
    // A real SIGINT after 1 MiB, in a child process: exit 130 when the copy stopped between 1 MiB and
    // its end with Interrupted, 2 and 3 when it stopped too early or not at all.
    const uint64_t total = s->opened->plan->bytes_written();
    EXPECT_EQ(test::in_child([&] {
                  install_signal_handlers();
                  std::atomic<uint64_t> seen{0};
                  co.on_progress = [&](uint64_t n) {
                      const uint64_t now = seen += n;
                      if (now > (1 << 20) && now - n <= (1 << 20)) ::raise(SIGINT);  // "Ctrl-C", once
                  };
                  try {
                      run_copy_jobs(s->opened->plan->jobs(), s->opened->plan->sources, co);
                  } catch (const Interrupted&) {
                      return seen <= (1u << 20) ? 2 : seen >= total ? 3 : 130;
                  }
                  return 3;
              }),
              130);
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
}

TEST(SpliceRun, WriteFailureLeavesNothing) {
    REQUIRE_FIXTURES();
    TempDir dir;
    auto s = splice_api(fixture("shards/tiny-deepseek2-IQ2_XXS-00001-of-00003.gguf"), drop_spec("drop-dead"),
                        dir.file("o"), {}, false);
    // A file size limit below the largest shard: writes past it fail with EFBIG, as a full disk fails
    // with ENOSPC, after some shards are complete.
    struct rlimit old {};
    ::getrlimit(RLIMIT_FSIZE, &old);
    auto* prev = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = old;
    lim.rlim_cur = 1000000;
    ::setrlimit(RLIMIT_FSIZE, &lim);
    for (bool prealloc : {true, false}) {
        CopyOptions co;
        co.preallocate = prealloc;
        const std::string msg =
            error_of<IoError>([&] { run_copy_jobs(s->opened->plan->jobs(), s->opened->plan->sources, co); });
        EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
        EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, prev);
}

TEST(SpliceRun, DeadTemporariesAreRemovedLiveOnesKept) {
    TempDir dir;
    // A pid that surely is gone: a child that has exited and been reaped.
    pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    int status = 0;
    ::waitpid(child, &status, 0);
    const std::string dead = dir.file(fmt::format(".o.gguf.gguf-reap-tmp.{}.0", child));
    const std::string live = dir.file(fmt::format(".o.gguf.gguf-reap-tmp.{}.0", ::getppid()));
    const std::string other = dir.file(fmt::format(".x.gguf.gguf-reap-tmp.{}.0", child));
    const std::string longer = dir.file(fmt::format(".o.gguf2.gguf-reap-tmp.{}.0", child));
    for (const auto& p : {dead, live, other, longer}) test::write_text(p, "partial");
    EXPECT_EQ(remove_dead_temporaries(dir.path().string(), "o.gguf"), std::vector<std::string>{dead});
    EXPECT_FALSE(std::filesystem::exists(dead));
    EXPECT_TRUE(std::filesystem::exists(live));
    EXPECT_TRUE(std::filesystem::exists(other)) << "another output's temporaries are not ours to judge";
    EXPECT_TRUE(std::filesystem::exists(longer));
}

}  // namespace
}  // namespace gguf_reap
