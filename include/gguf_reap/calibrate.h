// calibrate: one importance matrix per kind of text, computed by the user's own llama-imatrix, with a
// record of which text and which settings made each (docs/calibrate.md).
//
//   ops::calibrate(request) → CalibrateResult   check the inputs → hash and count each text
//                                               (llama-tokenize) → with --tokens N, cut each to its first
//                                               N tokens → per text, llama-imatrix (skipped when DIR
//                                               already holds its imatrix made with the same key) →
//                                               calibrate.json after each text → rank's imatrix sanity
//                                               check on every file
//
// Every statistic is llama-imatrix's; calibrate computes none. The imatrix is written under a temporary
// name and renamed when llama-imatrix has finished, so an interrupted run leaves no imatrix under a
// final name, and a rerun starts at the first text without one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/events.h"
#include "gguf_reap/llama_args.h"
#include "gguf_reap/perplexity.h"
#include "gguf_reap/sanity_problem.h"
#include "gguf_reap/text_input.h"

namespace gguf_reap {

struct CalibrateRequest {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kModel{"model"}, kText{"text"}, kOut{"out"}, kCtx{"ctx"}, kTokens{"tokens"};
    std::string model;               // any shard
    std::vector<TextInput> texts;    // the imatrix of each is DIR/NAME.imatrix.gguf
    std::string out_dir;             // -o DIR
    uint64_t ctx = 512;              // -c and -b of llama-imatrix (its default -c 512)
    std::optional<uint64_t> tokens;  // --tokens N: every text cut to its first N tokens
    uint64_t threads = 0;            // -t; 0 = llama.cpp's default
    std::string llama_bin;           // --llama-bin DIR ("" = not given)
    std::string llama_bin_env;       // $GGUF_REAP_LLAMA_BIN
    std::string path_env;            // $PATH
    LlamaArgs llama_args;            // --llama-args / $GGUF_REAP_LLAMA_ARGS (llama-imatrix only)
    std::string tool_version;
};

// A text (its tokens counted with the model's vocabulary) and the imatrix made from it.
struct CalibrateTextFacts : TextFacts {
    // What llama-imatrix read: the file itself, or with --tokens its first N tokens in DIR/NAME.txt.
    std::string used_path, used_sha256;
    uint64_t used_bytes = 0;
    int64_t used_tokens = 0;
    int64_t chunks = 0;                // used_tokens / ctx: what llama-imatrix computes over
    std::optional<ValueErr> ppl;       // llama-imatrix's perplexity of the text ("Final estimate")
    std::vector<std::string> command;  // llama-imatrix's, with the final imatrix name after -o
    std::string key;                   // what the imatrix was made from (sha256, see calibrate.cpp)
    std::string imatrix;               // DIR/NAME.imatrix.gguf
    std::string imatrix_sha256;
    bool cached = false;  // an earlier calibrate made it with the same key; nothing was run
    double seconds = 0;   // llama-imatrix's wall time (of the run that made it, when cached)
};

struct CalibrateResult {
    std::string tool;
    std::string llama_build;  // llama-imatrix --version
    std::string imatrix_path, tokenize_path;
    std::vector<std::string> llama_args;
    std::string model;
    std::vector<std::string> model_shards;
    uint64_t model_bytes = 0;
    std::string source_identity;  // as eval computes it: sha256 over the shard headers
    uint64_t expert_count = 0, expert_used_count = 0;
    uint64_t ctx = 0, batch = 0;
    std::optional<uint64_t> tokens_requested;
    uint64_t threads = 0;
    std::vector<CalibrateTextFacts> texts;
    std::vector<SanityProblem> sanity;  // rank's imatrix sanity check over every file
    std::string json_written;           // DIR/calibrate.json ("" when a rerun changed nothing)
};

// The calibrate.json document. With `json_out` (where it is written), every path in it is relative to
// that file's directory or a base name (docs/calibrate.md): a calibrate.json names no path of this machine.
nlohmann::ordered_json calibrate_json(const CalibrateResult& r, const std::string& json_out = "");

// What a calibrate.json says about one imatrix (rank and card read it): null when `json` holds no entry
// for that file.
struct CalibrationRecord {
    std::string json_path;  // the calibrate.json it came from
    std::string name, text_path, text_sha256, used_sha256, imatrix_sha256;
    int64_t tokens = 0, used_tokens = 0, chunks = 0;
    uint64_t ctx = 0;
    std::vector<std::string> command;
    std::vector<std::string> llama_args;
    std::string llama_build;
};
// The calibrate.json beside `imatrix_path` (same directory), or `json_path` when given; the record of
// the entry whose imatrix is that file, or (an imatrix copied elsewhere) whose imatrix sha256 is
// `imatrix_sha256` when that is given. InputError for a calibrate.json that is not one.
std::optional<CalibrationRecord> find_calibration(const std::string& imatrix_path,
                                                  const std::string& json_path = "",
                                                  const std::string& imatrix_sha256 = "");

// A text of a calibrate.json as eval and card take it (their --calibration CALIBRATE.json): the domain
// it calibrated, the sha256 of the file, of what llama-imatrix read (the file or its cut) and of the
// imatrix it made.
struct CalibrationText {
    std::string name, sha256, used_sha256, imatrix_sha256;
    bool operator==(const CalibrationText&) const = default;
};
// The texts of a calibrate.json. InputError when it is not one; IoError.
std::vector<CalibrationText> read_calibration_texts(const std::string& calibrate_json);

// Whether a text was held out from a calibration (docs/eval.md, docs/card.md "Held-out text"): its
// sha256 against each calibration text's and each cut's. A calibration text whose sha256 is not recorded
// ("" in `calibration`: an imatrix not made by gguf-reap calibrate) leaves "held out" not known.
struct TextOrigin {
    std::optional<bool> held_out;         // false: a calibration text; null: not known
    std::string domain;                   // a calibration text: the domain it calibrated
    std::vector<std::string> unrecorded;  // not known: the domains whose text's sha256 is not recorded
};
TextOrigin text_origin(const std::vector<CalibrationText>& calibration, const std::string& text_sha256);

namespace ops {
// One `gguf-reap calibrate`. Throws UsageError (options, a missing llama.cpp tool, a name given twice, a
// text shorter than --tokens or than two chunks, a colliding --llama-args), InputError (the model),
// IoError (a failed llama.cpp run: its last lines), Interrupted.
CalibrateResult calibrate(const CalibrateRequest& request, const Events& events = {});
}  // namespace ops

}  // namespace gguf_reap
