// Refusals shared by several architecture presets: the options a loader cannot honour, each refused
// with exit 2, naming the option and the reason.
#pragma once

#include <fmt/format.h>

#include "gen/model.h"
#include "gguf_reap/error.h"

namespace gguf_reap::gen {

inline bool given(const ModelSpec& s, const char* option) {
    return s.given.count(option) > 0;
}

// The options none of these loaders can honour, and the ones only some can.
struct Refuse {
    bool dense_blocks = false;  // no leading dense blocks
    bool shared = true;         // no shared experts
    bool nextn = true;
};
// (The optional expert tensors, router and expert biases, exp_probs_b and a fused gate_up, are refused
// centrally from the architecture table: tools/gen/model.cpp, refuse_untaken_tensors.)

inline void refuse(const ModelSpec& s, const char* arch, const Refuse& r) {
    if (s.experts == 0) throw UsageError(fmt::format("--experts 0: {}'s preset writes routed experts", arch));
    if (r.dense_blocks && given(s, "--dense-blocks") && s.dense_blocks > 0)
        throw UsageError(
            fmt::format("--dense-blocks {}: {} has no leading dense blocks", s.dense_blocks, arch));
    if (r.shared && given(s, "--shared") && s.shared > 0)
        throw UsageError(fmt::format("--shared {}: {} has no shared experts", s.shared, arch));
    if (r.nextn && s.nextn > 0)
        throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
    if (s.nextn > 0 && s.scales)
        throw UsageError(fmt::format(
            "--scales with --nextn: {}'s loader skips the MTP blocks' experts (unless it loads the "
            "MTP head) and so creates no per-expert scales for them",
            arch));
    if (s.fused_gate_up && s.scales)
        throw UsageError(
            fmt::format("--scales with --fused-gate-up: {}'s loader creates per-expert scales only for "
                        "split gate and up (no ffn_gate_up_exps.scale)",
                        arch));
}

// A preset of an architecture whose loader can never hold experts: every expert option is refused.
inline void refuse_expert_options(const ModelSpec& s, const char* arch, const char* why) {
    if (s.given.count("--experts") && s.experts > 0)
        throw UsageError(fmt::format("--experts {}: {} cannot hold experts ({}); its preset is dense",
                                     s.experts, arch, why));
    if (s.nextn > 0) throw UsageError(fmt::format("--nextn {}: {} has no MTP blocks", s.nextn, arch));
    for (const char* o : {"--used", "--shared", "--expert-ff", "--dense-blocks", "--groups", "--group-used",
                          "--probs-bias", "--router-bias", "--exps-bias", "--scales", "--fused-gate-up"})
        if (s.given.count(o))
            throw UsageError(
                fmt::format("{}: {} cannot hold experts ({}); its preset is dense", o, arch, why));
}

}  // namespace gguf_reap::gen
