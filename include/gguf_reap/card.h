// card: a Hugging Face model card (README.md) for a pruned build (docs/card.md).
//
//   ops::card(request) → CardResult     read every input, cross-check them, compute the facts once,
//                                        render them, write the card (temporary → rename) when asked
//
// No figure of the card is typed by the user: the models' shapes and sizes come from inspect and
// estimate (of the source and of the output), the method from RANK_DIR/keeplist.json, the verdict from
// `audit --json`, the hashes from the manifest (or the audit when it hashed). Inputs that disagree
// (an audit of other files, a keeplist of another model) are refused rather than written up: a card
// that states the wrong facts is worse than none. The Markdown and the JSON are both rendered from
// CardFacts, so they cannot disagree.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/estimate.h"
#include "gguf_reap/eval.h"
#include "gguf_reap/events.h"

namespace gguf_reap {

struct CardRequest {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kBaseModel{"base_model"}, kHfRepo{"hf_repo"}, kOut{"out"}, kForce{"force"};
    std::string output;      // any shard of the pruned output set
    std::string source;      // any shard of the source model
    std::string rank_dir;    // the directory `rank -o` wrote (keeplist.json; the receipt when present)
    std::string audit_json;  // `audit --json` output; "" = not audited
    std::string manifest;    // `audit --manifest-out` JSON; ""
    std::string eval_json;   // `eval -o` JSON; "" = not measured
    std::string base_model;  // "" = from the source's general.* keys
    Deployment deployment;   // the hardware table's, as estimate's
    std::string hf_repo;     // --hf-repo ORG/REPO: the `llama-server -hf ORG/REPO:QUANT` lines
    std::vector<std::string> notes;  // --note lines, added to "Not verified"
    std::string out_path;            // "" = the caller prints the Markdown
    bool force = false;              // replace an existing out_path (or the upload folder's files)
    // --upload-dir DIR: DIR/README.md and every file the card names, for `hf upload` (docs/card.md).
    std::string upload_dir;
    std::string calibration;   // --calibration calibrate.json: named by the card, put in the upload folder
    std::string tool_version;  // "gguf-reap 0.1.0"
};

// One column of the comparison table (source, or this build).
struct CardModelColumn {
    std::string first_shard;  // file name
    uint64_t shards = 0;
    uint64_t moe_blocks = 0;
    uint64_t expert_count = 0;  // routed experts per MoE block
    uint64_t expert_used_count = 0;
    uint64_t expert_width = 0;
    uint64_t parameters = 0;
    uint64_t active_parameters = 0;
    uint64_t file_bytes = 0;
    uint64_t tensor_bytes = 0;
    uint64_t decode_bytes_per_token = 0;
    std::map<std::string, uint64_t> tensor_types;  // ggml type → tensors (inspect's histogram)
};

struct CardDomain {
    std::string name;
    std::optional<uint64_t> tokens;  // null when the imatrix did not record chunks × chunk size
    std::vector<std::string> datasets;
    // From gguf-reap calibrate's record, via the keeplist (method.domains[].calibration); "" / 0 without.
    std::string text, text_sha256;
    std::string used_sha256;  // what llama-imatrix read: the text, or its first --tokens (a cut)
    uint64_t text_tokens = 0;
    std::string imatrix_sha256;  // the keeplist's sha256 of the domain's imatrix ("" when not recorded)
};

struct CardSuperExpert {
    int block = 0;
    int64_t expert = 0;
    std::string reason;  // the keeplist's, which states the share ("carries 41.2 % of the block's ...")
    std::optional<double> share_percent;  // that share, read from the reason; null for --protect only
};

struct CardMethod {
    std::string criterion, criterion_words;
    std::string consensus, consensus_words;
    std::string rule;       // "--ratio 0.5"
    std::string fit_words;  // rank --fit: method.fit.budget.words ("288 GiB with 8,192 tokens of context")
    // rank --fit on another model of the family (ranked_on_other): that model, what K needed there
    // (method.fit.at_k.human), and what this build needs against the same budget, measured here.
    std::string fit_kind;  // "size" or "memory"
    uint64_t fit_bytes = 0, fit_tp = 1, fit_ctx = 0, fit_overhead = 0;
    std::string fit_ranked_on, fit_ranked_need;
    std::optional<uint64_t> fit_build_need;
    std::string score_field;  // criterion external: the score file's field ("" otherwise)
    // rank --from-plan: the kept experts are another tool's; criterion and consensus only score them.
    std::string from_plan_file, from_plan_format, from_plan_sha256;
    std::vector<CardDomain> domains;
    uint64_t dead_experts = 0;  // summed over blocks
    uint64_t dead_blocks = 0;   // blocks with at least one
    std::vector<CardSuperExpert> super_experts;
    std::optional<double> super_share_threshold, super_channel_ratio_threshold;
    std::optional<int64_t> best_pruned_rank;
    std::optional<int64_t> rank_of;
    std::optional<double> median_layer;
    std::string safety_margin;  // the receipt's sentence; "" when the keeplist has no safety_margin
    // rank's leave-one-domain-out estimate (method.blind_spot): the sentence, from its worst domain and
    // that domain's drop; "" when the keeplist has none (one domain, --from-plan, an older rank).
    std::string blind_spot;
    std::string blind_spot_domain;
    std::optional<double> blind_spot_drop;  // fraction of the domain's energy (or score mass)
    std::string keeplist_sha256;
    std::string receipt_name, receipt_sha256;  // "" when RANK_DIR has no receipt
    bool source_identified = true;             // false: the keeplist records only the expert count
    // The keeplist was ranked on another model of the same architecture, expert layout and tensor names
    // (another quantisation of it): "ranked on A-f16.gguf, applied to A-Q8_0.gguf (...)"; "" otherwise.
    std::string ranked_on_other;
    bool output_names_keeplist = false;  // the output's gguf_reap.keeplist_sha256 is the keeplist's
};

struct CardAudit {
    bool audited = false;
    bool with_source = false;  // false: structure only
    // The audit ran with --source-manifest (with_source is then true): the manifest's file name and
    // sha256, read from where the audit report says it was.
    std::string source_manifest, source_manifest_sha256;
    std::string tool, date;
    uint64_t shards = 0, tensors = 0, tensors_identical = 0, expert_tensors = 0, slabs = 0;
    uint64_t kvs_checked = 0, bytes_compared = 0;
    bool hashed = false;
};

struct CardWidth {
    uint64_t source_width = 0, width = 0;
    std::string plan_sha256;  // gguf_reap.neuron_plan_sha256 of the output
    std::string plan_file;    // keeplist method.neuron_plan.file or the audit's neuron_plan; "" unknown
};

struct CardFitRow {
    uint64_t tp = 1;
    uint64_t weights = 0, kv_cache = 0, overhead = 0, need = 0;
    std::optional<bool> fits;  // null without --gpu-mem
    uint64_t kv_bytes_per_token = 0;
};

// The hardware table's first row: one GPU and the host's RAM, as llama.cpp places the build.
struct CardHostRow {
    HostSplit split;
    std::optional<bool> fits;  // GPU total against --gpu-mem; null without it
};

// The headline's verdict on one text of the eval: its mean KLD and the words docs/eval.md gives it.
struct CardQuality {
    std::string text;
    double kld_mean = 0;
    double kld_err = 0;   // llama-perplexity's ± of the mean (NaN when it printed none)
    int64_t tokens = 0;   // the tokens it was scored on
    std::string verdict;  // "close", "often predicts something else", ...
    std::string origin;   // text_origin's words: "held-out text", "calibration text of c", "" unknown
};

struct CardFile {
    std::string name;
    uint64_t size = 0;
    std::string sha256;  // "" when not recorded
};

// card --eval: the eval.json of this build (docs/eval.md), as eval wrote it and services/eval_report
// reads it back: every figure of "Measured against the source" is the result's.
struct CardEval {
    std::string file, sha256;  // eval.json's name and hash
    EvalResult result;         // as eval.json records it (paths as written there)
    size_t output = 0;         // this build's entry in result.outputs
    std::string svg;           // eval.svg's name when it is beside eval.json; ""
    uint64_t svg_bytes = 0;
};

struct CardFacts {
    // How the card names gguf-reap's request fields in its recipes (Events::spell; ops::card sets it).
    FieldSpelling spell;
    std::string tool;
    std::string base_model, base_model_from;  // "" when unknown
    // An hf:// source: "ORG/REPO@COMMIT", the revision pinned when it was read (docs/remote.md); else "".
    std::string source_revision;
    // A source named as hf://ORG/REPO:QUANT: each shard (hf://ORG/REPO/PATH@COMMIT), its size and the
    // sha256 the Hub's listing gives it (lfs.oid), the source's identity; empty otherwise.
    std::vector<CardFile> source_files;
    std::vector<std::string> tags;
    std::string license, license_name, license_link;
    std::string arch;
    uint64_t experts_removed = 0;  // per MoE block (the keeplist keeps the same count in every block)
    CardModelColumn source, build;
    CardMethod method;
    CardAudit audit;
    std::optional<CardWidth> width;
    std::vector<std::string> not_verified;
    uint64_t gpu_mem = 0, overhead = 0, ctx = 0;
    uint64_t kv_bytes_per_token = 0;
    std::string kv_kind;
    std::string cache_type_k = "f16", cache_type_v = "f16";
    std::string offload_flag;  // "" | "--cpu-moe" | "--n-cpu-moe N"
    CardHostRow host;
    std::vector<CardFitRow> fits;
    std::string hf_repo, quant;        // the -hf lines; quant "" when the build's name names none
    std::vector<CardQuality> quality;  // from the eval; empty without one
    std::vector<CardFile> files;
    std::string hashes_from;  // "manifest", "audit" or "" (not recorded)
    std::string manifest_name, manifest_sha256;
    std::optional<CardEval> eval;
    std::string calibration_name, calibration_sha256;  // --calibration: calibrate.json; "" without
    // --upload-dir: the card links every file it names (all beside README.md) and embeds the plot.
    bool links = false;
    std::string manifest_sums;  // --upload-dir: the manifest's .sha256, put beside README.md; ""
};

// A file put into the upload folder: its name there, and how (a hard link, a copy, or written).
struct CardUploadFile {
    std::string name;
    std::string how;  // "link", "copy", "written"
};

struct CardResult {
    CardFacts facts;
    std::string markdown;
    bool written = false;                  // request.out_path written
    std::vector<CardUploadFile> uploaded;  // --upload-dir: every file in DIR, README.md last
    // The card was made but could not be written (a full disk): the caller prints it on stdout, then
    // rethrows this (exit 3).
    std::exception_ptr write_error;
};

namespace ops {
// One `gguf-reap card`. Throws InputError (an input that is bad or disagrees with another, naming both
// files and the field), UsageError (options, an existing -o without --force), IoError.
CardResult card(const CardRequest& request, const Events& events = {});
}  // namespace ops

}  // namespace gguf_reap
