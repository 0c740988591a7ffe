// estimate --sweep --svg: the sweep as a plot, size on disk and per-GPU memory against K, with
// horizontal lines at the --gpu-mem and --fit budgets (docs/estimate.md, "--sweep"). Hand-written SVG
// 1.1: one <g class="series"> per curve, one <circle data-k=K data-bytes=B> per point.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/budget.h"

namespace gguf_reap {

struct SweepLine {
    std::string label;  // "--gpu-mem 141 GiB"
    uint64_t bytes = 0;
};

std::string render_sweep_svg(const std::string& title, const std::vector<SweepRow>& rows,
                             const std::vector<uint64_t>& tp, const std::vector<SweepLine>& lines);
// Writes `text` to `path` atomically (io/output_file). Throws IoError.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace gguf_reap
