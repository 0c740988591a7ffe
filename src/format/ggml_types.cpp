#include "format/ggml_types.h"

#include <array>
#include <cctype>
#include <string>

#include "io/checked.h"

namespace gguf_reap {

namespace {
// From ggml/src/ggml.c type_traits[] and ggml-common.h (reference §2). QK_K = 256.
constexpr std::array<GgmlType, kGgmlTypeCount> kTypes = {{
    {"f32", 1, 4, {}},
    {"f16", 1, 2, {}},
    {"q4_0", 32, 18, {}},
    {"q4_1", 32, 20, {}},
    {{}, 0, 0, "Q4_2 was removed from ggml in 2023"},
    {{}, 0, 0, "Q4_3 was removed from ggml in 2023"},
    {"q5_0", 32, 22, {}},
    {"q5_1", 32, 24, {}},
    {"q8_0", 32, 34, {}},
    {"q8_1", 32, 36, {}},
    {"q2_K", 256, 84, {}},
    {"q3_K", 256, 110, {}},
    {"q4_K", 256, 144, {}},
    {"q5_K", 256, 176, {}},
    {"q6_K", 256, 210, {}},
    {"q8_K", 256, 292, {}},
    {"iq2_xxs", 256, 66, {}},
    {"iq2_xs", 256, 74, {}},
    {"iq3_xxs", 256, 98, {}},
    {"iq1_s", 256, 50, {}},
    {"iq4_nl", 32, 18, {}},
    {"iq3_s", 256, 110, {}},
    {"iq2_s", 256, 82, {}},
    {"iq4_xs", 256, 136, {}},
    {"i8", 1, 1, {}},
    {"i16", 1, 2, {}},
    {"i32", 1, 4, {}},
    {"i64", 1, 8, {}},
    {"f64", 1, 8, {}},
    {"iq1_m", 256, 56, {}},
    {"bf16", 1, 2, {}},
    {{}, 0, 0, "Q4_0_4_4 was removed from GGUF (use Q4_0 with runtime repacking)"},
    {{}, 0, 0, "Q4_0_4_8 was removed from GGUF (use Q4_0 with runtime repacking)"},
    {{}, 0, 0, "Q4_0_8_8 was removed from GGUF (use Q4_0 with runtime repacking)"},
    {"tq1_0", 256, 54, {}},
    {"tq2_0", 256, 66, {}},
    {{}, 0, 0, "IQ4_NL_4_4 was removed from GGUF (use IQ4_NL with runtime repacking)"},
    {{}, 0, 0, "IQ4_NL_4_8 was removed from GGUF (use IQ4_NL with runtime repacking)"},
    {{}, 0, 0, "IQ4_NL_8_8 was removed from GGUF (use IQ4_NL with runtime repacking)"},
    {"mxfp4", 32, 17, {}},
    {"nvfp4", 64, 36, {}},
    {"q1_0", 128, 18, {}},
    {"q2_0", 64, 18, {}},
}};
}  // namespace

const GgmlType* ggml_type(int32_t id) {
    if (id < 0 || id >= kGgmlTypeCount) return nullptr;
    return &kTypes[static_cast<size_t>(id)];
}

std::string ggml_type_display(int32_t id) {
    const GgmlType* t = ggml_type(id);
    if (!t || t->name.empty()) return "type" + std::to_string(id);
    std::string s(t->name);
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

std::optional<int32_t> ggml_type_from_name(std::string_view name) {
    for (int32_t id = 0; id < kGgmlTypeCount; ++id) {
        const auto& t = kTypes[static_cast<size_t>(id)];
        if (t.name.empty() || t.name.size() != name.size()) continue;
        bool same = true;
        for (size_t i = 0; i < name.size() && same; ++i)
            same = std::tolower(static_cast<unsigned char>(name[i])) ==
                   std::tolower(static_cast<unsigned char>(t.name[i]));
        if (same) return id;
    }
    return std::nullopt;
}

std::optional<uint64_t> ggml_row_size(int32_t id, int64_t ne0) {
    const GgmlType* t = ggml_type(id);
    if (!t || t->block_size <= 0 || ne0 < 0 || ne0 % t->block_size != 0) return std::nullopt;
    return checked_mul(static_cast<uint64_t>(ne0 / t->block_size), static_cast<uint64_t>(t->type_size));
}

std::optional<uint64_t> pad_to(uint64_t x, uint64_t alignment) {
    auto sum = checked_add(x, alignment - 1);
    if (!sum) return std::nullopt;
    return *sum & ~(alignment - 1);
}

}  // namespace gguf_reap
