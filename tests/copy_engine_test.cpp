// The copy engine on its own: arbitrary segment lists written byte-exact by every method and thread
// count, malformed jobs refused, interrupts and failures leaving no file behind.
#include <gtest/gtest.h>

#include <csignal>

#include <sys/statfs.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/copy_engine.h"
#include "io/progress.h"
#include "io/signals.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::TempDir;

// A job of random segments over `sources`, and the bytes it must produce.
struct Expected {
    CopyJob job;
    std::vector<uint8_t> bytes;
};
Expected random_job(const std::string& path, const std::vector<std::vector<uint8_t>>& sources,
                    uint32_t seed) {
    std::mt19937 rng(seed);
    Expected e;
    e.job.path = path;
    for (int i = 0; i < 300; ++i) {
        const int kind = static_cast<int>(rng() % 4);
        if (kind == 0) {
            auto lit = test::random_bytes(1 + rng() % 5000, rng());
            e.bytes.insert(e.bytes.end(), lit.begin(), lit.end());
            e.job.append_literal(std::move(lit));
        } else if (kind == 1) {
            const uint64_t n = 1 + rng() % 40;
            e.bytes.resize(e.bytes.size() + n, 0);
            e.job.append_zeros(n);
        } else {
            const uint32_t src = rng() % sources.size();
            const uint64_t off = rng() % sources[src].size();
            // Mostly small extents (expert slabs), sometimes large ones (whole tensors).
            const uint64_t cap = kind == 2 ? 70000 : 1500000;
            const uint64_t n = 1 + rng() % std::min<uint64_t>(cap, sources[src].size() - off);
            e.bytes.insert(e.bytes.end(), sources[src].begin() + static_cast<ptrdiff_t>(off),
                           sources[src].begin() + static_cast<ptrdiff_t>(off + n));
            e.job.append_copy(src, off, n);
        }
    }
    return e;
}

TEST(CopyEngine, WritesExactBytesWithEveryMethodAndThreadCount) {
    TempDir dir;
    const std::vector<std::vector<uint8_t>> data = {test::random_bytes(3 << 20, 1),
                                                    test::random_bytes(1 << 20, 2)};
    std::vector<std::shared_ptr<InputFile>> files;
    std::vector<const InputFile*> sources;
    for (size_t i = 0; i < data.size(); ++i) {
        test::write_file(dir.file("src" + std::to_string(i)), data[i]);
        files.push_back(InputFile::open(dir.file("src" + std::to_string(i))));
        sources.push_back(files.back().get());
    }
    std::filesystem::create_directory(dir.path() / "out");
    int run = 0;
    for (CopyMethod m : {CopyMethod::kAuto, CopyMethod::kKernel, CopyMethod::kReadWrite}) {
        // One thread writing whole files, and three threads writing odd-sized pieces of them.
        for (auto [threads, item] : {std::pair<unsigned, uint64_t>{1, 0}, {3, 4099}}) {
            SCOPED_TRACE(fmt::format("{} threads {} item {}", copy_method_name(m), threads, item));
            ++run;
            Expected a = random_job(dir.file(fmt::format("out/a{}", run)), data, 10 + run);
            Expected b = random_job(dir.file(fmt::format("out/b{}", run)), data, 100 + run);
            CopyOptions o;
            o.method = m;
            o.threads = threads;
            o.work_item_bytes = item;
            o.buffer_bytes = 64 << 10;  // many batches in flight
            std::atomic<uint64_t> progress{0};
            o.on_progress = [&](uint64_t n) { progress += n; };
            CopyReport r = run_copy_jobs({&a.job, &b.job}, sources, o);
            EXPECT_TRUE(test::read_file(a.job.path) == a.bytes);
            EXPECT_TRUE(test::read_file(b.job.path) == b.bytes);
            EXPECT_EQ(r.bytes_written(), a.bytes.size() + b.bytes.size());
            EXPECT_EQ(progress.load(), r.bytes_written());
            if (m == CopyMethod::kReadWrite) {
                EXPECT_EQ(r.kernel_bytes, 0u);
            }
            if (m == CopyMethod::kKernel) {
                EXPECT_EQ(r.buffered_bytes, 0u);
            }
            if (m == CopyMethod::kAuto && item == 0) {  // extents of 1 B .. 1.5 MB: both paths
                EXPECT_GT(r.kernel_bytes, 0u);
                EXPECT_GT(r.buffered_bytes, 0u);
            }
        }
    }
    EXPECT_EQ(test::count_entries(dir.path() / "out"), static_cast<size_t>(2 * run)) << "no temporaries left";
}

