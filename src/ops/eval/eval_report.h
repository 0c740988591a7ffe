// What ops::eval writes beside its result (include/gguf_reap/eval.h): the eval.json document (docs/eval.md),
// the plot and the generations file's name.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "gguf_reap/eval.h"

namespace gguf_reap {

nlohmann::ordered_json eval_json(const EvalResult& r);
// The generations file's name for -o FILE: FILE's stem + ".generations.jsonl" (eval.json →
// eval.generations.jsonl).
std::string generations_path_for(const std::string& json_out);
// The plot: mean KLD against size, one line per text, one point per OUT.
std::string eval_svg(const EvalResult& r);

}  // namespace gguf_reap
