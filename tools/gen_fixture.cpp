// gguf-reap-gen: synthetic MoE GGUF models of any shape and matching imatrix files, for tests and
// benchmarks (docs/fixture-generator.md).
//
//   gguf-reap-gen model   -o OUT [--preset tiny|demo|kimi-k3] [shape, type and tensor options]
//   gguf-reap-gen imatrix --model MODEL -o OUT [--format gguf|dat] [routing options]
//   gguf-reap-gen each FILE   (one of the above per line of FILE, in one process)
//
// Options only parse here; planning and writing live in tools/gen/. Exit codes as gguf-reap's: 0 ok,
// 2 bad arguments or input, 3 I/O, 130 interrupted.
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/options.h"
#include "gen/archs.h"
#include "gen/imatrix.h"
#include "gen/model.h"
#include "gguf_reap/error.h"
#include "io/output_file.h"
#include "io/signals.h"
#include "io/units.h"

namespace gguf_reap::gen {

namespace {

// Options whose value, when given, overrides the preset's default.
using Overrides = std::vector<std::function<void(ModelSpec&)>>;

template <typename T>
void bind_option(CLI::App* app, Overrides& ov, const std::string& flags, T ModelSpec::*field,
                 const std::string& desc) {
    auto store = std::make_shared<T>();
    CLI::Option* o = app->add_option(flags, *store, desc);
    ov.push_back([o, store, field](ModelSpec& s) {
        if (o->count() == 0) return;
        s.*field = *store;
        s.given.insert(o->get_name());
    });
}

void bind_flag(CLI::App* app, Overrides& ov, const std::string& flags, bool ModelSpec::*field,
               const std::string& desc) {
    auto store = std::make_shared<bool>(false);
    CLI::Option* o = app->add_flag(flags, *store, desc);
    ov.push_back([o, store, field](ModelSpec& s) {
        if (o->count() == 0) return;
        s.*field = *store;
        s.given.insert(o->get_name());
    });
}

void write_json(const std::string& path, const nlohmann::ordered_json& doc) {
    const std::string text = doc.dump(1) + "\n";
    OutputFile f(path);
    f.write_at(0, text.data(), text.size());
    f.commit();
}

struct ModelCommand {
    std::string out;
    std::string preset = "tiny";
    int64_t shards = 1;
    int64_t alignment = 0;
    std::string truth;
    bool dry_run = false;
    bool list_archs = false;
    std::vector<std::string> set_keys;
    Overrides overrides;
    CLI::Option* alignment_opt = nullptr;

