// No file of src/ but the architecture table (src/model/architectures.cpp) tells architectures apart by
// name: a fact about one architecture is a column of the table (docs/architectures.md, "Adding an
// architecture"). This reads every source file of src/ and fails on a string literal that is an
// architecture's name ("cohere2moe", as in `info.name == "cohere2moe"` or a table keyed by names), and on a
// starts_with / ends_with / find / contains of a piece of one ("qwen3", 3 characters or more).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/tensor_table.h"

namespace gguf_reap {
namespace {

namespace fs = std::filesystem;

// Literals that are an architecture's name but mean something else where they stand.
struct Allowed {
    const char* file;  // under src/
    const char* literal;
    const char* why;
};
constexpr Allowed kAllowed[] = {
    {"model/vocab_text.cpp", "llama", "tokenizer.ggml.model \"llama\" is SentencePiece, not an architecture"},
};

bool allowed(const std::string& file, const std::string& literal) {
    for (const Allowed& a : kAllowed)
        if (file == a.file && literal == a.literal) return true;
    return false;
}

std::set<std::string> arch_names() {
    std::set<std::string> names;
    for (const ArchInfo& a : architectures()) names.emplace(a.name);
    return names;
}

// What in one line of src/<rel> tells architectures apart by name, one sentence each.
std::vector<std::string> name_uses(const std::set<std::string>& names, const std::string& rel,
                                   const std::string& line) {
    static const std::regex literal(R"re("([a-z0-9_.\-]+)")re");
    static const std::regex call(R"re((starts_with|ends_with|find|rfind|contains)\("([a-z0-9_.\-]+)")re");
    std::vector<std::string> out;
    const size_t code = line.find_first_not_of(" \t");
    if (line.find('"') == std::string::npos ||
        line.compare(code == std::string::npos ? 0 : code, 2, "//") == 0)
        return out;
    for (std::sregex_iterator m(line.begin(), line.end(), literal), end; m != end; ++m)
        if (names.count((*m)[1]) && !allowed(rel, (*m)[1]))
            out.push_back(fmt::format("names architecture \"{}\"", (*m)[1].str()));
    for (std::sregex_iterator m(line.begin(), line.end(), call), end; m != end; ++m) {
        const std::string how = (*m)[1], piece = (*m)[2];
        if (piece.size() < 3) continue;  // "-", "_": separators, not a name's piece
        for (const std::string& name : names)
            if (how == "starts_with" ? name.starts_with(piece)
                : how == "ends_with" ? name.ends_with(piece)
                                     : name.find(piece) != std::string::npos) {
                out.push_back(fmt::format("tests for \"{}\", part of architecture \"{}\"", piece, name));
                break;
            }
    }
    return out;
}

TEST(ArchitectureNames, TheCheckFindsComparisonsAndTablesByName) {
    const auto names = arch_names();
    EXPECT_EQ(
        name_uses(names, "model/loader_ffn.cpp", R"(    if (info.name == "cohere2moe" && c == 0))").size(),
        1u);
    EXPECT_EQ(
        name_uses(names, "model/loader_ffn.cpp", R"(    {"bailingmoe3", kExpertSharedCountKey, false},)")
            .size(),
        1u);
    EXPECT_EQ(name_uses(names, "ops/x.cpp", R"(    if (arch.starts_with("qwen3")) return;)").size(), 1u);
    EXPECT_EQ(name_uses(names, "ops/x.cpp", R"(    // "laguna" in a comment)").size(), 0u);
    EXPECT_EQ(name_uses(names, "ops/x.cpp", R"(    if (name.find("_exps") != npos) return;)").size(), 0u);
    EXPECT_EQ(name_uses(names, "model/vocab_text.cpp", R"(    if (tokenizer_ == "llama") return;)").size(),
              0u);
    EXPECT_EQ(name_uses(names, "ops/x.cpp", R"(    if (tokenizer_ == "llama") return;)").size(), 1u);
}

TEST(ArchitectureNames, ComparedOnlyInTheArchitectureTable) {
    const fs::path src = fs::path(GGUF_REAP_TEST_DATA) / ".." / ".." / "src";
    ASSERT_TRUE(fs::is_directory(src)) << src;
    const auto names = arch_names();
    size_t files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(src)) {
        const std::string ext = entry.path().extension().string();
        if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".inc")) continue;
        const std::string rel = entry.path().lexically_relative(src).generic_string();
        if (rel == "model/architectures.cpp") continue;
        ++files;
        std::ifstream in(entry.path());
        std::string line;
        for (int n = 1; std::getline(in, line); ++n)
            for (const std::string& use : name_uses(names, rel, line))
                ADD_FAILURE() << "src/" << rel << ":" << n << " " << use
                              << ": make what it decides a column of src/model/architectures.cpp\n  " << line;
    }
    EXPECT_GT(files, 100u) << "read only " << files << " source files under " << src;
}

}  // namespace
}  // namespace gguf_reap
