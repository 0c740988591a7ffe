#include "cli/options.h"

namespace gguf_reap::cli {

std::string option_spelling(RequestField f) {
    switch (f) {
        case RequestField::kBaseModel:
            return "--base-model";
        case RequestField::kCacheDir:
            return "--cache-dir";
        case RequestField::kCalibration:
            return "--calibration";
        case RequestField::kChat:
            return "--chat";
        case RequestField::kChunks:
            return "--chunks";
        case RequestField::kConsensus:
            return "--consensus";
        case RequestField::kCriterion:
            return "--criterion";
        case RequestField::kCtx:
            return "--ctx";
        case RequestField::kDropMtp:
            return "--drop-mtp";
        case RequestField::kDryRun:
            return "--dry-run";
        case RequestField::kExport:
            return "--export";
        case RequestField::kFit:
            return "--fit";
        case RequestField::kForce:
            return "--force";
        case RequestField::kFromPlan:
            return "--from-plan";
        case RequestField::kGenTokens:
            return "--gen-tokens";
        case RequestField::kGpuMem:
            return "--gpu-mem";
        case RequestField::kGranularity:
            return "--granularity";
        case RequestField::kHfRepo:
            return "--hf-repo";
        case RequestField::kImatrix:
            return "--imatrix";
        case RequestField::kImatrixIn:
            return "--imatrix-in";
        case RequestField::kImatrixOut:
            return "--imatrix-out";
        case RequestField::kJson:
            return "--json";
        case RequestField::kKeep:
            return "--keep";
        case RequestField::kKeeplist:
            return "--keeplist";
        case RequestField::kLlamaArgs:
            return "--llama-args";
        case RequestField::kLlamaBin:
            return "--llama-bin";
        case RequestField::kManifest:
            return "--manifest";
        case RequestField::kManifestOut:
            return "--manifest-out";
        case RequestField::kModel:
            return "--model";
        case RequestField::kNCpuMoe:
            return "--n-cpu-moe";
        case RequestField::kNeuronPlan:
            return "--neuron-plan";
        case RequestField::kNoProvenance:
            return "--no-provenance";
        case RequestField::kNoResume:
            return "--no-resume";
        case RequestField::kOverhead:
            return "--overhead";
        case RequestField::kParallel:
            return "--parallel";
        case RequestField::kPrompts:
            return "--prompts";
        case RequestField::kProtect:
            return "--protect";
        case RequestField::kPrune:
            return "--prune";
        case RequestField::kRatio:
            return "--ratio";
        case RequestField::kReceipt:
            return "--receipt";
        case RequestField::kReference:
            return "--reference";
        case RequestField::kScoreAggregate:
            return "--score-aggregate";
        case RequestField::kScoreField:
            return "--score-field";
        case RequestField::kScores:
            return "--scores";
        case RequestField::kServerTimeout:
            return "--server-timeout";
        case RequestField::kSmokePrompt:
            return "--smoke-prompt";
        case RequestField::kSmokeTokens:
            return "--smoke-tokens";
        case RequestField::kSource:
            return "--source";
        case RequestField::kSourceManifest:
            return "--source-manifest";
        case RequestField::kSplitCount:
            return "--split-count";
        case RequestField::kSplitMaxSize:
            return "--split-max-size";
        case RequestField::kSplitMaxTensors:
            return "--split-max-tensors";
        case RequestField::kStrict:
            return "--strict";
        case RequestField::kSuperChannelRatio:
            return "--super-channel-ratio";
        case RequestField::kSuperShare:
            return "--super-share";
        case RequestField::kSvg:
            return "--svg";
        case RequestField::kText:
            return "--text";
        case RequestField::kThreads:
            return "--threads";
        case RequestField::kTokens:
            return "--tokens";
        case RequestField::kTp:
            return "--tp";
        case RequestField::kCount:
            break;
    }
    return field_name(f);
}

std::string option_message(const Message& m) {
    return render(m, option_spelling);
}

}  // namespace gguf_reap::cli
