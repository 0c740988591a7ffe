// rank: what an uncalibrated kind of text would lose, estimated by leaving each calibration domain out
// (docs/method.md, "What an uncalibrated kind of text would lose").
//
// For every domain d, the selection is made again without d: the same criterion, consensus, keep
// rule, dead and super-expert rules and protections, from the per-domain ranks already computed (one
// more consensus per domain, no extra reads). d's share of its own routed energy (Σ over the MoE
// blocks of the kept experts' energy ÷ its total, from d's imatrix; criterion external: of its score
// mass, max(0, score)) is then reported under the real selection (seen) and under that one (unseen).
// The drop estimates what a kind of text the calibration did not cover loses. A proxy from routed
// energy, not a KLD.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf_reap/rank.h"

namespace gguf_reap {

// r.blind_spot, one per domain: seen always (NaN for a legacy .dat, which holds no energy totals);
// unseen and the disagreement with two or more domains when rank made the decision (not --from-plan).
// Needs r.criterion, r.consensus, r.ranks, r.scores, r.keep, r.n_keep, r.protected_experts,
// r.super_share and r.super_channel_ratio; `threads` (resolved: at least 1).
void fill_blind_spot(const RankInput& in, int threads, RankDecision& r);

// The domain that loses most when left out (the largest seen − unseen); nullopt when no unseen share
// is known.
std::optional<size_t> worst_blind_spot(const RankDecision& r);

// method.blind_spot of the keeplist (and blind_spot in rank --json): docs/keeplist.md.
nlohmann::ordered_json blind_spot_json(const RankInput& in, const RankDecision& r);

// The receipt's section, from its "## " heading to a blank line.
std::string blind_spot_receipt(const RankInput& in, const RankDecision& r);

// The line of rank's text summary (no newline).
std::string blind_spot_summary(const RankInput& in, const RankDecision& r);

}  // namespace gguf_reap
