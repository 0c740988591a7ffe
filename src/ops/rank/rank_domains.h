// rank, the domains' side of the decision (gguf_reap/rank.h), and the warnings about the inputs: each
// domain's share of the criterion's mass per expert and block, the max-min search applied to the keep mask
// (ops/max_min.h), and the retained shares every consensus reports (RankDecision::retained_share, worst_*).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf_reap/rank.h"

namespace gguf_reap {

// "Leave no domain out": the default `skip` of the functions below. Leaving one out is how the
// leave-one-domain-out estimate (ops/rank/rank_lodo.h) reruns the selection without it.
inline constexpr size_t kNoDomain = static_cast<size_t>(-1);

// The median (the mean of the two middle values for an even count); NaN for none.
double median(std::vector<double> v);

// Expert e of block b is dead: never routed in every domain that holds the block, `skip` left out
// (and at least one of them holds it).
bool dead_everywhere(const RankInput& in, size_t b, size_t e, size_t skip = kNoDomain);

// What one domain's super-expert tests find in block b (docs/method.md, "Super-experts"): the share of
// the block's energy (legacy .dat: of the per-token means) and the hottest channel against the block's
// median, for every live expert that passes either. None for external scores or an absent block.
struct SuperHit {
    size_t expert = 0;
    double share = 0, ratio = 0;
    bool by_share = false, by_channel = false;
};
std::vector<SuperHit> super_expert_hits(const DomainData& dom, size_t b, double share_threshold,
                                        double channel_ratio_threshold);

// The consensus order of block b over the domains that hold it, `skip` left out (docs/method.md,
// "Consensus across domains", with its tie rule). For max-min, the min-rank order its search starts from.
class BlockConsensus {
  public:
    BlockConsensus(const RankInput& in, const RankDecision& r, Criterion criterion, Consensus consensus,
                   size_t b, size_t skip = kNoDomain);
    double key(size_t e) const { return key_[e]; }
    bool lower_is_better() const { return lower_is_better_; }  // of the keys
    // e comes before f in the order (a strict total order: the expert id breaks the last tie).
    bool before(size_t e, size_t f) const {
        if (key_[e] != key_[f]) return lower_is_better_ ? key_[e] < key_[f] : key_[e] > key_[f];
        return tie_before(e, f);
    }

  private:
    // Equal keys: the sorted rank vectors compared lexicographically (best rank, then second best,
    // ...), then the lower expert id.
    bool tie_before(size_t e, size_t f) const;
    size_t P_ = 0;                      // domains counted
    std::vector<const int32_t*> rows_;  // [P_]: each one's ranks of the block's experts (in r.ranks)
    std::vector<double> key_;           // [expert]
    bool lower_is_better_ = true;
};

// Replaces r.keep, block by block, with the max-min set, starting from the set already in r.keep (the
// min-rank decision). `group_size` experts per contiguous group, `quota` kept per group.
void choose_max_min(const RankInput& in, RankDecision& r, int64_t group_size, int64_t quota, int threads);

// The max-min set of block b over the domains but `skip`, given which experts are protected and dead
// ([expert] masks) and the min-rank set `start` it searches from; `start` itself when no domain has
// mass in the block.
std::vector<uint8_t> max_min_block(const RankInput& in, const RankDecision& r, size_t b,
                                   const std::vector<uint8_t>& protect, const std::vector<uint8_t>& dead,
                                   std::vector<uint8_t> start, int64_t group_size, int64_t quota,
                                   size_t skip = kNoDomain);

// r.retained_share, r.worst_share, r.worst_domain, r.worst_block from r.keep and r.scores.
void fill_retained_shares(const RankInput& in, RankDecision& r);

// The warnings about the inputs the receipt repeats: too few domains, domains from the same file or
// datasets, a per-token-mean criterion pruning more than 25 %, the input sanity problems, no --model.
void add_input_warnings(const RankInput& in, RankDecision& r);

}  // namespace gguf_reap
