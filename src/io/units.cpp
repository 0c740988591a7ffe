#include "io/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

namespace gguf_reap {

std::optional<uint64_t> parse_whole(std::string_view text, uint64_t max) {
    uint64_t v = 0;
    if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v > max) return std::nullopt;
    return v;
}

std::optional<uint64_t> parse_size(std::string_view text) {
    size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (i == 0) return std::nullopt;
    double value;
    try {
        size_t used = 0;
        value = std::stod(std::string(text.substr(0, i)), &used);
        if (used != i) return std::nullopt;
    } catch (...) {
        return std::nullopt;
    }
    std::string unit(text.substr(i));
    for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double mult;
    if (unit.empty() && value != 0) return std::nullopt;  // a bare number: bytes? GB? refused
    if (unit.empty() || unit == "B")
        mult = 1;
    else if (unit == "K" || unit == "KB")
        mult = 1e3;
    else if (unit == "M" || unit == "MB")
        mult = 1e6;
    else if (unit == "G" || unit == "GB")
        mult = 1e9;
    else if (unit == "T" || unit == "TB")
        mult = 1e12;
    else if (unit == "KIB")
        mult = 1024.0;
    else if (unit == "MIB")
        mult = 1024.0 * 1024;
    else if (unit == "GIB")
        mult = 1024.0 * 1024 * 1024;
    else if (unit == "TIB")
        mult = 1024.0 * 1024 * 1024 * 1024;
    else
        return std::nullopt;
    const double bytes = value * mult;
    if (!std::isfinite(bytes) || bytes < 0 || bytes >= 1.8e19) return std::nullopt;
    return static_cast<uint64_t>(std::llround(bytes));
}

const char* const kSizeUnits = "B, KB, MB, GB, TB (or K, M, G, T) and KiB, MiB, GiB, TiB";

std::string size_refusal(std::string_view text) {
    const bool number = !text.empty() && text.find_first_not_of("0123456789.") == std::string_view::npos;
    if (number) return fmt::format("has no unit: write {0}GB or {0}GiB (units: {1})", text, kSizeUnits);
    return fmt::format("is not a size (write e.g. 141GiB, 80GB, 512MB; units: {})", kSizeUnits);
}

std::string human_bytes(uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        ++u;
    }
    if (u == 0) return fmt::format("{} B", bytes);
    return fmt::format("{:.1f} {}", v, units[u]);
}

std::string human_count(uint64_t n) {
    const auto d = static_cast<double>(n);
    if (n >= 1'000'000'000) return fmt::format("{} ({:.2f} B)", with_commas(n), d / 1e9);
    if (n >= 1'000'000) return fmt::format("{} ({:.2f} M)", with_commas(n), d / 1e6);
    return with_commas(n);
}

std::string with_commas(uint64_t v) {
    const std::string digits = std::to_string(v);
    std::string out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
        out.push_back(digits[i]);
    }
    return out;
}

}  // namespace gguf_reap