    void add(CLI::App& app) {
        CLI::App* c = app.add_subcommand("model", "Write a synthetic MoE model (one file or --shards N)");
        c->add_option("-o,--output", out,
                      "Output .gguf path; with --shards N > 1 a prefix for "
                      "OUT-0000i-of-0000N.gguf");
        c->add_flag("--list-archs", list_archs,
                    "Print the architectures --arch takes, one per line, and exit");
        c->add_option("--preset", preset, "Defaults for every other option: tiny (default), demo, kimi-k3");
        c->add_option("--shards", shards, "Number of shards, balanced by bytes (default 1)");
        c->add_option("--truth", truth, "Also write the model's shape as JSON to this file");
        c->add_flag("--dry-run", dry_run, "Print the plan (files, sizes) and write nothing");
        Overrides& ov = overrides;
        bind_option(c, ov, "--arch", &ModelSpec::arch, "general.architecture (default deepseek2)");
        bind_flag(
            c, ov, "--skeleton", &ModelSpec::skeleton,
            "gguf-reap's test layout instead of --arch's llama.cpp one: every optional expert tensor in any "
            "combination; llama.cpp does not load it");
        bind_option(c, ov, "--name", &ModelSpec::name, "general.name");
        bind_option(c, ov, "--seed", &ModelSpec::seed, "Seed of the tensor data (default 42)");
        bind_option(c, ov, "--blocks", &ModelSpec::blocks, "Blocks, dense ones included, nextn excluded");
        bind_option(c, ov, "--dense-blocks", &ModelSpec::dense_blocks,
                    "Leading dense blocks (leading_dense_block_count)");
        bind_option(c, ov, "--experts", &ModelSpec::experts,
                    "Routed experts per MoE block (0: a dense model)");
        bind_option(c, ov, "--used", &ModelSpec::used, "expert_used_count");
        bind_option(c, ov, "--shared", &ModelSpec::shared, "Shared experts (0: no *_shexp tensors)");
        bind_option(c, ov, "--groups", &ModelSpec::groups, "expert_group_count (written when > 1)");
        bind_option(c, ov, "--group-used", &ModelSpec::group_used, "expert_group_used_count");
        bind_option(c, ov, "--nextn", &ModelSpec::nextn,
                    "Extra MTP (nextn) blocks with routed experts after the last");
        bind_option(c, ov, "--embd", &ModelSpec::embd, "embedding_length");
        bind_option(c, ov, "--ff", &ModelSpec::ff, "feed_forward_length (dense blocks)");
        bind_option(c, ov, "--expert-ff", &ModelSpec::expert_ff, "expert_feed_forward_length");
        bind_option(c, ov, "--vocab", &ModelSpec::vocab, "Vocabulary size");
        bind_option(c, ov, "--heads", &ModelSpec::heads, "attention.head_count");
        bind_flag(c, ov, "--probs-bias", &ModelSpec::probs_bias, "Add blk.N.exp_probs_b.bias [E]");
        bind_flag(c, ov, "--router-bias", &ModelSpec::router_bias, "Add blk.N.ffn_gate_inp.bias [E]");
        bind_flag(c, ov, "--exps-bias", &ModelSpec::exps_bias, "Add gpt-oss style ffn_*_exps.bias [n, E]");
        bind_flag(c, ov, "--scales", &ModelSpec::scales, "Add per-expert ffn_*_exps.scale [E]");
        bind_flag(c, ov, "--fused-gate-up", &ModelSpec::fused_gate_up,
                  "ffn_gate_up_exps instead of gate and up");
        bind_flag(c, ov, "--tied", &ModelSpec::tied, "No output.weight (tied embeddings)");
        bind_option(c, ov, "--type-exps", &ModelSpec::type_exps,
                    "Type of the gate/up expert weights (e.g. Q4_K)");
        bind_option(c, ov, "--type-down", &ModelSpec::type_down,
                    "Type of ffn_down_exps (default: --type-exps)");
        bind_option(c, ov, "--type-attn", &ModelSpec::type_attn, "Type of the attention weights");
        bind_option(c, ov, "--type-embd", &ModelSpec::type_embd, "Type of token_embd");
        bind_option(c, ov, "--type-output", &ModelSpec::type_output, "Type of output");
        bind_option(c, ov, "--type-shexp", &ModelSpec::type_shexp, "Type of the shared experts");
        bind_option(c, ov, "--type-dense", &ModelSpec::type_dense, "Type of the dense blocks' FFN");
        bind_option(c, ov, "--type-router", &ModelSpec::type_router, "Type of ffn_gate_inp (default F32)");
        bind_option(c, ov, "--filler", &ModelSpec::filler,
                    "Extra 1-element F32 tensors filler.N.weight (large tensor counts)");
        alignment_opt = c->add_option("--alignment", alignment, "Write general.alignment (a power of two)");
        c->add_option(
            "--set-key", set_keys,
            "KEY=VALUE: after the preset is laid out, change one of its integer keys (KEY=V), an "
            "integer array (KEY=V1,V2,...), or remove it (KEY=); the type stays the key's own. "
            "Repeatable. The differential test against llama.cpp's loader changes one key this way");
        sub = c;
    }

    int run() const {
        if (list_archs) {
            for (const ArchPreset& a : arch_presets()) std::cout << a.name << "\n";
            return kExitOk;
        }
        if (out.empty()) throw UsageError("model: -o/--output is required");
        ModelSpec spec = preset_spec(preset);
        for (const auto& apply : overrides) apply(spec);
        if (alignment_opt->count() > 0) {
            if (alignment <= 0 || alignment > (int64_t{1} << 31))
                throw UsageError(fmt::format("--alignment {}: must be a power of two up to 2^31", alignment));
            spec.alignment = static_cast<uint32_t>(alignment);
        }
        ModelPlan plan = plan_model(spec);
        for (const std::string& assignment : set_keys) set_key(plan.kvs, spec.arch, assignment);
        const std::vector<ShardPlan> files = plan_shards(plan, out, shards);
        uint64_t total = 0;
        for (const ShardPlan& sp : files) total += sp.file_size;
        if (!dry_run) write_model(plan, files);
        if (!truth.empty()) write_json(truth, model_truth(plan, files));
        for (const ShardPlan& sp : files)
            std::cout << fmt::format("{} {} ({} tensors, {} bytes)\n", dry_run ? "would write" : "wrote",
                                     sp.path, sp.tensors.size(), with_commas(sp.file_size));
        std::cout << fmt::format("{} blocks ({} MoE × {} experts), {} tensors, {} ({} bytes)\n",
                                 spec.blocks + spec.nextn, plan.moe_blocks.size(), spec.experts,
                                 plan.tensors.size(), human_bytes(total), with_commas(total));
        return kExitOk;
    }

    CLI::App* sub = nullptr;
};

struct ImatrixCommand {
    ImatrixSpec spec;
    std::string truth;

