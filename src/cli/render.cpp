#include "cli/render.h"

#include <cmath>
#include <iostream>

#include <fmt/format.h>

#include "io/units.h"
#include "model/tensor_table.h"

namespace gguf_reap::cli {

namespace {
const char* upper_type_name(GgufType t) {
    switch (t) {
        case GgufType::kUint8:
            return "UINT8";
        case GgufType::kInt8:
            return "INT8";
        case GgufType::kUint16:
            return "UINT16";
        case GgufType::kInt16:
            return "INT16";
        case GgufType::kUint32:
            return "UINT32";
        case GgufType::kInt32:
            return "INT32";
        case GgufType::kFloat32:
            return "FLOAT32";
        case GgufType::kBool:
            return "BOOL";
        case GgufType::kString:
            return "STRING";
        case GgufType::kArray:
            return "ARRAY";
        case GgufType::kUint64:
            return "UINT64";
        case GgufType::kInt64:
            return "INT64";
        case GgufType::kFloat64:
            return "FLOAT64";
    }
    return "?";
}
}  // namespace

nlohmann::ordered_json kv_json(const Kv& kv) {
    if (kv.type == GgufType::kArray) return {{"array_of", upper_type_name(kv.elem_type)}, {"len", kv.count}};
    if (auto s = kv.as_string()) return *s;
    if (auto b = kv.as_bool()) return *b;
    if (auto f = kv.as_float())
        return std::isfinite(*f) ? nlohmann::ordered_json(*f) : nlohmann::ordered_json(nullptr);
    if (kv.type == GgufType::kUint64) return *kv.as_uint();
    if (auto i = kv.as_int()) return *i;
    return nullptr;
}

nlohmann::ordered_json imatrix_json(const ImatrixFile& im, bool with_entries) {
    nlohmann::ordered_json j;
    j["kind"] = "imatrix";
    j["path"] = im.path();
    j["format"] = imatrix_kind_name(im.kind());
    j["file_size"] = im.file().size();
    j["datasets"] = im.datasets();
    j["chunk_count"] =
        im.chunk_count() ? nlohmann::ordered_json(*im.chunk_count()) : nlohmann::ordered_json(nullptr);
    j["chunk_size"] =
        im.chunk_size() ? nlohmann::ordered_json(*im.chunk_size()) : nlohmann::ordered_json(nullptr);
    j["entry_count"] = im.entries().size();
    size_t experts = 0;
    for (const auto& e : im.entries()) experts += is_expert_entry_name(e.name);
    j["expert_entry_count"] = experts;
    if (with_entries) {
        auto arr = nlohmann::ordered_json::array();
        for (const auto& e : im.entries()) {
            nlohmann::ordered_json o{{"name", e.name}, {"nval", e.nval}};
            if (im.kind() == ImatrixKind::kGguf) {
                o["ne0"] = e.ne0;
                o["n_mat"] = e.n_mat;
            } else {
                o["ncall"] = e.ncall;
            }
            arr.push_back(o);
        }
        j["entries"] = arr;
    }
    return j;
}

void imatrix_text(const ImatrixFile& im, bool with_entries) {
    std::cout << fmt::format("imatrix      {}\n", im.path());
    std::cout << fmt::format("format       {}\n",
                             im.kind() == ImatrixKind::kGguf ? "GGUF imatrix" : "legacy .dat");
    std::string ds;
    for (const auto& d : im.datasets()) ds += (ds.empty() ? "" : ", ") + d;
    std::cout << fmt::format("datasets     {}\n", ds.empty() ? "(none recorded)" : ds);
    std::cout << fmt::format("chunks       {} × {} tokens\n",
                             im.chunk_count() ? std::to_string(*im.chunk_count()) : "?",
                             im.chunk_size() ? std::to_string(*im.chunk_size()) : "?");
    size_t experts = 0;
    for (const auto& e : im.entries()) experts += is_expert_entry_name(e.name);
    std::cout << fmt::format("entries      {} ({} expert entries)\n", im.entries().size(), experts);
    if (with_entries)
        for (const auto& e : im.entries()) {
            if (im.kind() == ImatrixKind::kGguf)
                std::cout << fmt::format("  {:<40} ne0 {:>6}  matrices {:>5}\n", e.name, e.ne0, e.n_mat);
            else
                std::cout << fmt::format("  {:<40} nval {:>8}  ncall {:>6}\n", e.name, e.nval, e.ncall);
        }
}

}  // namespace gguf_reap::cli
