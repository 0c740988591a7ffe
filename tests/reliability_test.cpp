// Reliability pieces on their own: the copy engine gives the same bytes whatever the thread count and
// work-item size, a source that changes before the rename is refused, the output lock excludes a second
// writer, and InputFile notices each kind of change (docs/reliability.md).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "io/copy_engine.h"
#include "io/input_file.h"
#include "io/output_lock.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

using test::error_of;
using test::TempDir;

// Sets a file's mtime far in the past, so that a change made in the same clock tick still shows.
void age(const std::string& path) {
    const timespec times[2] = {{1577836800, 0}, {1577836800, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(Threads, CopyEngineBytesIdenticalForEveryThreadCountAndWorkItemSize) {
    TempDir dir;
    const auto src = test::random_bytes(1 << 20, 7);
    test::write_file(dir.file("src"), src);
    auto file = InputFile::open(dir.file("src"));
    std::filesystem::create_directory(dir.path() / "out");

    // Three files of header bytes, gathered slabs (some merged into long runs), padding and a big extent.
    std::mt19937 rng(11);
    std::vector<CopyJob> jobs(3);
    std::vector<std::vector<uint8_t>> want(3);
    for (size_t j = 0; j < jobs.size(); ++j) {
        CopyJob& job = jobs[j];
        auto header = test::random_bytes(1000 + 37 * j, static_cast<uint32_t>(j));
        want[j] = header;
        job.append_literal(header);
        for (int i = 0; i < 100; ++i) {
            const uint64_t off = rng() % (src.size() - 70000);
            const uint64_t n = 1 + rng() % (i % 50 == 0 ? 65000 : 9000);
            job.append_copy(0, off, n);
            want[j].insert(want[j].end(), src.begin() + static_cast<long>(off),
                           src.begin() + static_cast<long>(off + n));
            const uint64_t pad = rng() % 32;
            job.append_zeros(pad);
            want[j].resize(want[j].size() + pad, 0);
        }
        job.append_copy(0, 4096, 600 << 10);
        want[j].insert(want[j].end(), src.begin() + 4096, src.begin() + 4096 + (600 << 10));
    }
    int run = 0;
    // Each run ends in fsyncs, so the pairs are chosen rather than crossed: every thread count, whole
    // files and items of 515 B (smaller than most extents), 4099 B and 256 KiB.
    const std::pair<unsigned, uint64_t> runs[] = {{1, 0},    {1, 515}, {2, 0},    {2, 4099},       {3, 515},
                                                  {7, 4099}, {7, 0},   {64, 515}, {64, 256 << 10}, {64, 0}};
    for (CopyMethod m : {CopyMethod::kAuto, CopyMethod::kReadWrite}) {
        for (auto [threads, item] : runs) {
            {
                SCOPED_TRACE(fmt::format("{} threads {} item {}", copy_method_name(m), threads, item));
                std::vector<const CopyJob*> ptrs;
                for (size_t j = 0; j < jobs.size(); ++j) {
                    jobs[j].path = dir.file(fmt::format("out/{}-{}", run, j));
                    ptrs.push_back(&jobs[j]);
                }
                ++run;
                CopyOptions o;
                o.method = m;
                o.threads = threads;
                o.work_item_bytes = item;
                run_copy_jobs(ptrs, {file.get()}, o);
                for (size_t j = 0; j < jobs.size(); ++j)
                    EXPECT_TRUE(test::read_file(jobs[j].path) == want[j]);
            }
        }
    }
    EXPECT_EQ(test::count_entries(dir.path() / "out"), static_cast<size_t>(3 * run)) << "no temporaries left";
}

TEST(SourceChange, CopyEngineRefusesToRenameFromASourceThatChanged) {
    TempDir dir;
    test::write_file(dir.file("src"), test::random_bytes(100000, 3));
    age(dir.file("src"));
    auto file = InputFile::open(dir.file("src"));
    std::filesystem::create_directory(dir.path() / "out");
    CopyJob job;
    job.path = dir.file("out/o.gguf");
    job.append_copy(0, 0, 50000);
    // Rewritten in place after open, same size: the bytes read may be old or new.
    test::write_file(dir.file("src"), test::random_bytes(100000, 4));
    EXPECT_EQ(error_of<Error>([&] { run_copy_jobs({&job}, {file.get()}, CopyOptions{}); }),
              dir.file("src") +
                  ": changed while gguf-reap was reading it (it was modified); nothing made from it is kept: "
                  "run again once the file is stable");
    EXPECT_EQ(test::count_entries(dir.path() / "out"), 0u) << "neither the output nor its temporary";
}

TEST(SourceChange, InputFileNamesEachKindOfChange) {
    TempDir dir;
    const std::string p = dir.file("f");
    auto fresh = [&] {
        test::write_file(p, test::random_bytes(4096, 1));
        age(p);
        return InputFile::open(p);
    };
    {
        auto f = fresh();
        EXPECT_NO_THROW(f->check_unchanged());
        ASSERT_EQ(::truncate(p.c_str(), 1000), 0);
        EXPECT_EQ(
            error_of<Error>([&] { f->check_unchanged(); }),
            p + ": changed while gguf-reap was reading it (its size went from 4096 to 1000 bytes); nothing "
                "made from it is kept: run again once the file is stable");
    }
    {
        auto f = fresh();
        const timespec times[2] = {{0, UTIME_OMIT}, {1577836800, 0}};  // mtime restored: ctime still moves
        ASSERT_EQ(::chmod(p.c_str(), 0600), 0);
        ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, 0), 0);
        EXPECT_NE(error_of<Error>([&] { f->check_unchanged(); }).find("(it was modified)"),
                  std::string::npos);
    }
    {
        auto f = fresh();
        test::write_file(dir.file("g"), test::random_bytes(4096, 1));
        std::filesystem::rename(dir.file("g"), p);
        EXPECT_NE(
            error_of<Error>([&] { f->check_unchanged(); }).find("(its name now points to another file)"),
            std::string::npos);
    }
}

TEST(OutputLockTest, SecondWriterIsRefusedUntilTheFirstLetsGo) {
    TempDir dir;
    const std::string prefix = dir.file("o");
    EXPECT_EQ(OutputLock::lock_path(prefix), dir.file(".o.gguf-reap.lock"));
    EXPECT_EQ(OutputLock::lock_path(prefix + ".gguf"), dir.file(".o.gguf-reap.lock"));
    EXPECT_EQ(OutputLock::lock_path("o"), "./.o.gguf-reap.lock");
    {
        OutputLock first(prefix);
        EXPECT_TRUE(std::filesystem::exists(first.path()));
        // flock belongs to the open file, so a second open in this process conflicts like another process.
        EXPECT_EQ(error_of<Error>([&] { OutputLock second(prefix + ".gguf"); }),
                  fmt::format("{}.gguf: another gguf-reap process (pid {}) is writing to this output prefix "
                              "(lock {}); wait for it to finish or choose another prefix",
                              prefix, ::getpid(), first.path()));
        OutputLock other(dir.file("p"));  // another prefix is independent
    }
    EXPECT_FALSE(std::filesystem::exists(dir.file(".o.gguf-reap.lock"))) << "removed when let go";
    OutputLock again(prefix);
    EXPECT_EQ(
        error_of<Error>([&] { OutputLock missing(dir.file("no/such/dir/o")); }),
        dir.file("no/such/dir") +
            ": output directory: cannot create the lock file .o.gguf-reap.lock: No such file or directory");
}

// Found by the fuzz_imatrix smoke run (corpus seed regress-empty-read-null-dst.gguf): an imatrix entry
// with no counts read zero bytes into an empty vector, whose data() is null, and the then mapped path
// passed that null to memcpy (undefined behaviour; the sanitizer build aborts on it).
TEST(InputFileRead, ZeroBytesIntoNoBufferIsANoOp) {
    TempDir dir;
    test::write_file(dir.file("f"), std::vector<uint8_t>(64, 7));
    const auto f = InputFile::open(dir.file("f"));
    std::vector<float> none;
    f->read(0, none.data(), 0);
    f->read(64, none.data(), 0);  // at the very end: still inside
    EXPECT_THROW(f->read(65, none.data(), 0), IoError) << "past the end is still an error";
}

// A file that shrinks after it was opened (llama-imatrix rewrites its output every --output-frequency
// chunks) gives an error naming it, never SIGBUS: input files are read, not mapped.
TEST(InputFileRead, FileThatShrankAfterOpenIsAnErrorNotACrash) {
    TempDir dir;
    test::write_file(dir.file("f"), std::vector<uint8_t>(1 << 20, 7));
    const auto f = InputFile::open(dir.file("f"));
    std::filesystem::resize_file(dir.file("f"), 1000);
    std::vector<uint8_t> buf(4096);
    f->read(0, buf.data(), 1000);  // still there
    try {
        f->read(500000, buf.data(), buf.size());
        ADD_FAILURE() << "no error";
    } catch (const IoError& e) {
        EXPECT_EQ(std::string(e.what()), dir.file("f") + ": unexpected end of file (was it truncated?)");
    }
}

}  // namespace
}  // namespace gguf_reap
