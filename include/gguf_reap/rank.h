// rank: imatrix data → per-expert scores → consensus across domains → rules → KeepList (+ receipt, npz).
//
// ops::rank runs four steps, each a plain function of src/ops/rank/ (docs/rank.md, "Steps"; docs/method.md
// has the formulas):
//   resolve_rank()      pure: RankOptions → a plan (rank_plan.h): what is read and how the decision is
//                       made; refuses every request no file could make right. Opens no file.
//   read_rank_input()   reads only what the plan names, and only what it needs from each input (one
//                       ffn_down_exps entry per MoE block, straight from the file) into RankInput: per
//                       domain × block × expert counts and energies. Memory is O(domains × blocks × experts).
//   rank_experts()      pure: scores, per-domain ranks, consensus, dead and super experts, the keep
//                       decision, the safety margin. Testable without a file.
//   write_rank_outputs() keeplist.json, ranking.npz, REAP-KEEPLIST-RECEIPT.md into a directory.
#pragma once

#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/budget.h"
#include "gguf_reap/calibrate.h"
#include "gguf_reap/events.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/opened.h"
#include "gguf_reap/plan_interchange.h"
#include "gguf_reap/sanity_problem.h"

namespace gguf_reap {

// Each criterion is one row of the table in src/ops/rank/criteria.cpp (its name, formula, what it
// reads, its score); docs/method.md, "Adding a criterion".
enum class Criterion { kFrequency, kEnergy, kReapMean, kWeightedEnergy, kExternal };
enum class Consensus { kMinRank, kMeanRank, kSum, kPooled, kMaxMin };

const char* criterion_name(Criterion c);  // "frequency", "energy", "reap-mean", "weighted-energy", "external"
const char* consensus_name(Consensus c);  // "min-rank", "mean-rank", "sum", "pooled", "max-min"
std::optional<Criterion> parse_criterion(std::string_view s);
std::optional<Consensus> parse_consensus(std::string_view s);
// Every name, in the help's order, joined by `sep` (the last two by `last_sep`): the --criterion and
// --consensus help ("frequency | energy | ...") and their refusals ("frequency, energy, ... or external").
std::string criterion_choices(std::string_view sep, std::string_view last_sep);
std::string consensus_choices(std::string_view sep, std::string_view last_sep);

// One input file and the domain name it stands for: "NAME=PATH", or "PATH" (name = the file name
// without directory and without .gguf/.dat/.json and a trailing ".imatrix").
struct DomainSpec {
    std::string name;
    std::string path;
};
DomainSpec parse_domain_spec(const std::string& arg);

struct ExpertRef {
    int block = 0;
    int64_t expert = 0;
};
// "BLOCK:EXPERT" → ExpertRef; nullopt for anything else.
std::optional<ExpertRef> parse_expert_ref(std::string_view s);

struct RankOptions {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kImatrix{"imatrix"}, kScores{"scores"}, kModel{"model"},
        kCalibration{"calibration"}, kNeuronPlan{"neuron_plan"}, kScoreField{"score_field"},
        kScoreAggregate{"score_aggregate"}, kCriterion{"criterion"}, kConsensus{"consensus"}, kKeep{"keep"},
        kPrune{"prune"}, kRatio{"ratio"}, kFit{"fit"}, kProtect{"protect"}, kSuperShare{"super_share"},
        kSuperChannelRatio{"super_channel_ratio"}, kStrict{"strict"}, kFromPlan{"from_plan"},
        kExport{"export"};
    std::vector<DomainSpec> imatrices;    // --imatrix (criteria other than external)
    std::vector<DomainSpec> score_files;  // --scores  (criterion external)
    std::string model;                    // --model: any shard; "" = none
    std::string calibration;              // --calibration calibrate.json; "" = the one beside each imatrix
    std::string neuron_plan;              // --neuron-plan plan.npz; "" = none
    std::string score_field;              // external: JSON field; "" = "reap" if present, else "score"
    // external: how a per-token-mean field (reap, ean_mean, avg_gate_weight) is combined: "sum" (the
    // default: mean × the block's activation_counts, the total over routed tokens) or "mean" (as given,
    // the REAP paper's form; --score-aggregate mean). Other fields are taken as given either way.
    std::string score_aggregate = "sum";
    Criterion criterion = Criterion::kEnergy;
    Consensus consensus = Consensus::kMinRank;
    std::optional<int64_t> keep;  // exactly one of keep / prune / ratio
    std::optional<int64_t> prune;
    std::optional<double> ratio;  // fraction of experts pruned, 0 < R < 1
    std::optional<Budget> fit;    // --fit: the largest K that fits (ops/rank/rank_fit.h); needs --model
    std::vector<ExpertRef> protect;
    std::optional<double> super_share;   // share-of-energy threshold; default 10 / E clamped to [0.25, 0.5]
    double super_channel_ratio = 100.0;  // hottest channel vs the block's median hottest channel
    bool hash_inputs = true;             // sha256 of every input (false: size only, said so)
    bool strict = false;                 // --strict: input sanity problems refuse (exit 2), not warn
    std::string from_plan;               // --from-plan: another tool's plan decides (plan_interchange.h)
    std::optional<PlanFormat> export_format;  // --export: also write the keeplist as that tool's plan
    int threads = 0;                          // 0 = hardware concurrency
};

// What one domain measured in one MoE block, per expert (arrays of E; NaN where the input does not
// hold the value, e.g. counts in a legacy .dat).
struct BlockStats {
    bool present = false;        // false: the input has no entry for this block (legacy partial-skip)
    std::vector<double> count;   // tokens routed to the expert
    std::vector<double> energy;  // Σ_c in_sum2[e][c]: total energy over routed tokens (restricted by a plan)
    std::vector<double> mean;    // Σ_c in_sum2[e][c] / count[e]: per routed token (restricted by a plan)
    std::vector<double> peak;    // max_c in_sum2[e][c] / count[e]: the hottest channel, per routed token
    std::vector<double> energy_full;  // with a plan: unrestricted energy (else empty)
    std::vector<double> mean_full;    // with a plan: unrestricted mean (else empty)
    std::vector<double> weighted;     // weighted-energy: Σ_c ||W_down[:,c]||² in_sum2[e][c]
    std::vector<double> external;     // external: the chosen score field
    std::vector<uint8_t> dead;        // no routed tokens and no energy (as far as the format tells)
    uint64_t counts_offset = 0;       // GGUF: where the entry's counts are (input sanity findings)
};

struct DomainData {
    std::string name;
    std::string path;
    std::string format;  // "gguf", "dat", "json"
    std::string sha256;  // "" when not hashed
    uint64_t file_size = 0;
    std::vector<std::string> datasets;
    std::optional<uint64_t> chunks;
    std::optional<uint64_t> chunk_size;
    std::optional<uint64_t> tokens;
    // What gguf-reap calibrate recorded of this imatrix (calibrate.json beside it, or --calibration).
    std::optional<CalibrationRecord> calibration;
    std::vector<BlockStats> blocks;  // parallel to RankInput::blocks
};

struct RankInput {
    int64_t expert_count = 0;
    int64_t expert_width = 0;              // ffn_down_exps ne0 of the imatrix (native width); 0 = unknown
    std::vector<int> blocks;               // MoE block ids, ascending
    std::optional<KeepListSource> source;  // from --model
    uint64_t expert_used_count = 0;        // 0 = unknown (no --model)
    uint64_t expert_group_count = 0;       // 0 or 1 = no groups
    std::vector<DomainData> domains;
    std::string score_field;          // external: the field used
    bool score_is_mean = false;       // external: the field is a per-token mean (ops/rank/score_file.h)
    bool score_times_counts = false;  // ... and was multiplied by activation_counts (--score-aggregate sum)
    // --neuron-plan
    std::string plan_path;
    std::string plan_sha256;
    int64_t plan_k = 0;
    std::vector<std::string> notes;  // what was derived, what could not be, and from where
    // deepseek4's hash-routed blocks (services/hash_routing.h): per block, how many (token, slot) entries
    // of its token → expert table name each source expert, so the receipt can say how many the kept
    // set redirects.
    std::map<int, std::vector<uint64_t>> hash_entries;
    // MTP (nextn) blocks among `blocks` (with --model): ranked like the others; `splice --drop-mtp`
    // leaves them out, with their keeplist entries.
    std::vector<int> nextn_blocks;
    // What the GGUF imatrices' counts and metadata contradict (ops/rank/imatrix_sanity.h): warnings.
    std::vector<SanityProblem> sanity;
    // --from-plan: the plan, its file and sha256 ("" when not hashed).
    struct Imported {
        ExternalPlan plan;
        std::string path, sha256;
    };
    std::optional<Imported> imported;
    uint64_t block_count = 0;  // with --model: <arch>.block_count (for --export hipfire)
    std::string model_name;    // with --model: general.name, else ""
    // --fit: the model's headers for the budget search, read once (the read step opens them; opened.h).
    std::shared_ptr<const Opened> opened;
    FieldSpelling spell;  // how the receipt names the request's fields (Events::spell; ops::rank sets it)
};

struct DeadExpert {
    int block = 0;
    int64_t expert = 0;
    std::string reason;
};

struct SuperExpert {
    int block = 0;
    int64_t expert = 0;
    double share = 0;            // largest share of the block's energy in any domain
    std::string share_domain;    // where
    bool share_is_mean = false;  // legacy .dat: share of per-token mean energies (totals are not stored)
    double channel_ratio = 0;    // largest hottest-channel ratio to the block median, any domain
    bool by_share = false;
    bool by_channel = false;
    bool by_option = false;  // --protect
    std::string reason;
};

// One domain's line of the leave-one-domain-out estimate (ops/rank/rank_lodo.h, docs/method.md "What an
// uncalibrated kind of text would lose"): its share of its own routed energy (criterion external: of its
// score mass) kept by this selection (seen) and by the same selection made without it (unseen), summed
// over the MoE blocks. NaN where it cannot be computed; `unknown` then says why.
struct BlindSpot {
    double seen = std::numeric_limits<double>::quiet_NaN();
    double unseen = std::numeric_limits<double>::quiet_NaN();
    int64_t disagree = 0;  // experts kept by one of the two selections and pruned by the other
    std::string unknown;   // "" when unseen was computed
};

// How the number of experts kept was chosen: the request's keep, prune, ratio or fit, with its value as
// given, or an imported plan. rule_message() says it in words.
struct RankRule {
    enum class Kind : uint8_t { kKeep, kPrune, kRatio, kFit, kPlan };
    Kind kind = Kind::kKeep;
    std::string value;  // "13", "3", "0.25", "size=277GB"; kPlan: "the hipfire plan reap_plan.json"
};

struct RankDecision {
    Criterion criterion = Criterion::kEnergy;
    Consensus consensus = Consensus::kMinRank;
    int64_t expert_count = 0;
    int64_t n_keep = 0;
    RankRule rule;
    std::optional<FitAnswer> fit;  // --fit: the budget, K and the size or memory at K and K + 1
    std::vector<int> blocks;
    std::vector<std::string> domain_names;
    double super_share = 0;
    double super_channel_ratio = 0;

