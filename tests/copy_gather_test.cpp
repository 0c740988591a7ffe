// The copy engine's gather segments: selected elements of every row of a source range, written
// byte-exact whatever the thread count, work-item cut, buffer size (rows shorter and longer than the
// buffer) and method, and malformed gathers refused before any file exists.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "io/copy_engine.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::TempDir;

// `k` distinct ascending ids below `n`.
std::vector<uint32_t> random_index(uint32_t n, uint32_t k, std::mt19937& rng) {
    std::vector<uint32_t> all(n);
    for (uint32_t i = 0; i < n; ++i) all[i] = i;
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(k);
    std::sort(all.begin(), all.end());
    return all;
}

struct Expected {
    CopyJob job;
    std::vector<uint8_t> bytes;
};

// Literals, zeros and gathers of rows of `elems` elements of `elem` bytes, the expected bytes computed
// element by element.
Expected gather_job(const std::string& path, const std::vector<uint8_t>& src, uint32_t elem, uint32_t elems,
                    uint32_t seed) {
    std::mt19937 rng(seed);
    Expected e;
    e.job.path = path;
    const uint64_t row_bytes = uint64_t{elem} * elems;
    auto shared = std::make_shared<const std::vector<uint32_t>>(random_index(elems, elems / 3 + 1, rng));
    for (int i = 0; i < 12; ++i) {
        auto lit = test::random_bytes(1 + rng() % 300, rng());
        e.bytes.insert(e.bytes.end(), lit.begin(), lit.end());
        e.job.append_literal(std::move(lit));
        const uint64_t rows = 1 + rng() % 40;
        const uint64_t off = rng() % (src.size() - rows * row_bytes);
        // Every other gather shares one index list; the rest have their own (1 .. all elements).
        auto index = i % 2 ? shared
                           : std::make_shared<const std::vector<uint32_t>>(
                                 random_index(elems, 1 + static_cast<uint32_t>(rng() % elems), rng));
        for (uint64_t r = 0; r < rows; ++r)
            for (uint32_t c : *index)
                for (uint32_t b = 0; b < elem; ++b)
                    e.bytes.push_back(src[off + r * row_bytes + c * elem + b]);
        e.job.append_gather(0, off, rows, {row_bytes, elem, index});
        e.bytes.resize(e.bytes.size() + 7, 0);
        e.job.append_zeros(7);
    }
    return e;
}

TEST(CopyGather, SelectsElementsOfEveryRowByteExact) {
    TempDir dir;
    const auto data = test::random_bytes(6 << 20, 11);
    test::write_file(dir.file("src"), data);
    auto f = InputFile::open(dir.file("src"));
    int run = 0;
    // Row lengths from 3 bytes to 120 KiB: below and above the 64 KiB buffer used here.
    for (auto [elem, elems] : {std::pair<uint32_t, uint32_t>{1, 3}, {2, 3072}, {4, 700}, {2, 61440}}) {
        for (auto [threads, item] : {std::pair<unsigned, uint64_t>{1, 0}, {3, 4099}}) {
            // Gathers ignore the method (always the buffer); both are run once each.
            for (CopyMethod m : {threads == 1 ? CopyMethod::kAuto : CopyMethod::kReadWrite}) {
                SCOPED_TRACE(fmt::format("elem {} × {} threads {} item {} {}", elem, elems, threads, item,
                                         copy_method_name(m)));
                ++run;
                Expected a = gather_job(dir.file(fmt::format("a{}", run)), data, elem, elems, 100 + run);
                Expected b = gather_job(dir.file(fmt::format("b{}", run)), data, elem, elems, 200 + run);
                CopyOptions o;
                o.threads = threads;
                o.work_item_bytes = item;
                o.method = m;
                o.buffer_bytes = 64 << 10;
                std::atomic<uint64_t> progress{0};
                o.on_progress = [&](uint64_t n) { progress += n; };
                const CopyReport r = run_copy_jobs({&a.job, &b.job}, {f.get()}, o);
                EXPECT_TRUE(test::read_file(a.job.path) == a.bytes);
                EXPECT_TRUE(test::read_file(b.job.path) == b.bytes);
                EXPECT_EQ(r.bytes_written(), a.bytes.size() + b.bytes.size());
                EXPECT_EQ(progress.load(), r.bytes_written());
                EXPECT_GT(r.gathered_bytes, 0u);
                EXPECT_EQ(r.kernel_bytes + r.buffered_bytes, 0u) << "gathers never count as extents";
            }
        }
    }
}

TEST(CopyGather, AppendSizesTheSegment) {
    CopyJob j;
    j.append_literal({1, 2, 3});
    auto idx = std::make_shared<const std::vector<uint32_t>>(std::vector<uint32_t>{0, 5, 6});
    j.append_gather(0, 1000, 4, {16, 2, idx});
    ASSERT_EQ(j.segments.size(), 2u);
    EXPECT_EQ(j.segments[1].dst_offset, 3u);
    EXPECT_EQ(j.segments[1].length, 4u * 3 * 2);
    EXPECT_EQ(j.segments[1].gather, 0u);
    EXPECT_EQ(j.segments[0].gather, kNoGather);
    EXPECT_EQ(j.size, 27u);
}

TEST(CopyGather, MalformedGatherIsRefusedBeforeAnyFileExists) {
    TempDir dir;
    test::write_file(dir.file("src"), test::random_bytes(1000, 3));
    auto f = InputFile::open(dir.file("src"));
    auto idx = [](std::vector<uint32_t> v) { return std::make_shared<const std::vector<uint32_t>>(v); };
    struct Case {
        uint64_t off, rows, row_bytes;
        std::vector<uint32_t> index;
        std::string what;
    };
    const std::vector<Case> cases = {
        {0, 2, 16, {3, 1}, "gather indices are not ascending"},
        {0, 2, 16, {1, 1}, "gather indices are not ascending"},
        {0, 2, 16, {8}, "gather index past the end of its row"},
        {0, 2, 15, {1}, "gather has no elements, or rows that are not whole elements"},
        {900, 7, 16, {0, 7}, "reads past the end of " + dir.file("src")},
    };
    for (const Case& c : cases) {
        CopyJob j;
        j.path = dir.file("out");
        j.append_gather(0, c.off, c.rows, {c.row_bytes, 2, idx(c.index)});
        try {
            check_copy_jobs({&j}, {f.get()});
            ADD_FAILURE() << c.what;
        } catch (const std::logic_error& e) {
            EXPECT_EQ(std::string(e.what()), "copy plan for " + j.path + ": segment at 0: " + c.what);
        }
        EXPECT_THROW(run_copy_jobs({&j}, {f.get()}, {}), std::logic_error);
    }
    // A gather whose length is not whole output rows.
    CopyJob j;
    j.path = dir.file("out");
    j.append_gather(0, 0, 2, {16, 2, idx({0, 1})});
    j.segments[0].length -= 1;
    j.size -= 1;
    EXPECT_THROW(check_copy_jobs({&j}, {f.get()}), std::logic_error);
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

}  // namespace
}  // namespace gguf_reap
