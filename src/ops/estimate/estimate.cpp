// estimate: one `gguf-reap estimate`. The figures are services/model_figures.cpp's, which the budget
// search and the card share.
#include "gguf_reap/estimate.h"

#include "model/shard_set.h"
#include "services/model_figures.h"

namespace gguf_reap::ops {

EstimateResult estimate(const EstimateRequest& inputs) {
    const ShardSet model = ShardSet::open(inputs.model);
    return estimate_model(model, inputs);
}

}  // namespace gguf_reap::ops
