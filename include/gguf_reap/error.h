// Error types shared by every layer. Lower layers throw; only main() catches, prints one line and
// maps the error to an exit code. Nothing below cli/ prints or exits.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace gguf_reap {

// Process exit codes (README.md, "Exit codes"): the contract with release scripts.
enum ExitCode : int {
    kExitOk = 0,
    kExitFindings = 1,  // verification found differences
    kExitBadInput = 2,  // bad usage or bad input file
    kExitIo = 3,        // I/O or system failure
    kExitInterrupted = 130,
};

// Base of every error gguf-reap raises on purpose.
class Error : public std::runtime_error {
  public:
    Error(int exit_code, const std::string& message) : std::runtime_error(message), exit_code_(exit_code) {}
    int exit_code() const { return exit_code_; }

  private:
    int exit_code_;
};

// Bad input file: names the file, the byte offset and the field. what() is the full one-line message:
//   "<file>: <field> at offset <dec> (0x<hex>): <message>"
class InputError : public Error {
  public:
    InputError(std::string file, std::optional<uint64_t> offset, std::string field, std::string message);

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
};

// I/O or system failure (exit 3): "<file>: <operation>: <strerror>".
class IoError : public Error {
  public:
    IoError(const std::string& file, const std::string& operation, int errno_value);
    IoError(const std::string& file, const std::string& message);
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
