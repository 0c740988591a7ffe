// libFuzzer target: other tools' keep plans (gguf_reap/plan_interchange.h). Any text either parses or
// raises InputError; a parsed plan has ascending, unique, equally long rows, and survives export as a
// keep map and parsing again unchanged.
#include <algorithm>
#include <cstdint>
#include <string>

#include "gguf_reap/error.h"
#include "gguf_reap/keeplist.h"
#include "gguf_reap/plan_interchange.h"

using namespace gguf_reap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    ExternalPlan p;
    try {
        p = parse_external_plan(text, "fuzz.json");
    } catch (const InputError&) {
        return 0;
    }
    KeepList kl;
    kl.n_keep = p.n_keep;
    int64_t top = 0;
    for (const auto& [layer, row] : p.keep) {
        if (row.size() != p.n_keep || row.empty()) __builtin_trap();
        for (size_t i = 1; i < row.size(); ++i)
            if (row[i] <= row[i - 1]) __builtin_trap();
        KeepBlock b;
        b.block = layer;
        b.keep = row;
        kl.blocks.push_back(b);
        top = std::max(top, row.back());
    }
    const uint64_t experts = p.original_experts.value_or(static_cast<uint64_t>(top) + 1);
    const ExternalPlan again =
        parse_external_plan(export_plan(PlanFormat::kKeepmap, kl, 0, experts, ""), "again");
    if (again.keep != p.keep) __builtin_trap();
    return 0;
}
