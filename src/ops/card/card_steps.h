// The steps of ops::card (include/gguf_reap/card.h) the CLI and the tests call: the card's Markdown and
// JSON, both rendered from the same facts, and the eval.json a card reads.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/card.h"
#include "services/llama_cpp/llama_recipes.h"

namespace gguf_reap {

// A request field as the card names it (CardFacts::spell): "--source" for the CLI.
inline std::string card_option(const CardFacts& f, RequestField field) {
    return spelled(field, f.spell);
}

// The card's Markdown and JSON, both from the same facts.
void measured_section(std::string& s, const CardFacts& f);  // "" without an eval
nlohmann::ordered_json card_eval_json(const CardEval& e);
class ShardSet;
// Reads `eval -o` JSON (services/eval_report) for `output` (a ShardSet of the build): InputError when it was
// made against another source (`source_identity`) or measured other builds.
CardEval read_card_eval(const std::string& path, const ShardSet& output, const std::string& source_identity);
// This build's KLD runs against the source, in text order.
std::vector<const EvalRun*> card_runs(const CardEval& e);

std::string render_card_markdown(const CardFacts& f);
nlohmann::ordered_json card_json(const CardFacts& f);  // card_json.cpp

// What the Markdown and the JSON both say: a size in decimal units ("12.3 GB"), and the run lines of "How
// to run" (services/llama_cpp/llama_recipes.h) for the build and the placement of the hardware table.
std::string decimal_size(uint64_t bytes);
llama_cpp::RunLines card_run_lines(const CardFacts& f);

}  // namespace gguf_reap
