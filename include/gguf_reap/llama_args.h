// The llama.cpp arguments a user adds to every llama.cpp run gguf-reap makes (--llama-args "ARGS", default
// $GGUF_REAP_LLAMA_ARGS): GPU offload (-ngl 99), experts kept in RAM (-ot exps=CPU, --n-cpu-moe N), a split
// over GPUs (-ts 1,1) or over machines (--rpc host:port,...).
//
//   LlamaArgs::parse(text, origin)   split as a shell splits words: quotes respected, nothing expanded
//   args.check(tool)                 UsageError naming an argument that collides with one gguf-reap sets
//   args.for_tool(tool)              the words that tool takes, to go after gguf-reap's own arguments
//
// What gguf-reap sets, and so refuses, is the table of llama.cpp's tools (src/services/llama_cpp/
// llama_tools.cpp); which tool takes what is llama.cpp 34af94cd9's --help (llama_args_table.inc beside it,
// written by tools/llama-args-table.sh). llama-tokenize gets none: gguf-reap runs it only to count tokens,
// which needs the vocabulary alone.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gguf_reap {

// The tools gguf-reap runs, and (cli, quantize) the ones it names in the card's recipes and its advice.
enum class LlamaTool { perplexity, imatrix, completion, server, tokenize, cli, quantize };

// "llama-perplexity", ...: the binary's name.
const char* llama_tool_name(LlamaTool tool);

// One argument of the user's, as the first word that is an option names it: "-ngl" with its values
// ["99"]. Words before the first option have an empty `option`.
struct LlamaArg {
    std::string option;
    std::vector<std::string> values;
};

struct LlamaArgs {
    std::vector<std::string> words;  // as split, in order
    std::string origin;              // where they came from, named in errors: the CLI says "--llama-args"

    // Splits `text` into words as a POSIX shell would, expanding nothing: blanks separate words;
    // '...' is literal; inside "..." a backslash escapes only \ " $ ` and newline; elsewhere a backslash
    // escapes the next character. UsageError for an unclosed quote or a trailing backslash.
    static LlamaArgs parse(std::string_view text, std::string origin = "llama_args");

    bool empty() const { return words.empty(); }
    // The words grouped into options and their values. A word is an option when it starts with '-' and is
    // not a negative number ("-1", "-0.5"); the words after it up to the next option are its values.
    std::vector<LlamaArg> grouped() const;
    // UsageError when an argument sets what gguf-reap sets for `tool` (-m, -f, -c, -b, -o, --chunks,
    // --kl-divergence*, --in-file, --output-format, ...: the table's refusals), naming it and what to do.
    void check(LlamaTool tool) const;
    // The words `tool` takes, in order: an option that llama.cpp's --help lists only for other tools is
    // left out with its values; an option in no list (llama.cpp's common options, or one newer than the
    // table) goes to every tool but llama-tokenize, which gets none.
    std::vector<std::string> for_tool(LlamaTool tool) const;
};

// Words joined into one line a shell would split back into them: a word with blanks, quotes or other
// shell syntax in it is single-quoted.
std::string shell_join(const std::vector<std::string>& words);

}  // namespace gguf_reap
