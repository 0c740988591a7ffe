// Error types shared by every layer. Lower layers throw; only main() catches, prints one line and
// maps the error to an exit code. Nothing below cli/ prints or exits.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gguf_reap {

// Process exit codes (README.md, "Exit codes"): the contract with release scripts.
enum ExitCode : int {
    kExitOk = 0,
    kExitFindings = 1,  // verification found differences
    kExitBadInput = 2,  // bad usage or bad input file
    kExitIo = 3,        // I/O or system failure
    kExitInterrupted = 130,
};

// A field of a request (RankOptions::ratio, SpliceOptions::imatrix_out, EvalRequest::texts, ...): what a
// message is about when the request, not a file, is at fault. The library names the field and its value;
// the CLI spells the field as the option that sets it (src/cli/options.cpp), so that the user reads
// "--ratio 1.5 must be ..." where a library caller reads "ratio 1.5 must be ...". Each request declares the
// fields its messages name, once, at its top (`static constexpr RequestField ..., kRatio{"ratio"}, ...;` in
// RankOptions); this floor knows no command. Two fields are the same field when their names are: several
// requests have a `model` or a `force`. docs/design.md, "Request fields".
struct RequestField {
    const char* name = "";  // as the library spells it: "ratio", "imatrix_in" (never null)
};
constexpr bool operator==(RequestField a, RequestField b) {
    return std::string_view(a.name) == std::string_view(b.name);
}

// A message in pieces: text, and fields that whoever shows it spells (their name, or a CLI's option).
// Implicit, so that a message reads {RankOptions::kRatio, " 1.5 must be ..."}.
struct MessagePart {
    MessagePart(RequestField f) : field(f) {}
    MessagePart(std::string t) : text(std::move(t)) {}
    MessagePart(const char* t) : text(t) {}
    std::optional<RequestField> field;
    std::string text;
};
using Message = std::vector<MessagePart>;
using FieldSpelling = std::function<std::string(RequestField)>;
inline Message operator+(Message a, const Message& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}
// The message as one string, each field spelled by `spell` (its name when empty).
std::string render(const Message& m, const FieldSpelling& spell = {});
// One field spelled by `spell` (its name when empty): documents (the receipt, the card) name the
// request's fields this way, as messages do.
std::string spelled(RequestField f, const FieldSpelling& spell = {});

// Base of every error gguf-reap raises on purpose. A message that names request fields keeps its
// pieces: what() spells the fields by their names, and a caller that spells them its own way (the CLI: as
// options) renders message() instead.
class Error : public std::runtime_error {
  public:
    Error(int exit_code, const std::string& message) : std::runtime_error(message), exit_code_(exit_code) {}
    Error(int exit_code, Message message)
        : std::runtime_error(render(message)), exit_code_(exit_code), message_(std::move(message)) {}
    int exit_code() const { return exit_code_; }
    // The pieces of what(); empty when it names no request field.
    const Message& message() const { return message_; }

  private:
    int exit_code_;
    Message message_;
};

// Bad input file: names the file, the byte offset and the field. what() is the full one-line message:
//   "<file>: <field> at offset <dec> (0x<hex>): <message>"
class InputError : public Error {
  public:
    InputError(std::string file, std::optional<uint64_t> offset, std::string field, std::string message);
    // A message that names request fields ("... (--strict)").
    InputError(std::string file, std::optional<uint64_t> offset, std::string field, const Message& message);

    const std::string& file() const { return file_; }
    const std::optional<uint64_t>& offset() const { return offset_; }
    const std::string& field() const { return field_; }
    const std::string& detail() const { return detail_; }

  private:
    std::string file_;
    std::optional<uint64_t> offset_;
    std::string field_;
    std::string detail_;
};

// Bad command-line usage or a request the inputs cannot satisfy (exit 2).
class UsageError : public Error {
  public:
    explicit UsageError(const std::string& message) : Error(kExitBadInput, message) {}
    explicit UsageError(Message message) : Error(kExitBadInput, std::move(message)) {}
};

// A request the inputs cannot satisfy, or whose fields contradict each other: a UsageError whose message
// names the fields at fault ({RankOptions::kRatio, " 1.5 must be ..."}).
class RequestError : public UsageError {
  public:
    explicit RequestError(Message message) : UsageError(std::move(message)) {}
};

// I/O or system failure (exit 3): "<file>: <operation>: <strerror>".
class IoError : public Error {
  public:
    IoError(const std::string& file, const std::string& operation, int errno_value);
    IoError(const std::string& file, const std::string& message);
    IoError(const std::string& file, const Message& message);
    int errno_value() const { return errno_; }

  private:
    int errno_ = 0;
};

// The user interrupted (SIGINT/SIGTERM); exit 130 after cleanup.
class Interrupted : public Error {
  public:
    Interrupted() : Error(kExitInterrupted, "interrupted") {}
};

}  // namespace gguf_reap
