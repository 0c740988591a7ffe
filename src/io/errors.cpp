#include "gguf_reap/error.h"

#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace gguf_reap {

namespace {
std::string input_message(const std::string& file, const std::optional<uint64_t>& offset,
                          const std::string& field, const std::string& message) {
    std::string where = file;
    if (!field.empty() || offset) where += ": ";
    if (!field.empty()) where += field;
    if (offset) where += fmt::format("{}at offset {} (0x{:x})", field.empty() ? "" : " ", *offset, *offset);
    return where + ": " + message;
}
}  // namespace

InputError::InputError(std::string file, std::optional<uint64_t> offset, std::string field,
                       std::string message)
    : Error(kExitBadInput, input_message(file, offset, field, message)),
      file_(std::move(file)),
      offset_(offset),
      field_(std::move(field)),
      detail_(std::move(message)) {}

std::string render(const Message& m, const FieldSpelling& spell) {
    std::string s;
    for (const auto& p : m) s += p.field ? spelled(*p.field, spell) : p.text;
    return s;
}

std::string spelled(RequestField f, const FieldSpelling& spell) {
    return spell ? spell(f) : std::string(f.name);
}

InputError::InputError(std::string file, std::optional<uint64_t> offset, std::string field,
                       const Message& message)
    : Error(kExitBadInput, Message{input_message(file, offset, field, "")} + message),
      file_(std::move(file)),
      offset_(offset),
      field_(std::move(field)),
      detail_(render(message)) {}

IoError::IoError(const std::string& file, const std::string& operation, int errno_value)
    : Error(kExitIo, fmt::format("{}: {}: {}", file, operation, std::strerror(errno_value))),
      errno_(errno_value) {}

IoError::IoError(const std::string& file, const std::string& message)
    : Error(kExitIo, fmt::format("{}: {}", file, message)) {}

IoError::IoError(const std::string& file, const Message& message)
    : Error(kExitIo, Message{file + ": "} + message) {}

}  // namespace gguf_reap
