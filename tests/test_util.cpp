#include "test_util.h"

#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>
#include <filesystem>

#include <array>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

namespace gguf_reap::test {

TempDir::TempDir() {
    std::random_device rd;
    for (int i = 0; i < 100; ++i) {
        auto p = std::filesystem::temp_directory_path() /
                 ("gguf-reap-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
        if (std::filesystem::create_directory(p)) {
            path_ = p;
            return;
        }
    }
    throw std::runtime_error("cannot create a temp dir");
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

std::string fixtures_dir() {
    const char* env = std::getenv("GGUF_REAP_SHARED");
    std::filesystem::path base = env ? env : GGUF_REAP_SHARED_DIR;
    auto f = base / "fixtures";
    if (std::filesystem::exists(f / "expected.json")) return f.string();
    return "";
}

std::vector<std::string> live_sample_archs() {
    std::ifstream in(std::string(GGUF_REAP_TEST_DATA) + "/live-sample.txt");
    std::vector<std::string> archs;
    std::string line;
    while (std::getline(in, line)) {
        const std::string word = line.substr(0, line.find_first_of(" \t#"));
        if (!word.empty()) archs.push_back(word);
    }
    return archs;
}

bool sanitizer_pass() {
    const char* pass = std::getenv("GGUF_REAP_TEST_PASS");
    return pass && std::string(pass) == "sanitizers";
}

std::string fixture(const std::string& rel) {
    return fixtures_dir() + "/" + rel;
}

const nlohmann::json& expected_json() {
    static nlohmann::json j = [] {
        std::ifstream in(fixture("expected.json"));
        return nlohmann::json::parse(in);
    }();
    return j;
}

RunResult run_command(const std::string& command_line) {
    TempDir d;
    const std::string out = d.file("out"), err = d.file("err");
    const std::string full = command_line + " >" + out + " 2>" + err + " </dev/null";
    int status = std::system(full.c_str());
    RunResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    auto slurp = [](const std::string& p) {
        std::ifstream in(p, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

RunResult run_cli(const std::string& args) {
    return run_command(std::string(GGUF_REAP_BIN) + " " + args);
}
RunResult run_gen(const std::string& args) {
    return run_command(std::string(GGUF_REAP_GEN) + " " + args);
}

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string sha256_hex(const uint8_t* data, size_t n) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    EVP_Digest(data, n, md.data(), &len, EVP_sha256(), nullptr);
    std::string hex;
    char buf[3];
    for (unsigned i = 0; i < len; ++i) {
        std::snprintf(buf, sizeof buf, "%02x", md[i]);
        hex += buf;
    }
    return hex;
}

std::string sha256_file_range(const std::string& path, uint64_t offset, uint64_t n) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    std::vector<uint8_t> buf(n);
    in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n));
    return sha256_hex(buf.data(), buf.size());
}

Bytes& Bytes::raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    data_.insert(data_.end(), b, b + n);
    return *this;
}
Bytes& Bytes::str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
}
Bytes& Bytes::zeros(size_t n) {
    data_.insert(data_.end(), n, 0);
    return *this;
}
Bytes& Bytes::pad_to(size_t alignment) {
    while (data_.size() % alignment) data_.push_back(0);
    return *this;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

void flip_byte(const std::string& path, uint64_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x81);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
}

size_t count_entries(const std::filesystem::path& dir) {
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir), {}));
}

int in_child(const std::function<int()>& fn) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        int code = 99;
        try {
            code = fn();
        } catch (...) {
            code = 98;
        }
        ::_exit(code);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace gguf_reap::test
