// Hand-built, valid GGUF files for the GGUF, shard-set, MoE-layout and inspect tests: the library's own
// writer (serialize_header + assign_offsets) plus data bytes, with the byte offsets of every kv and
// tensor info recorded so that tests can assert the exact offset an error names. Tests that need a
// malformed file patch these bytes or build them with test::Bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/ggml_types.h"
#include "format/gguf.h"
#include "test_util.h"

namespace gguf_reap::test {

inline constexpr int32_t kF32 = kGgmlF32;
inline constexpr int32_t kF16 = kGgmlF16;
inline constexpr int32_t kQ8_0 = kGgmlQ8_0;
inline constexpr int32_t kQ4_K = kGgmlQ4_K;
inline constexpr int32_t kI32 = kGgmlI32;

struct TensorSpec {
    std::string name;
    std::vector<int64_t> ne;
    int32_t type = kF32;
};

struct BuiltGguf {
    std::vector<uint8_t> bytes;
    std::vector<uint64_t> kv_offsets;    // where each kv (its key length) starts
    std::vector<uint64_t> info_offsets;  // where each tensor info (its name length) starts
    std::vector<TensorInfo> tensors;     // offsets and nbytes as written
    uint64_t infos_end = 0;
    uint64_t data_start = 0;
};

inline uint64_t encoded_kv_size(const Kv& kv) {
    return 8 + kv.key.size() + 4 + kv.raw.size();
}

inline uint64_t encoded_info_size(const TensorInfo& t) {
    return 8 + t.name.size() + 4 + 8ull * t.n_dims + 4 + 8;
}

inline TensorInfo tensor_info(const TensorSpec& s) {
    TensorInfo t;
    t.name = s.name;
    t.type = s.type;
    t.n_dims = static_cast<uint32_t>(s.ne.size());
    for (size_t d = 0; d < s.ne.size(); ++d) t.ne[d] = s.ne[d];
    uint64_t n = ggml_row_size(s.type, t.ne[0]).value();
    for (int d = 1; d < 4; ++d) n *= static_cast<uint64_t>(t.ne[d]);
    t.nbytes = n;
    return t;
}

// A valid GGUF v3 file. Tensor i's data bytes are all (i + 1) & 0xff, padding is zero.
inline BuiltGguf build_gguf(const std::vector<Kv>& kvs, const std::vector<TensorSpec>& specs,
                            uint32_t alignment = kGgufDefaultAlignment) {
    BuiltGguf g;
    for (const auto& s : specs) g.tensors.push_back(tensor_info(s));
    const uint64_t data_size = assign_offsets(g.tensors, alignment);
    g.bytes = serialize_header(3, kvs, g.tensors, alignment);
    uint64_t at = 24;
    for (const auto& kv : kvs) {
        g.kv_offsets.push_back(at);
        at += encoded_kv_size(kv);
    }
    for (const auto& t : g.tensors) {
        g.info_offsets.push_back(at);
        at += encoded_info_size(t);
    }
    g.infos_end = at;
    g.data_start = g.bytes.size();
    g.bytes.resize(g.data_start + data_size, 0);
    for (size_t i = 0; i < g.tensors.size(); ++i)
        std::fill_n(g.bytes.begin() + static_cast<std::ptrdiff_t>(g.data_start + g.tensors[i].offset),
                    g.tensors[i].nbytes, static_cast<uint8_t>((i + 1) & 0xff));
    return g;
}

inline BuiltGguf write_gguf(const std::string& path, const std::vector<Kv>& kvs,
                            const std::vector<TensorSpec>& specs,
                            uint32_t alignment = kGgufDefaultAlignment) {
    BuiltGguf g = build_gguf(kvs, specs, alignment);
    write_file(path, g.bytes);
    return g;
}

// The expert-indexed tensors of one deepseek2-style MoE block with E experts: router, selection bias,
// gate/up/down expert weights ([n_embd, n_ff, E] and [n_ff, n_embd, E]).
inline std::vector<TensorSpec> moe_block(int block, int64_t E, int64_t n_embd = 32, int64_t n_ff = 32,
                                         int32_t type = kQ8_0) {
    const std::string p = "blk." + std::to_string(block) + ".";
    return {
        {p + "ffn_gate_inp.weight", {n_embd, E}, kF32},
        {p + "exp_probs_b.bias", {E}, kF32},
        {p + "ffn_gate_exps.weight", {n_embd, n_ff, E}, type},
        {p + "ffn_up_exps.weight", {n_embd, n_ff, E}, type},
        {p + "ffn_down_exps.weight", {n_ff, n_embd, E}, type},
    };
}

}  // namespace gguf_reap::test
