// eval.json: written here for eval (eval_report_json) and read back here for `card --eval`
// (read_eval_report), so that its key names are spelled in this one file's source, as the audit
// document's are in services/audit_report. The document itself is described in docs/eval.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf_reap/eval.h"
#include "services/behaviour_stats.h"

namespace gguf_reap {

// The document eval writes (and prints with --json). With r.json_written set, every path in it is
// relative to eval.json's directory when under it, else a base name (path_for_upload): it is meant for
// upload beside the card.
nlohmann::ordered_json eval_report_json(const EvalResult& r);

// An absolute path as eval.json records it: relative to the directory of `json_out` when under it, else
// its base name; any other string as it is.
std::string path_for_upload(const std::string& path, const std::string& json_out);

// An eval.json read back: the result as the document records it (its paths as written there; the base
// runs' PPL without its error, which the document does not hold; json_written, svg_written and
// generations_written as the file names files.* gives), and the file itself.
struct EvalReport {
    EvalResult result;
    std::string path;    // as given
    std::string sha256;  // of its bytes
};
// InputError (naming the field) for a file that is not an eval.json or whose fields are missing or of
// another type; IoError.
EvalReport read_eval_report(const std::string& path);

// The index in report.result.outputs of the build whose shard names and total size these are, in an eval
// of the source whose identity is `source_identity`. InputError (naming the field) when the eval
// measured another source, not this build, or left this build's comparisons incomplete (a reference run
// or the source's behaviour entry missing).
size_t eval_report_build(const EvalReport& report, const std::vector<std::string>& shards, uint64_t bytes,
                         const std::string& source_identity);

// The plot eval wrote beside the report (files.svg), when it is there: its name and size. InputError when
// it is not the plot the report records (files.svg_sha256; a report without one is taken as it is).
struct EvalPlot {
    std::string name;
    uint64_t bytes = 0;
};
std::optional<EvalPlot> eval_report_plot(const EvalReport& report);

// The source's entry for the panel of `b`; null when there is none.
const EvalBehaviour* behaviour_source(const EvalResult& r, const EvalBehaviour& b);
// The behaviour measures as eval.json names them (docs/eval.md, "Behaviour", "Chat and tools").
inline constexpr const char* kBehaviourMeasures[] = {"loops", "natural_ends", "errors", "template_errors",
                                                     "tool_calls"};
// Per generation of `b`, in outcomes' order: null when it does not count in the measure's n (a plain
// prompt's in "template_errors", a line offering no tools in "tool_calls"), else whether it had the
// outcome. std::logic_error for another name.
std::vector<std::optional<bool>> behaviour_marks(const EvalBehaviour& b, std::string_view measure);
// McNemar's exact test of `build` against `src` on a measure, over the generations it counts.
PairedTest behaviour_paired_test(const EvalBehaviour& src, const EvalBehaviour& build,
                                 std::string_view measure);
// McNemar's exact test of `build` against `src` on outcome `o`, prompt by prompt (docs/eval.md,
// "Uncertainty").
PairedTest behaviour_paired_test(const EvalBehaviour& src, const EvalBehaviour& build, EvalOutcome o);

}  // namespace gguf_reap
