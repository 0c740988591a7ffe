// Shared by the generator's tests (gen_fixture_test.cpp, gen_imatrix_test.cpp): running gguf-reap-gen
// and reading back what it wrote.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "format/dequant.h"
#include "format/ggml_types.h"
#include "format/gguf.h"
#include "format/imatrix.h"
#include "model/moe_layout.h"
#include "model/shard_set.h"
#include "test_util.h"

namespace gguf_reap::gen_test {

using nlohmann::json;
using test::run_gen;
using test::TempDir;

inline json load_json(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
}

// Runs the generator and insists on success.
inline void gen(const std::string& args) {
    const auto r = run_gen(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\nstderr: " << r.err;
}

inline std::string sha256_of(const std::string& path) {
    const auto bytes = test::read_file(path);
    return test::sha256_hex(bytes.data(), bytes.size());
}

inline std::vector<uint8_t> tensor_bytes(const ShardSet& m, const std::string& name) {
    const TensorRef* r = m.find_tensor(name);
    EXPECT_NE(r, nullptr) << name;
    if (!r) return {};
    std::vector<uint8_t> b(r->nbytes);
    m.shards()[r->shard].file->read(r->abs_offset, b.data(), b.size());
    return b;
}

inline std::vector<float> as_floats(const std::vector<uint8_t>& b, int32_t type) {
    std::vector<float> v;
    if (type == 0) {
        v.resize(b.size() / 4);
        std::memcpy(v.data(), b.data(), b.size());
    } else {
        for (size_t i = 0; i + 1 < b.size(); i += 2) {
            const uint16_t h = static_cast<uint16_t>(b[i] | (b[i + 1] << 8));
            if (type == 1) {
                v.push_back(half_to_float(h));
            } else {  // bf16
                v.push_back(bf16_to_float(h));
            }
        }
    }
    return v;
}

}  // namespace gguf_reap::gen_test
