#include "gguf_reap/error.h"

#include <cstring>
#include <string>

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

const char* field_name(RequestField f) {
    switch (f) {
        case RequestField::kBaseModel:
            return "base_model";
        case RequestField::kCacheDir:
            return "cache_dir";
        case RequestField::kCalibration:
            return "calibration";
        case RequestField::kChat:
            return "chat";
        case RequestField::kChunks:
            return "chunks";
        case RequestField::kConsensus:
            return "consensus";
        case RequestField::kCriterion:
            return "criterion";
        case RequestField::kCtx:
            return "ctx";
        case RequestField::kDropMtp:
            return "drop_mtp";
        case RequestField::kDryRun:
            return "dry_run";
        case RequestField::kExport:
            return "export";
        case RequestField::kFit:
            return "fit";
        case RequestField::kForce:
            return "force";
        case RequestField::kFromPlan:
            return "from_plan";
        case RequestField::kGenTokens:
            return "gen_tokens";
        case RequestField::kGpuMem:
            return "gpu_mem";
        case RequestField::kGranularity:
            return "granularity";
        case RequestField::kHfRepo:
            return "hf_repo";
        case RequestField::kImatrix:
            return "imatrix";
        case RequestField::kImatrixIn:
            return "imatrix_in";
        case RequestField::kImatrixOut:
            return "imatrix_out";
        case RequestField::kJson:
            return "json";
        case RequestField::kKeep:
            return "keep";
        case RequestField::kKeeplist:
            return "keeplist";
        case RequestField::kLlamaArgs:
            return "llama_args";
        case RequestField::kLlamaBin:
            return "llama_bin";
        case RequestField::kManifest:
            return "manifest";
        case RequestField::kManifestOut:
            return "manifest_out";
        case RequestField::kModel:
            return "model";
        case RequestField::kNCpuMoe:
            return "n_cpu_moe";
        case RequestField::kNeuronPlan:
            return "neuron_plan";
        case RequestField::kNoProvenance:
            return "no_provenance";
        case RequestField::kNoResume:
            return "no_resume";
        case RequestField::kOut:
            return "out";
        case RequestField::kOverhead:
            return "overhead";
        case RequestField::kParallel:
            return "parallel";
        case RequestField::kPrompts:
            return "prompts";
        case RequestField::kProtect:
            return "protect";
        case RequestField::kPrune:
            return "prune";
        case RequestField::kRatio:
            return "ratio";
        case RequestField::kReceipt:
            return "receipt";
        case RequestField::kReference:
            return "reference";
        case RequestField::kSamples:
            return "samples";
        case RequestField::kScoreAggregate:
            return "score_aggregate";
        case RequestField::kScoreField:
            return "score_field";
        case RequestField::kScores:
            return "scores";
        case RequestField::kSeed:
            return "seed";
        case RequestField::kServerTimeout:
            return "server_timeout";
        case RequestField::kSmokePrompt:
            return "smoke_prompt";
        case RequestField::kSmokeTokens:
            return "smoke_tokens";
        case RequestField::kSource:
            return "source";
        case RequestField::kSourceManifest:
            return "source_manifest";
        case RequestField::kSplitCount:
            return "split_count";
        case RequestField::kSplitMaxSize:
            return "split_max_size";
        case RequestField::kSplitMaxTensors:
            return "split_max_tensors";
        case RequestField::kStrict:
            return "strict";
        case RequestField::kSuperChannelRatio:
            return "super_channel_ratio";
        case RequestField::kSuperShare:
            return "super_share";
        case RequestField::kSvg:
            return "svg";
        case RequestField::kTemp:
            return "temp";
        case RequestField::kText:
            return "text";
        case RequestField::kThreads:
            return "threads";
        case RequestField::kTokens:
            return "tokens";
        case RequestField::kTp:
            return "tp";
        case RequestField::kCount:
            break;
    }
    return "?";
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
