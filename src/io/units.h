// Sizes as people write and read them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gguf_reap {

// "40G" → 40e9, "500MB" → 500e6, "1.5GiB" → 1.5·2^30, "4096B" → 4096, "0" → 0. Decimal K/M/G/T (with or
// without B) as gguf-split reads them; binary with KiB/MiB/GiB/TiB; any case. A number without a unit
// (other than 0) is not a size: "80" would be 80 bytes to one reader and 80 GB to the next. nullopt for
// anything that is not a size.
std::optional<uint64_t> parse_size(std::string_view text);
// The units parse_size reads, for messages: "B, KB, MB, GB, TB (or K, M, G, T) and KiB, MiB, GiB, TiB".
extern const char* const kSizeUnits;
// Why `text` is not a size, to follow "OPTION 'TEXT' ": "has no unit: write 80GB or 80GiB (units: …)"
// for a bare number, else "is not a size (write e.g. 141GiB, 80GB, 512MB; units: …)".
std::string size_refusal(std::string_view text);

// "4096" → 4096: decimal digits only (no sign, space or unit), at most `max`; nullopt for anything else.
std::optional<uint64_t> parse_whole(std::string_view text, uint64_t max);

// 198,543,360,000 → "184.9 GiB"; small values in B/KiB/MiB.
std::string human_bytes(uint64_t bytes);

// 1234567 → "1,234,567".
std::string with_commas(uint64_t v);
// A count for people: "1,752,192 (1.75 M)", "671,026,419,200 (671.03 B)", "812" (below a million).
std::string human_count(uint64_t n);

}  // namespace gguf_reap