    void add(CLI::App& app) {
        CLI::App* c = app.add_subcommand("imatrix", "Write a synthetic llama.cpp imatrix for a model");
        c->add_option("--model", spec.model, "The model (any shard of a split model)")->required();
        c->add_option("-o,--output", spec.out, "Output path")->required();
        c->add_option("--format", spec.format, "gguf (default, llama-imatrix's) or dat (legacy)");
        c->add_option("--dat-generation", spec.dat_generation,
                      "Legacy writer to imitate: current (default), partial-skip (2024-25), nan (pre-2024)");
        c->add_option("--tokens", spec.tokens,
                      "Tokens in the domain (default 16384); each routes to "
                      "expert_used_count experts");
        c->add_option("--chunk-size", spec.chunk_size, "Tokens per chunk (default 512)");
        c->add_option("--domain", spec.domain,
                      "Dataset name; also skews expert popularity (default synthetic)");
        c->add_option("--seed", spec.seed, "Seed (default 42)");
        c->add_option("--dead", spec.dead, "Dead experts B:E[,B:E...] (never routed)");
        c->add_option("--dead-per-block", spec.dead_per_block, "K random dead experts in every MoE block");
        c->add_option("--super", spec.super, "Super experts B:E[,B:E...] (routed often, huge down energy)");
        c->add_flag("--no-nextn", spec.no_nextn, "Leave out the nextn (MTP) blocks, as llama-imatrix does");
        c->add_option("--truth", truth,
                      "Also write the ground truth (counts, dead, super, energies) as JSON");
        sub = c;
    }

    int run() const {
        const nlohmann::ordered_json t = generate_imatrix(spec);
        if (!truth.empty()) write_json(truth, t);
        std::cout << fmt::format("wrote {} ({} {}, {} entries, {} MoE blocks, {} tokens)\n", spec.out,
                                 spec.format, spec.format == "dat" ? spec.dat_generation : "imatrix",
                                 t["entries"].size(), t["blocks"].size(), spec.tokens);
        return kExitOk;
    }

    CLI::App* sub = nullptr;
};

int run_one(int argc, char** argv) {
    CLI::App app{"gguf-reap-gen: synthetic MoE GGUF models and imatrix files for tests and benchmarks.",
                 "gguf-reap-gen"};
    app.require_subcommand(1);
    ModelCommand model;
    ImatrixCommand imatrix;
    model.add(app);
    imatrix.add(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, to stdout
        std::cerr << "gguf-reap-gen: error: " << e.what() << "\n";
        std::cerr << "Run 'gguf-reap-gen --help' for usage.\n";
        return kExitBadInput;
    }
    install_signal_handlers();
    try {
        return model.sub->parsed() ? model.run() : imatrix.run();
    } catch (const Error& e) {
        std::fflush(stdout);
        // The library's messages name request fields; spelled as gguf-reap's options, as gguf-reap prints
        // them.
        std::cerr << "gguf-reap-gen: error: "
                  << (e.message().empty() ? e.what() : cli::option_message(e.message())) << "\n";
        return e.exit_code();
    } catch (const std::bad_alloc&) {
        std::cerr << "gguf-reap-gen: error: out of memory\n";
        return kExitIo;
    } catch (const std::exception& e) {
        std::cerr << "gguf-reap-gen: error: internal error: " << e.what() << "\n";
        return kExitIo;
    }
}

// `each FILE`: a model or imatrix command per line of FILE (its words split at spaces, no quoting), run
// one after another in this process; a line that fails is named on stderr and the rest still run. For
// tests that make thousands of small files (test_loader_verdicts), where starting a process per file
// cost more than writing it. A failed line leaves no file under its name, as a failed run does. Exit:
// the first failed line's code, else 0.
int run_each(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        std::cerr << "gguf-reap-gen: error: " << path << ": cannot open\n";
        return kExitBadInput;
    }
    int first_failure = kExitOk;
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n) {
        std::istringstream words(line);
        std::vector<std::string> args{"gguf-reap-gen"};
        for (std::string w; words >> w;) args.push_back(w);
        if (args.size() == 1) continue;
        int code = kExitBadInput;
        if (args[1] == "each") {
            std::cerr << "gguf-reap-gen: error: " << path << ": line " << n << ": each cannot nest\n";
        } else {
            std::vector<char*> argv;
            for (std::string& a : args) argv.push_back(a.data());
            code = run_one(static_cast<int>(argv.size()), argv.data());
        }
        if (code == kExitInterrupted) return code;
        if (code != kExitOk) {
            std::cerr << "gguf-reap-gen: " << path << ": line " << n << " exited " << code << "\n";
            if (first_failure == kExitOk) first_failure = code;
        }
    }
    return first_failure;
}

int run(int argc, char** argv) {
    if (argc >= 2 && std::string_view(argv[1]) == "each") {
        if (argc != 3) {
            std::cerr << "gguf-reap-gen: error: usage: gguf-reap-gen each FILE\n";
            return kExitBadInput;
        }
        return run_each(argv[2]);
    }
    return run_one(argc, argv);
}

}  // namespace

}  // namespace gguf_reap::gen

int main(int argc, char** argv) {
    return gguf_reap::gen::run(argc, argv);
}