// Early writeback (CopyOptions::early_writeback): every finished writeback_bytes of an output is handed to
// the writeback thread, which starts it (sync_file_range). Splice's 256 MiB is lowered here so a test-sized
// output crosses it many times; nothing is started when the copy is not durable or the option is off.
TEST(CopyEngine, EarlyWritebackStartsEachFinishedStretch) {
    TempDir dir;
    const auto data = test::random_bytes(3 << 20, 7);
    test::write_file(dir.file("src"), data);
    const auto file = InputFile::open(dir.file("src"));
    std::filesystem::create_directory(dir.path() / "out");
    int run = 0;
    auto copy = [&](const CopyOptions& o) {
        CopyJob j;
        j.path = dir.file(fmt::format("out/w{}", ++run));
        for (int i = 0; i < 4; ++i) j.append_copy(0, 0, data.size());  // 12 MiB
        CopyReport r = run_copy_jobs({&j}, {file.get()}, o);
        EXPECT_EQ(test::read_file(j.path).size(), j.size);
        return r;
    };
    for (CopyMethod m : {CopyMethod::kKernel, CopyMethod::kReadWrite}) {
        SCOPED_TRACE(copy_method_name(m));
        CopyOptions o;
        o.method = m;
        o.writeback_bytes = 1 << 20;
        const CopyReport r = copy(o);
        // 12 MiB in stretches of at least 1 MiB, each started once: at least 3 (each of the four 3 MiB
        // copies ends one), at most 12, covering no byte twice and nothing past the end.
        EXPECT_GE(r.writeback_ranges, 3u);
        EXPECT_LE(r.writeback_ranges, 12u);
        EXPECT_GE(r.writeback_bytes, r.writeback_ranges << 20);
        EXPECT_LE(r.writeback_bytes, uint64_t{12} << 20);
        CopyOptions big = o;
        big.writeback_bytes = uint64_t{256} << 20;  // splice's: never reached by 12 MiB
        EXPECT_EQ(copy(big).writeback_ranges, 0u);
        CopyOptions off = o;
        off.early_writeback = false;
        EXPECT_EQ(copy(off).writeback_ranges, 0u);
        CopyOptions not_durable = o;
        not_durable.durable = false;
        EXPECT_EQ(copy(not_durable).writeback_ranges, 0u);
    }
}

TEST(CopyEngine, AdjacentCopiesMergeIntoOneExtent) {
    CopyJob j;
    j.append_copy(0, 100, 10);
    j.append_copy(0, 110, 10);  // continues: merged
    j.append_copy(1, 120, 10);  // other source
    j.append_copy(1, 140, 10);  // gap in the source
    j.append_zeros(3);
    j.append_zeros(2);          // merged
    j.append_copy(1, 150, 10);  // continues the source range but not the file: not merged
    ASSERT_EQ(j.segments.size(), 5u);
    EXPECT_EQ(j.segments[0].length, 20u);
    EXPECT_EQ(j.segments[3].src, kSegmentZeros);
    EXPECT_EQ(j.segments[3].length, 5u);
    EXPECT_EQ(j.segments[4].dst_offset, 45u);
    EXPECT_EQ(j.size, 55u);
}

TEST(CopyEngine, MalformedJobIsRefusedBeforeAnyFileExists) {
    TempDir dir;
    test::write_file(dir.file("src"), test::random_bytes(100, 3));
    auto f = InputFile::open(dir.file("src"));
    CopyJob past_end;
    past_end.path = dir.file("o1");
    past_end.append_copy(0, 90, 20);
    CopyJob bad_size;
    bad_size.path = dir.file("o2");
    bad_size.append_copy(0, 0, 10);
    bad_size.size = 11;
    CopyJob no_source;
    no_source.path = dir.file("o3");
    no_source.append_copy(1, 0, 10);
    for (const CopyJob* j : {&past_end, &bad_size, &no_source}) {
        EXPECT_THROW(run_copy_jobs({j}, {f.get()}, {}), std::logic_error) << j->path;
    }
    try {
        check_copy_jobs({&past_end}, {f.get()});
    } catch (const std::logic_error& e) {
        EXPECT_EQ(std::string(e.what()), "copy plan for " + dir.file("o1") +
                                             ": segment at 0: reads past the end of " + dir.file("src"));
    }
    EXPECT_EQ(test::count_entries(dir.path()), 1u);
}

