// estimate --sweep --svg: the sweep as a plot, size on disk and per-GPU memory against K, with
// horizontal lines at the --gpu-mem and --fit budgets (docs/estimate.md, "The plots"). Hand-written SVG
// 1.1: one <g class="series"> per curve, one <circle data-k=K data-bytes=B> per point; the source (K =
// every expert) as <g class="source">, --fit's K as <g class="chosen">.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "services/budget_search.h"

namespace gguf_reap {

struct SweepLine {
    std::string label;  // "--gpu-mem 141 GiB"
    uint64_t bytes = 0;
};

struct SweepPlot {
    std::string title;
    std::vector<uint64_t> tp;
    std::vector<SweepLine> lines;
    int64_t expert_count = 0;        // the source keeps every expert: K = expert_count
    uint64_t source_bytes = 0;       // its size on disk
    std::optional<int64_t> chosen;   // --fit's K
    std::string chosen_label;        // "--fit size=277GB"
    uint64_t ctx = 0, overhead = 0;  // what each per-GPU point counts besides the weights
};

std::string render_sweep_svg(const SweepPlot& plot, const std::vector<SweepRow>& rows);
// Writes `text` to `path` atomically (io/output_file). Throws IoError.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace gguf_reap
