// plan-width: choose, for every (MoE block, expert) pair, the K FFN channels a width splice keeps.
//
// The score of channel c of expert e in block b is the ffn_down_exps in_sum2 value [e][c] (the energy
// Σ h_c² of the expert's intermediate activation over the tokens routed to it) summed over the domains
// as a raw float32 sum, accumulated in the order the domains were given (docs/method.md). Channels are
// ranked by score descending, ties by channel id ascending; the top K are kept. The plan is an .npz
// (docs/formats.md: channels [pairs, K] uint16 in rank order, k, block, expert, energy_retained) with
// a JSON receipt beside it.
//
// With --granularity block (docs/plan-width.md, "Block granularity") the unit kept is an aligned group
// of B channels [g·B, (g+1)·B), B the lcm of the quant block sizes of the tensors whose rows lose
// channels (ffn_down_exps): groups ranked by their summed score (in double, channel order) descending,
// ties by group index ascending, the best K/B kept. Such a plan keeps whole quant blocks of every down
// row, which splice can cut byte-exactly in any type. Its channels are stored ascending.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/events.h"
#include "gguf_reap/rank.h"

namespace gguf_reap {

enum class Granularity : uint8_t { kChannel, kBlock };

struct PlanWidthRequest {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kImatrix{"imatrix"}, kOut{"out"}, kReceipt{"receipt"}, kModel{"model"},
        kGranularity{"granularity"}, kForce{"force"};
    std::vector<DomainSpec> imatrices;  // --imatrix NAME=FILE, in order (the order of the float32 sum)
    int64_t k = 0;                      // --k
    std::string out;                    // -o plan.npz
    std::string receipt;                // --receipt; "" = beside the plan (plan.npz → plan.json)
    std::string model;                  // --model; "" = none (only 1 <= K <= width is checked)
    Granularity granularity = Granularity::kChannel;  // --granularity (block needs --model)
    bool force = false;                               // overwrite existing outputs
    std::string tool_version;                         // recorded in the receipt
};

// The channels of one expert ranked by `score` (n values) descending, ties by channel id ascending;
// the first k ids. Pure: the ranking rule, testable on its own.
std::vector<int32_t> top_channels(const float* score, int64_t n, int64_t k);
// The channels of the best k / group aligned groups of `group` channels (n and k multiples of group),
// groups ranked by their summed score descending, ties by group index ascending; ascending ids.
std::vector<int32_t> top_channel_groups(const float* score, int64_t n, int64_t k, int64_t group);

struct PlanWidthResult {
    int64_t k = 0;
    int64_t native_width = 0;
    int64_t expert_count = 0;
    std::vector<int> blocks;               // MoE blocks, ascending; pairs are block-major, experts 0..E-1
    int64_t group = 1;                     // channels per kept unit: 1, or B with --granularity block
    std::vector<uint16_t> channels;        // [pairs][k], rank order (block granularity: ascending)
    std::vector<double> retained;          // [pairs]: kept share of the expert's summed energy; NaN = none
    std::vector<double> retained_channel;  // block granularity: what the per-channel plan would keep
    std::vector<uint8_t> unrouted;         // [pairs]: no energy in any domain (channels 0..k-1 kept)
    std::string plan_path, receipt_path;
    nlohmann::ordered_json receipt;  // what was written to receipt_path
    std::vector<std::string> notes;  // what was derived or skipped, and why
    // The plan is made but it or its receipt could not be written (a full disk): the caller prints the
    // results, then rethrows this (exit 3).
    std::exception_ptr write_error;
};

namespace ops {
// One `gguf-reap plan-width`: reads every input, ranks, writes the plan and its receipt (each under a
// temporary name, then renamed; the receipt last), and reports the notes (info). Throws UsageError (bad
// K, inputs that do not fit together, outputs that exist without force), InputError (bad files),
// IoError, Interrupted.
PlanWidthResult plan_width(const PlanWidthRequest& opts, const Events& events = {});
}  // namespace ops

// "plan.npz" → "plan.json"; other names get ".json" appended.
std::string default_receipt_path(const std::string& plan_path);

}  // namespace gguf_reap
