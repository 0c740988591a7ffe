// What calibrate's run (calibrate.cpp) and its record (calibrate_report.cpp) share.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gguf_reap/calibrate.h"

namespace gguf_reap::calibrate_detail {

inline constexpr std::string_view kJsonName = "calibrate.json";

// The texts of a calibrate.json, as calibrate_json wrote them. InputError when it is not one.
std::vector<CalibrateTextFacts> read_texts(const std::string& path);
// True when DIR/calibrate.json exists and says "complete": true.
bool was_complete(const std::string& dir);

}  // namespace gguf_reap::calibrate_detail
