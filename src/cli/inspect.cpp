// gguf-reap inspect PATH [--json] [--tensors]: what a model or an imatrix file holds.
#include <algorithm>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/render.h"
#include "format/ggml_types.h"
#include "format/gguf.h"
#include "format/imatrix.h"
#include "gguf_reap/error.h"
#include "gguf_reap/inspect.h"
#include "io/units.h"
#include "model/shard_set.h"
#include "model/tensor_table.h"
#include "services/opened.h"

namespace gguf_reap::cli {

namespace {

struct InspectOptions {
    std::string path;
    bool json = false;
    bool tensors = false;
};

// Each shard's file and header figures, with its split.* keys.
nlohmann::ordered_json shards_json(const ShardSet& model) {
    using nlohmann::ordered_json;
    ordered_json shards = ordered_json::array();
    for (const Shard& sh : model.shards()) {
        ordered_json o;
        o["path"] = sh.path;
        o["file_size"] = sh.file->size();
        o["tensor_count"] = sh.header.tensors.size();
        o["kv_count"] = sh.header.kvs.size();
        o["alignment"] = sh.header.alignment;
        o["data_start"] = sh.header.data_start;
        ordered_json split = ordered_json::object();
        for (const char* k : kSplitKeys)
            if (const Kv* kv = sh.header.find(k)) split[k] = kv_json(*kv);
        o["split_kv"] = split;
        shards.push_back(o);
    }
    return shards;
}

// The MoE blocks, their expert tensors and slabs; null for a dense model.
nlohmann::ordered_json moe_json(const ModelSummary& s) {
    using nlohmann::ordered_json;
    if (s.moe.blocks.empty()) return nullptr;
    ordered_json m;
    m["blocks"] = s.moe.blocks.size();
    m["experts"] = s.moe.expert_count;
    m["used"] = s.moe.expert_used_count;
    m["shared"] = s.moe.expert_shared_count;
    m["groups"] = s.moe.expert_group_count;
    m["groups_used"] = s.moe.expert_group_used_count;
    ordered_json per = ordered_json::array();
    for (const auto& b : s.moe.blocks) {
        ordered_json t = ordered_json::array();
        for (const auto& et : b.tensors)
            t.push_back({{"name", et.name},
                         {"role", expert_kind_label(*et.kind)},
                         {"axis", et.axis()},
                         {"slab", et.slab}});
        per.push_back({{"block", b.block}, {"slab_bytes", b.slab_bytes}, {"tensors", t}});
    }
    m["per_block"] = per;
    m["expert_tensor_bytes"] = s.expert_bytes;
    m["expert_share_of_file"] =
        s.file_bytes ? static_cast<double>(s.expert_bytes) / static_cast<double>(s.file_bytes) : 0.0;
    return m;
}

nlohmann::ordered_json model_json(const ShardSet& model, const ModelSummary& s, bool with_tensors) {
    using nlohmann::ordered_json;
    const Header& meta = model.metadata();
    ordered_json j;
    j["kind"] = "model";
    j["path"] = model.shards().front().path;
    j["arch"] = s.arch;
    j["version"] = meta.version;
    j["file_size"] = s.file_bytes;
    j["tensor_count"] = s.tensor_count;
    j["kv_count"] = meta.kvs.size();
    j["alignment"] = meta.alignment;
    j["parameters"] = s.parameters;
    j["tensor_bytes"] = s.tensor_bytes;

    j["shards"] = shards_json(model);

    const auto arch_u = [&](const char* suffix) -> ordered_json {
        auto v = model.arch_uint(suffix);
        return v ? ordered_json(*v) : ordered_json(nullptr);
    };
    j["n_layers"] = arch_u("block_count");
    ordered_json moe_layers = ordered_json::array();
    for (const auto& b : s.moe.blocks) moe_layers.push_back(b.block);
    j["moe_layers"] = moe_layers;
    for (const char* k : {"leading_dense_block_count", "expert_count", "expert_used_count",
                          "expert_shared_count", "expert_feed_forward_length", "embedding_length"})
        j[k] = arch_u(k);
    ordered_json vocab = arch_u("vocab_size");
    if (vocab.is_null())
        if (const Kv* t = model.find_kv("tokenizer.ggml.tokens"); t && t->type == GgufType::kArray)
            vocab = t->count;
    j["vocab_size"] = vocab;

    std::map<std::string, uint64_t> hist;
    for (const auto& r : model.tensors()) ++hist[ggml_type_display(model.info(r).type)];
    j["tensor_type_histogram"] = hist;

    ordered_json kv = ordered_json::object();
    for (const Kv& k : meta.kvs) kv[k.key] = kv_json(k);
    j["kv"] = kv;

    ordered_json rows = ordered_json::array();
    for (const auto& r : s.rows)
        rows.push_back({{"class", r.tensor_class},
                        {"type", ggml_type_display(r.type)},
                        {"tensors", r.tensors},
                        {"elements", r.elements},
                        {"bytes", r.bytes},
                        {"bpw", r.bpw()}});
    j["classes"] = rows;

    j["moe"] = moe_json(s);
    j["decode_bytes_per_token"] = {
        {"dense", s.decode.dense_bytes},          {"router", s.decode.router_bytes},
        {"experts", s.decode.expert_bytes},       {"total", s.decode.total()},
        {"nextn_excluded", s.decode.nextn_bytes}, {"tied_embeddings", s.tied_embeddings}};
    if (with_tensors) {
        ordered_json ts = ordered_json::array();
        for (const auto& r : model.tensors()) {
            const TensorInfo& t = model.info(r);
            ordered_json ne = ordered_json::array();
            for (uint32_t d = 0; d < t.n_dims; ++d) ne.push_back(t.ne[d]);
            ts.push_back({{"name", t.name},
                          {"type", ggml_type_display(t.type)},
                          {"ne", ne},
                          {"shard", r.shard},
                          {"offset", r.abs_offset},
                          {"nbytes", t.nbytes}});
        }
        j["tensors"] = ts;
    }
    return j;
}

void model_text(const ShardSet& model, const ModelSummary& s, bool with_tensors) {
    const Header& meta = model.metadata();
    std::cout << fmt::format("model        {}\n", model.shards().front().path);
    std::cout << fmt::format("architecture {} (GGUF v{}, alignment {})\n", s.arch.empty() ? "(none)" : s.arch,
                             meta.version, meta.alignment);
    std::cout << fmt::format("shards       {} ({} in all)\n", model.shards().size(),
                             human_bytes(s.file_bytes));
    if (model.is_split())
        for (const Shard& sh : model.shards())
            std::cout << fmt::format("  {}  {} tensors  {}\n", sh.path, sh.header.tensors.size(),
                                     human_bytes(sh.file->size()));
    std::cout << fmt::format("tensors      {} ({} of data), {} key/value pairs\n",
                             with_commas(s.tensor_count), human_bytes(s.tensor_bytes), meta.kvs.size());
    std::cout << fmt::format("parameters   {}\n", human_count(s.parameters));
    std::cout << "\nby tensor class and type\n";
    std::cout << fmt::format("  {:<28} {:<8} {:>7} {:>8} {:>11}\n", "class", "type", "tensors", "bpw",
                             "bytes");
    for (const auto& r : s.rows)
        std::cout << fmt::format("  {:<28} {:<8} {:>7} {:>8.2f} {:>11}\n", r.tensor_class,
                                 ggml_type_display(r.type), r.tensors, r.bpw(), human_bytes(r.bytes));
    if (!s.moe.blocks.empty()) {
        const auto& m = s.moe;
        std::cout << "\nmixture of experts\n";
        std::cout << fmt::format("  MoE blocks   {} (blk.{}..blk.{})\n", m.blocks.size(),
                                 m.blocks.front().block, m.blocks.back().block);
        std::cout << fmt::format("  experts      {} per block, {} used per token, {} shared\n",
                                 m.expert_count, m.expert_used_count, m.expert_shared_count);
        if (m.expert_group_count > 1)
            std::cout << fmt::format("  groups       {} ({} used per token)\n", m.expert_group_count,
                                     m.expert_group_used_count);
        else
            std::cout << "  groups       none (routing is not group-limited)\n";
        // Quant mixes can give blocks different slab sizes (Q4_K_M: some ffn_down_exps are Q6_K).
        uint64_t lo = m.blocks.front().slab_bytes, hi = lo;
        for (const auto& b : m.blocks) {
            lo = std::min(lo, b.slab_bytes);
            hi = std::max(hi, b.slab_bytes);
        }
        std::cout << fmt::format("  expert slab  {} per expert per block (gate/up/down weights)\n",
                                 lo == hi ? human_bytes(lo) : human_bytes(lo) + " to " + human_bytes(hi));
        std::cout << fmt::format(
            "  experts hold {} = {:.1f} % of the file\n", human_bytes(s.expert_bytes),
            s.file_bytes ? 100.0 * static_cast<double>(s.expert_bytes) / static_cast<double>(s.file_bytes)
                         : 0.0);
    }
    std::cout << fmt::format("\ndecode reads {} per token (dense {} + router {} + experts {}){}\n",
                             human_bytes(s.decode.total()), human_bytes(s.decode.dense_bytes),
                             human_bytes(s.decode.router_bytes), human_bytes(s.decode.expert_bytes),
                             s.tied_embeddings ? "; token_embd doubles as output" : "");
    if (s.decode.nextn_bytes)
        std::cout << fmt::format("  (MTP/nextn blocks, {}, are not read by plain decoding and not counted)\n",
                                 human_bytes(s.decode.nextn_bytes));
    if (with_tensors) {
        std::cout << "\ntensors\n";
        for (const auto& r : model.tensors()) {
            const TensorInfo& t = model.info(r);
            std::string ne;
            for (uint32_t d = 0; d < t.n_dims; ++d) ne += (d ? "," : "") + std::to_string(t.ne[d]);
            std::cout << fmt::format("  {:<40} {:<8} {{{}}} shard {} offset {} bytes {}\n", t.name,
                                     ggml_type_display(t.type), ne, r.shard + 1, r.abs_offset, t.nbytes);
        }
    }
}

int run_inspect(const InspectOptions& o) {
    const ops::InspectResult r = ops::inspect(o.path);
    const Opened& opened = *r.opened;
    if (opened.imatrix) {
        if (o.json)
            print_json(imatrix_json(*opened.imatrix, o.tensors));
        else
            imatrix_text(*opened.imatrix, o.tensors);
    } else if (o.json) {
        print_json(model_json(*opened.model, r.summary, o.tensors));
    } else {
        model_text(*opened.model, r.summary, o.tensors);
    }
    return kExitOk;
}

}  // namespace

Command add_inspect(CLI::App& app, const GlobalOptions&) {
    auto opts = std::make_shared<InspectOptions>();
    CLI::App* sub = app.add_subcommand("inspect", "Show what a model (any shard) or an imatrix file holds");
    sub->add_option("PATH", opts->path,
                    "A GGUF model, any shard of a split model, or an imatrix (.gguf or .dat)")
        ->required();
    sub->add_flag("--json", opts->json, "Print one JSON document on stdout");
    sub->add_flag("--tensors", opts->tensors, "List every tensor (or imatrix entry)");
    return {sub, [opts] { return run_inspect(*opts); }};
}

}  // namespace gguf_reap::cli