    // [domain][block][expert], flattened
    std::vector<double> scores;
    std::vector<int32_t> ranks;   // 1 = best; 0 = the domain has no data for the block
    std::vector<int64_t> counts;  // -1 = unknown (legacy)
    // [block][expert]
    std::vector<int32_t> consensus_rank;
    std::vector<double> consensus_score;
    std::vector<uint8_t> keep, dead, protect;
    // [domain][block]: Spearman of restricted vs unrestricted scores (with --neuron-plan), else NaN
    std::vector<double> spearman;

    std::vector<DeadExpert> dead_experts;
    std::vector<SuperExpert> protected_experts;  // auto-detected super-experts and --protect
    std::vector<int32_t> best_pruned_rank;  // per block: best rank of a pruned expert in any domain (0: none)
    int32_t safety_rank = 0;                // min over blocks (0: nothing pruned)
    double safety_median = 0;               // median over blocks
    // Where safety_rank is reached (the first block, expert and domain, in that order): the pruned expert
    // closest to being kept, and the domain that ranks it so.
    int safety_block = -1;
    int64_t safety_expert = -1;
    std::string safety_domain;
    std::vector<double> pruned_token_share;   // per domain; NaN = unknown
    std::vector<double> pruned_energy_share;  // per domain; NaN = unknown
    // [domain][block]: the kept set's share of the domain's criterion mass in the block (Σ kept
    // max(0, score) / Σ max(0, score)); NaN where the domain has no data or no mass there. The worst
    // of them (what max-min maximises per block) and where it is.
    std::vector<double> retained_share;
    double worst_share = std::numeric_limits<double>::quiet_NaN();
    size_t worst_domain = 0, worst_block = 0;
    std::vector<BlindSpot> blind_spot;  // per domain (ops/rank/rank_lodo.h)
    std::vector<std::string> warnings;
    KeepList keeplist;

