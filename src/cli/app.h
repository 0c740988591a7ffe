#pragma once

namespace gguf_reap::cli {
// Parses the command line, runs one subcommand, returns the process exit code. Never throws.
int run(int argc, char** argv);
}  // namespace gguf_reap::cli
