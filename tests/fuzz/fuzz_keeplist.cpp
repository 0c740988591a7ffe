// libFuzzer target: keeplist JSON. Any text either parses or raises InputError; a parsed keeplist is
// checked against a small fixed MoE layout, where a refusal (InputError for a keeplist of another
// layout, UsageError for a plan the layout cannot take) is the only allowed failure, and a keeplist
// that passes must survive a serialise → parse round trip unchanged (that is how `rank`
// hands keeplists to `splice` and `audit`).
#include <cstdint>
#include <string>

#include "gguf_reap/error.h"
#include "gguf_reap/keeplist.h"
#include "model/moe_layout.h"

using namespace gguf_reap;

namespace {

// blk.1..blk.3 with 16 experts, 4 used: the shape of ../shared/fixtures' tiny-deepseek2.
MoeLayout make_layout(uint64_t groups) {
    MoeLayout L;
    L.arch = "deepseek2";
    L.expert_count = 16;
    L.expert_used_count = 4;
    L.expert_group_count = groups;
    for (int b = 1; b <= 3; ++b) {
        MoeBlock block;
        block.block = b;
        L.blocks.push_back(block);
    }
    return L;
}

void check_round_trip(const KeepList& kl) {
    const KeepList again = KeepList::parse(kl.to_json().dump(), "roundtrip.json");
    if (again.n_keep != kl.n_keep || again.blocks.size() != kl.blocks.size()) __builtin_trap();
    for (size_t i = 0; i < kl.blocks.size(); ++i)
        if (again.blocks[i].block != kl.blocks[i].block || again.blocks[i].keep != kl.blocks[i].keep ||
            again.blocks[i].prune != kl.blocks[i].prune)
            __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    KeepList kl;
    try {
        kl = KeepList::parse(text, "fuzz.json");
    } catch (const InputError&) {
        return 0;
    }
    for (const uint64_t groups : {uint64_t{0}, uint64_t{4}}) {
        KeepList copy = kl;
        try {
            validate_keeplist(copy, make_layout(groups), "fuzz.json");
        } catch (const InputError&) {
            continue;
        } catch (const UsageError&) {
            continue;
        }
        check_round_trip(copy);
    }
    return 0;
}
