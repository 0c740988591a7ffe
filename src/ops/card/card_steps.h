// The steps of ops::card (include/gguf_reap/card.h) the CLI and the tests call: the card's Markdown and
// JSON, both rendered from the same facts, and the eval.json a card reads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/calibrate.h"
#include "gguf_reap/card.h"
#include "services/llama_cpp/llama_recipes.h"

namespace gguf_reap {

// A request field as the card names it (CardFacts::spell): "--source" for the CLI.
inline std::string card_option(const CardFacts& f, RequestField field) {
    return spelled(field, f.spell);
}

// The card's Markdown and JSON, both from the same facts.
void measured_section(std::string& s, const CardFacts& f);  // "" without an eval
nlohmann::ordered_json card_eval_json(const CardEval& e, const CardMethod& m);
class ShardSet;
// Reads `eval -o` JSON (services/eval_report) for `output` (a ShardSet of the build): InputError when it was
// made against another source (`source_identity`) or measured other builds.
CardEval read_card_eval(const std::string& path, const ShardSet& output, const std::string& source_identity);
// This build's KLD runs against the source, in text order.
std::vector<const EvalRun*> card_runs(const CardEval& e);

// Whether eval's text `text` calibrated the build (docs/card.md, "Held-out text"): the one test
// (gguf_reap/calibrate.h's text_origin) of its sha256 against each calibration domain's text and cut as
// the keeplist records them (gguf-reap calibrate's records), or as --calibration or eval.json's
// calibration record gives them for a domain the keeplist has none for (add_calibration_texts).
TextOrigin text_origin(const CardMethod& m, const EvalResult& r, const std::string& text);
// Fills, for each domain of `m` without a recorded text, the text of `calibration` that made the same
// imatrix (by its sha256). Returns how many domains it filled.
size_t add_calibration_texts(CardMethod& m, const std::vector<CalibrationText>& calibration);
// Its words in the card: "held-out text", "calibration text of c", "" when not known.
std::string origin_words(const TextOrigin& o);

std::string render_card_markdown(const CardFacts& f);
nlohmann::ordered_json card_json(const CardFacts& f);  // card_json.cpp

// What the Markdown and the JSON both say: a size in decimal units ("12.3 GB"), and the run lines of "How
// to run" (services/llama_cpp/llama_recipes.h) for the build and the placement of the hardware table.
std::string decimal_size(uint64_t bytes);
// A file the card names: `name` in a code span, or with --upload-dir (CardFacts::links) a relative link
// to it beside README.md.
std::string file_ref(const CardFacts& f, const std::string& name);
llama_cpp::RunLines card_run_lines(const CardFacts& f);

}  // namespace gguf_reap
