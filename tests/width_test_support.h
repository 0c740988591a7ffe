// Shared by the width-splice tests (splice_width_test.cpp, splice_width_blocks_test.cpp): hand-made
// plans, the MoE blocks of a model, a tensor's bytes read back.
#pragma once

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "format/npz.h"
#include "model/shard_set.h"

namespace gguf_reap::test {

inline bool has(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// A plan: per MoE block (ascending) and expert, k distinct channels below n_ff, written in random (rank)
// order; `sorted` holds each row ascending, the order of the output columns.
struct Plan {
    std::string path;
    int64_t k = 0;
    std::map<std::pair<int, int64_t>, std::vector<int64_t>> sorted;  // (block, expert) → ascending
};

// With `group` > 1 the rows are k / group random aligned groups [g·group, (g+1)·group): whole quant
// blocks, as `plan-width --granularity block` keeps them.
inline Plan make_plan(const std::string& path, const std::vector<int>& blocks, int64_t experts, int64_t n_ff,
                      int64_t k, uint32_t seed, int64_t group = 1) {
    std::mt19937 rng(seed);
    Plan p{path, k, {}};
    std::vector<uint16_t> channels;
    for (int b : blocks)
        for (int64_t e = 0; e < experts; ++e) {
            std::vector<int64_t> groups(static_cast<size_t>(n_ff / group));
            std::iota(groups.begin(), groups.end(), 0);
            std::shuffle(groups.begin(), groups.end(), rng);
            groups.resize(static_cast<size_t>(k / group));
            std::vector<int64_t> row;
            for (int64_t g : groups)
                for (int64_t c = 0; c < group; ++c) row.push_back(g * group + c);
            if (group > 1) std::shuffle(row.begin(), row.end(), rng);  // the rank order
            for (int64_t c : row) channels.push_back(static_cast<uint16_t>(c));
            std::sort(row.begin(), row.end());
            p.sorted[{b, e}] = row;
        }
    const auto pairs = static_cast<int64_t>(blocks.size()) * experts;
    write_npz(path, {{"channels", NpyArray::u16({pairs, k}, channels)}, {"k", NpyArray::i64({1}, {k})}});
    return p;
}

inline std::vector<int> moe_blocks(const ShardSet& m) {
    std::set<int> b;
    for (const TensorRef& r : m.tensors()) {
        const std::string& n = m.info(r).name;
        if (has(n, ".ffn_down_exps.weight")) b.insert(std::stoi(n.substr(4)));
    }
    return {b.begin(), b.end()};
}

inline std::vector<uint8_t> tensor_bytes(const ShardSet& m, const TensorRef& r) {
    std::vector<uint8_t> v(r.nbytes);
    m.shards()[r.shard].file->read(r.abs_offset, v.data(), v.size());
    return v;
}

}  // namespace gguf_reap::test