TEST(CopyEngine, InterruptLeavesNoFile) {
    TempDir dir;
    test::write_file(dir.file("src"), test::random_bytes(1 << 20, 4));
    auto f = InputFile::open(dir.file("src"));
    CopyJob j;
    j.path = dir.file("out");
    j.append_copy(0, 0, 1 << 20);
    // A real SIGINT, taken by the real handler, in a child process.
    EXPECT_EQ(test::in_child([&] {
                  install_signal_handlers();
                  ::raise(SIGINT);
                  try {
                      run_copy_jobs({&j}, {f.get()}, {});
                  } catch (const Interrupted&) {
                      return 130;
                  }
                  return 1;
              }),
              130);
    EXPECT_EQ(test::count_entries(dir.path()), 1u);
}

TEST(CopyEngine, CrossFilesystemFallsBackToReadWrite) {
    struct statfs a {
    }, b{};
    if (::statfs("/dev/shm", &a) != 0 || ::statfs(std::filesystem::temp_directory_path().c_str(), &b) != 0 ||
        a.f_type == b.f_type)
        GTEST_SKIP() << "needs /dev/shm on a filesystem of another type than the temp dir";
    TempDir dir;
    const std::string src = fmt::format("/dev/shm/gguf-reap-test-{}", ::getpid());
    const auto bytes =
        test::random_bytes(3 << 20, 5) /* above kernel_min_bytes: auto tries the kernel first */;
    test::write_file(src, bytes);
    auto f = InputFile::open(src);
    CopyJob j;
    j.path = dir.file("out");
    j.append_copy(0, 0, bytes.size());
    CopyOptions o;
    CopyReport r = run_copy_jobs({&j}, {f.get()}, o);
    EXPECT_TRUE(test::read_file(j.path) == bytes);
    EXPECT_EQ(r.buffered_bytes, bytes.size());
    EXPECT_EQ(r.kernel_bytes, 0u);
    // Forcing the kernel path across filesystems is an I/O error, and leaves nothing.
    std::filesystem::remove(j.path);
    o.method = CopyMethod::kKernel;
    try {
        run_copy_jobs({&j}, {f.get()}, o);
        ADD_FAILURE() << "copy_file_range across filesystems succeeded";
    } catch (const IoError& e) {
        EXPECT_EQ(std::string(e.what()),
                  j.path + ": copy_file_range from " + src + ": Invalid cross-device link");
    }
    EXPECT_EQ(test::count_entries(dir.path()), 0u);
    std::filesystem::remove(src);
}

TEST(Progress, LineShowsBytesRateAndEta) {
    EXPECT_EQ(format_progress_line("splice", 1ull << 30, 4ull << 30, 2.0),
              "splice [#####               ]  25%  1.0 GiB / 4.0 GiB  512.0 MiB/s  ETA 0:06");
    EXPECT_EQ(format_progress_line("splice", 0, 100, 0.0),
              "splice [                    ]   0%  0 B / 100 B  0 B/s  ETA --:--");
    EXPECT_EQ(format_progress_line("x", 7200ull << 20, 7200ull << 20, 3600.0),
              "x [####################] 100%  7.0 GiB / 7.0 GiB  2.0 MiB/s  ETA 0:00");
}

TEST(Progress, DrawsOnlyWhenEnabledAndErasesItsLine) {
    TempDir dir;
    for (bool enabled : {false, true}) {
        std::FILE* f = std::fopen(dir.file("err").c_str(), "w+");
        {
            Progress p("splice", 1000, enabled, f);
            p.add(500);
            if (enabled) std::this_thread::sleep_for(std::chrono::milliseconds(450));
            p.finish();
        }
        std::fclose(f);
        const auto bytes = test::read_file(dir.file("err"));
        const std::string text(bytes.begin(), bytes.end());
        if (!enabled) {
            EXPECT_EQ(text, "");
        } else {
            EXPECT_EQ(text.rfind("\r\033[K"), text.size() - 4) << "ends by erasing the line";
            EXPECT_NE(text.find("\rsplice [##########          ]  50%  500 B / 1000 B"), std::string::npos)
                << text;
        }
    }
}

}  // namespace
}  // namespace gguf_reap
