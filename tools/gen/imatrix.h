// Synthetic llama.cpp importance matrices for a model (any GGUF model, generated or real): exact
// integer routing counts per expert, per-channel energies, dead and super experts, in the GGUF format
// of llama-imatrix or one of the three generations of the legacy .dat writer (reference §3).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gguf_reap::gen {

struct ImatrixSpec {
    std::string model;
    std::string out;
    std::string format = "gguf";             // gguf | dat
    std::string dat_generation = "current";  // current | partial-skip | nan
    std::string domain = "synthetic";        // imatrix.datasets[0]; also skews expert popularity
    int64_t tokens = 16384;                  // tokens per domain; each is routed to expert_used_count experts
    int64_t chunk_size = 512;
    uint64_t seed = 42;
    std::vector<std::string> dead;  // "B:E" (also "B:E,B:E")
    int64_t dead_per_block = 0;
    std::vector<std::string> super;  // "B:E"
    bool no_nextn = false;           // leave the nextn (MTP) blocks out, as llama-imatrix never runs them
};

// Writes spec.out (temp name + rename) and returns the ground truth (--truth). Throws UsageError for
// bad arguments, InputError / IoError for the model.
nlohmann::ordered_json generate_imatrix(const ImatrixSpec& spec);

}  // namespace gguf_reap::gen
