// What a result's handle (include/gguf_reap/opened.h) holds: whatever its command opened or planned,
// kept alive for the reports printed from it (cli/inspect.cpp, cli/splice.cpp) and for the steps after
// it (rank's --fit search). Each command fills only its own members; the others stay empty.
//
// The plan borrows the model and the imatrix (SplicePlan::sources), so an Opened is built in place,
// behind its shared_ptr, and never copied or moved.
#pragma once

#include <optional>

#include "format/imatrix.h"
#include "model/shard_set.h"
#include "services/budget_search.h"
#include "services/splice_plan.h"

namespace gguf_reap {

struct Opened {
    std::optional<ShardSet> model;       // inspect, splice: the model, as opened
    std::optional<ImatrixFile> imatrix;  // inspect: the imatrix; splice: --imatrix-in
    std::optional<SplicePlan> plan;      // splice: every output file's exact bytes (borrows the two above)
    std::optional<BudgetModel> budget;   // rank --fit: the model's headers for the budget search

    Opened() = default;
    Opened(const Opened&) = delete;
    Opened& operator=(const Opened&) = delete;
};

}  // namespace gguf_reap
