#include "gguf_reap/error.h"

#include <cstring>
#include <iterator>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace gguf_reap {

namespace {
std::string input_message(const std::string& file, const std::optional<uint64_t>& offset,
                          const std::string& field, const std::string& message) {
    std::string where = file;
    if (!field.empty() || offset) where += ": ";
    if (!field.empty()) where += field;
    if (offset) where += fmt::format("{}at offset {} (0x{:x})", field.empty() ? "" : " ", *offset, *offset);
    return where + ": " + message;
}
}  // namespace

InputError::InputError(std::string file, std::optional<uint64_t> offset, std::string field,
                       std::string message)
    : Error(kExitBadInput, input_message(file, offset, field, message)),
      file_(std::move(file)),
      offset_(offset),
      field_(std::move(field)),
      detail_(std::move(message)) {}

namespace {

// Each field's name in the library's own messages (the CLI spells them as its options instead), in the
// enum's order: the two checks below fail the build when a field is added without its name.
constexpr std::pair<RequestField, const char*> kFieldNames[] = {
    {RequestField::kBaseModel, "base_model"},
    {RequestField::kCacheDir, "cache_dir"},
    {RequestField::kCalibration, "calibration"},
    {RequestField::kChat, "chat"},
    {RequestField::kChunks, "chunks"},
    {RequestField::kConsensus, "consensus"},
    {RequestField::kCriterion, "criterion"},
    {RequestField::kCtx, "ctx"},
    {RequestField::kDropMtp, "drop_mtp"},
    {RequestField::kDryRun, "dry_run"},
    {RequestField::kExport, "export"},
    {RequestField::kFit, "fit"},
    {RequestField::kForce, "force"},
    {RequestField::kFromPlan, "from_plan"},
    {RequestField::kGenTokens, "gen_tokens"},
    {RequestField::kGpuMem, "gpu_mem"},
    {RequestField::kGranularity, "granularity"},
    {RequestField::kHfRepo, "hf_repo"},
    {RequestField::kImatrix, "imatrix"},
    {RequestField::kImatrixIn, "imatrix_in"},
    {RequestField::kImatrixOut, "imatrix_out"},
    {RequestField::kJson, "json"},
    {RequestField::kKeep, "keep"},
    {RequestField::kKeeplist, "keeplist"},
    {RequestField::kLlamaArgs, "llama_args"},
    {RequestField::kLlamaBin, "llama_bin"},
    {RequestField::kManifest, "manifest"},
    {RequestField::kManifestOut, "manifest_out"},
    {RequestField::kModel, "model"},
    {RequestField::kNCpuMoe, "n_cpu_moe"},
    {RequestField::kNeuronPlan, "neuron_plan"},
    {RequestField::kNoProvenance, "no_provenance"},
    {RequestField::kNoResume, "no_resume"},
    {RequestField::kOut, "out"},
    {RequestField::kOverhead, "overhead"},
    {RequestField::kParallel, "parallel"},
    {RequestField::kPrompts, "prompts"},
    {RequestField::kProtect, "protect"},
    {RequestField::kPrune, "prune"},
    {RequestField::kRatio, "ratio"},
    {RequestField::kReceipt, "receipt"},
    {RequestField::kReference, "reference"},
    {RequestField::kSamples, "samples"},
    {RequestField::kScoreAggregate, "score_aggregate"},
    {RequestField::kScoreField, "score_field"},
    {RequestField::kScores, "scores"},
    {RequestField::kSeed, "seed"},
    {RequestField::kServerTimeout, "server_timeout"},
    {RequestField::kSmokePrompt, "smoke_prompt"},
    {RequestField::kSmokeTokens, "smoke_tokens"},
    {RequestField::kSource, "source"},
    {RequestField::kSourceManifest, "source_manifest"},
    {RequestField::kSplitCount, "split_count"},
    {RequestField::kSplitMaxSize, "split_max_size"},
    {RequestField::kSplitMaxTensors, "split_max_tensors"},
    {RequestField::kStrict, "strict"},
    {RequestField::kSuperChannelRatio, "super_channel_ratio"},
    {RequestField::kSuperShare, "super_share"},
    {RequestField::kSvg, "svg"},
    {RequestField::kTemp, "temp"},
    {RequestField::kText, "text"},
    {RequestField::kThreads, "threads"},
    {RequestField::kTokens, "tokens"},
    {RequestField::kTp, "tp"},
};
static_assert(std::size(kFieldNames) == static_cast<size_t>(RequestField::kCount),
              "a RequestField has no name");
constexpr bool field_names_in_order() {
    for (size_t i = 0; i < std::size(kFieldNames); ++i)
        if (kFieldNames[i].first != static_cast<RequestField>(i)) return false;
    return true;
}
static_assert(field_names_in_order(), "kFieldNames is not in the enum's order");

}  // namespace

const char* field_name(RequestField f) {
    const auto i = static_cast<size_t>(f);
    return i < std::size(kFieldNames) ? kFieldNames[i].second : "?";
}

std::string render(const Message& m, const FieldSpelling& spell) {
    std::string s;
    for (const auto& p : m) s += p.field ? spelled(*p.field, spell) : p.text;
    return s;
}

std::string spelled(RequestField f, const FieldSpelling& spell) {
    return spell ? spell(f) : std::string(field_name(f));
}

InputError::InputError(std::string file, std::optional<uint64_t> offset, std::string field,
                       const Message& message)
    : Error(kExitBadInput, Message{input_message(file, offset, field, "")} + message),
      file_(std::move(file)),
      offset_(offset),
      field_(std::move(field)),
      detail_(render(message)) {}

IoError::IoError(const std::string& file, const std::string& operation, int errno_value)
    : Error(kExitIo, fmt::format("{}: {}: {}", file, operation, std::strerror(errno_value))),
      errno_(errno_value) {}

IoError::IoError(const std::string& file, const std::string& message)
    : Error(kExitIo, fmt::format("{}: {}", file, message)) {}

IoError::IoError(const std::string& file, const Message& message)
    : Error(kExitIo, Message{file + ": "} + message) {}

}  // namespace gguf_reap
