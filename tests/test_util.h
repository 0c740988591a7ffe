// Shared test helpers: temp dirs, the shared fixtures, running the CLI, building GGUF bytes by hand.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/options.h"
#include "gguf_reap/error.h"

namespace gguf_reap::test {

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
  public:
    TempDir();
    ~TempDir();
    const std::filesystem::path& path() const { return path_; }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

  private:
    std::filesystem::path path_;
};

// ../shared/fixtures, or "" when absent (tests then GTEST_SKIP()).
std::string fixtures_dir();
#define REQUIRE_FIXTURES()                                              \
    do {                                                                \
        if (::gguf_reap::test::fixtures_dir().empty())                  \
            GTEST_SKIP() << "../shared/fixtures not present; skipping"; \
    } while (0)
std::string fixture(const std::string& rel);  // fixtures_dir() + "/" + rel
const nlohmann::json& expected_json();        // parsed expected.json

// The architectures of tests/data/live-sample.txt: between them every value of every column of the
// architecture table (LiveSample.HoldsAnArchitectureOfEveryLoaderFamily).
std::vector<std::string> live_sample_archs();
// CI's sanitizer pass (GGUF_REAP_TEST_PASS=sanitizers, tools/setup.sh): a test that starts hundreds of
// instrumented processes runs over live_sample_archs() there, and over every architecture elsewhere.
bool sanitizer_pass();

struct RunResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};
// Runs a command line through /bin/sh, capturing stdout and stderr.
RunResult run_command(const std::string& command_line);
RunResult run_cli(const std::string& args);  // the gguf-reap binary with args
RunResult run_gen(const std::string& args);  // the fixture generator with args

std::vector<uint8_t> read_file(const std::string& path);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);
std::string sha256_hex(const uint8_t* data, size_t n);
std::string sha256_file_range(const std::string& path, uint64_t offset, uint64_t n);

// The error as the CLI prints it (after "gguf-reap: error: "): what(), with the request fields a
// library message names spelled as gguf-reap's options (cli/options.h).
inline std::string shown(const std::exception& e) {
    const auto* g = dynamic_cast<const Error*>(&e);
    return g && !g->message().empty() ? cli::option_message(g->message()) : std::string(e.what());
}

// What `f` throws as an E (any exception by default), as the CLI shows it (shown()); "(no error)" when it
// returns. An exception of another type is not caught: the test fails on it.
template <typename E = std::exception>
std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const E& e) {
        return shown(e);
    }
    return "(no error)";
}

// Runs fn in a forked child and returns its exit code (128 + N when signal N ended it). For what only
// a process can do to itself, such as taking a real SIGINT (the product has no test hooks).
int in_child(const std::function<int()>& fn);
// n bytes of a fixed pseudo-random sequence (mt19937 seeded with `seed`).
std::vector<uint8_t> random_bytes(size_t n, uint32_t seed);
// XORs the byte at `offset` of the file with 0x81 (one flipped byte, both nibbles).
void flip_byte(const std::string& path, uint64_t offset);
// How many entries a directory holds (to prove a failed run left nothing behind).
size_t count_entries(const std::filesystem::path& dir);

// Little-endian byte builder for hand-made (often malformed) GGUF files.
class Bytes {
  public:
    Bytes& raw(const void* p, size_t n);
    Bytes& str(const std::string& s);  // u64 length + bytes
    Bytes& u8(uint8_t v) { return raw(&v, 1); }
    Bytes& u16(uint16_t v) { return raw(&v, 2); }
    Bytes& u32(uint32_t v) { return raw(&v, 4); }
    Bytes& i32(int32_t v) { return raw(&v, 4); }
    Bytes& u64(uint64_t v) { return raw(&v, 8); }
    Bytes& i64(int64_t v) { return raw(&v, 8); }
    Bytes& f32(float v) { return raw(&v, 4); }
    Bytes& zeros(size_t n);
    Bytes& pad_to(size_t alignment);
    size_t size() const { return data_.size(); }
    std::vector<uint8_t>& data() { return data_; }

  private:
    std::vector<uint8_t> data_;
};

}  // namespace gguf_reap::test
