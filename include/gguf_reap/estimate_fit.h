// estimate --fit / --sweep (docs/estimate.md): the K a budget allows and the table of sizes over K,
// without ranking. Headers only; with --imatrix the dead experts (rank's rule) bound K.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "gguf_reap/budget.h"
#include "gguf_reap/estimate.h"

namespace gguf_reap {

struct EstimateFitRequest {
    // The fields its messages name (gguf_reap/error.h), in the order of the members they stand for.
    static constexpr RequestField kSvg{"svg"};
    std::string model;
    std::string neuron_plan;
    bool drop_mtp = false;
    std::vector<std::string> imatrices;  // NAME=FILE or FILE: the dead experts bound K
    std::optional<Budget> fit;
    bool sweep = false;
    Deployment deployment;  // the sweep's per-GPU columns (tp), ctx, overhead and gpu_mem
    std::string svg;        // --svg: where the plot goes ("" = none)
    std::string tool_version;
};

struct EstimateFitResult {
    std::string model_path, arch;
    int64_t expert_count = 0;
    KeepRules rules;
    std::optional<int64_t> dead_only;  // with --imatrix: the most experts that prune only dead ones
    std::optional<FitAnswer> fit;
    std::vector<uint64_t> tp;
    std::vector<SweepRow> sweep;
    // The answer is made but --svg could not be written (a full disk): the caller prints the answer,
    // then rethrows this (exit 3).
    std::exception_ptr write_error;
};

namespace ops {
// Reads the headers (and the imatrices' counts), answers --fit, computes the sweep and writes the SVG.
// Throws UsageError / InputError / IoError.
EstimateFitResult estimate_fit(const EstimateFitRequest& request);
}  // namespace ops

}  // namespace gguf_reap