    size_t idx(size_t d, size_t b, size_t e) const {
        return (d * blocks.size() + b) * static_cast<size_t>(expert_count) + e;
    }
    size_t idx(size_t b, size_t e) const { return b * static_cast<size_t>(expert_count) + e; }
};

// Output file names inside --out.
inline constexpr const char* kKeeplistFile = "keeplist.json";
inline constexpr const char* kRankingFile = "ranking.npz";
inline constexpr const char* kReceiptFile = "REAP-KEEPLIST-RECEIPT.md";
inline constexpr const char* kExportedPlanFile = "reap_plan.json";  // --export (both formats' name)

// The same sentence from the keeplist's method.safety_margin fields (what `card` reads back); the last
// clause only when `block`, `expert` and `domain` are known (a keeplist of an older rank has none).
std::string safety_margin_sentence(int64_t best_pruned_rank, int64_t expert_count, double median_layer,
                                   int block = -1, int64_t expert = -1, const std::string& domain = "");
// The criterion's formula and the consensus rule in words, as the receipt and the model card state them.
const char* criterion_formula(Criterion c);
const char* consensus_text(Consensus c);
// The blind-spot sentence of the receipt and the card (rank's leave-one-domain-out estimate,
// src/ops/rank/rank_lodo.h): "a kind of text the calibration did not cover loses up to N points of its expert
// energy (worst: DOMAIN)", `drop` a fraction (seen − unseen); `score_mass`: criterion external. A drop of 0
// or less says that no domain kept less when left out, and names none.
std::string blind_spot_sentence(double drop, const std::string& domain, bool score_mass);

namespace ops {

// One `gguf-reap rank`: read → decide → write the three files into out_dir.
struct RankRequest {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kOut{"out"}, kForce{"force"};
    RankOptions options;
    std::string out_dir;
    bool force = false;
};
struct RankResult {
    RankInput input;
    RankDecision result;
    std::string keeplist_path, ranking_path, receipt_path;
    std::string exported_path;  // --export, else ""
    std::optional<PlanFormat> exported_format;
    // The ranking is done but its files could not be written (a full disk): the caller prints the
    // summary, then rethrows this (exit 3).
    std::exception_ptr write_error;
};
// Reports each input note (info), the time of each step (debug) and the result's warnings (warn).
RankResult rank(const RankRequest& request, const Events& events = {});

// What rank's input check (docs/rank.md, "Input sanity") finds in `imatrices` read against `model` (any
// shard; "" = none): calibrate checks the files it made with it. Throws as rank does.
std::vector<SanityProblem> imatrix_sanity(const std::string& model, const std::vector<DomainSpec>& imatrices);
// The experts dead in every imatrix (rank's rule), counted per MoE block of `model` and contiguous
// expert group: dead[block][group], the blocks' ids in `blocks`. estimate --imatrix bounds K with it.
std::vector<std::vector<int64_t>> dead_expert_counts(const std::vector<DomainSpec>& imatrices,
                                                     const std::string& model, std::vector<int>& blocks);

}  // namespace ops

}  // namespace gguf_reap
