// What card reads and holds against each other (card_inputs.cpp): the two models, the rank directory's
// keeplist, the audit report and the manifest. An input that disagrees with another is an InputError
// naming both: a card that states the wrong facts is worse than none.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gguf_reap/card.h"
#include "gguf_reap/estimate.h"
#include "gguf_reap/inspect.h"
#include "gguf_reap/keeplist.h"
#include "model/shard_set.h"

namespace gguf_reap::card_detail {

// A model opened as inspect opens it, with estimate's figures.
struct OpenedModel {
    std::string path;
    ShardSet set;
    ModelSummary summary;
    EstimateResult estimate;
};
// InputError when `path` is an imatrix (the `role` model's first shard was asked for).
OpenedModel open_model(const std::string& path, const std::string& role, const EstimateRequest& base);
// A string key of the model; "" when it has none.
std::string kv_string(const ShardSet& s, const char* key);

// The rank directory's keeplist, as read (its sha256 is of these bytes).
struct RankKeeplist {
    std::string path;
    std::string text;
    KeepList kl;
    std::string sha256;
    std::string applied;  // keeplist_applies_to's sentence; "" when ranked on MODEL itself
};

// The rank directory: the keeplist must be for this source, and the output made from it.
// The rank directory: the keeplist must be for this source, and the output made from it.
RankKeeplist read_rank_keeplist(const std::string& rank_dir, const OpenedModel& src, const OpenedModel& out);
// How the keeplist says its experts were chosen (keeplist.json's method), and the receipt beside it.
CardMethod method_of(const KeepList& kl, const std::string& kl_path, const std::string& kl_text,
                     const std::string& rank_dir);

struct AuditRead {
    CardAudit facts;
    std::vector<std::pair<std::string, uint64_t>> shards;
    std::vector<std::string> sha256;  // per shard, "" when not hashed
    std::string neuron_plan;          // base name, "" when none
};
// The audit report (services/audit_report): a pass of exactly the output's shards, against a shard (or a
// manifest) of this source.
AuditRead read_audit(const std::string& path, const OpenedModel& out, const OpenedModel& src);

// The files, with their sha256 from the manifest or the hashing audit (never hashed here). `audit_sha`
// is the audit's, per shard, empty when it did not hash.
void add_files(const CardRequest& q, const OpenedModel& out, const std::vector<std::string>& audit_sha,
               CardFacts& f);

}  // namespace gguf_reap::card_detail
