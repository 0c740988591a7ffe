// What ops::eval writes beside eval.json (whose document is services/eval_report's): the plot, and the
// generations file's name.
#pragma once

#include <string>

#include "gguf_reap/eval.h"

namespace gguf_reap {

// The generations file's name for -o FILE: FILE's stem + ".generations.jsonl" (eval.json →
// eval.generations.jsonl).
std::string generations_path_for(const std::string& json_out);
// The plot: mean KLD against size, one line per text, one point per OUT (with --text); the loop rate per
// panel and model (with --prompts).
std::string eval_svg(const EvalResult& r);

}  // namespace gguf_reap
