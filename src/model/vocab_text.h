// A token's text for people, from the model's own vocabulary (tokenizer.ggml.tokens), decoded as
// llama.cpp's detokenizer decodes the two common tokenizer kinds (tokenizer.ggml.model):
//   "gpt2"  byte-level BPE: each byte was stored as a printable code point (GPT-2's bytes_to_unicode:
//           'Ġ' is a space, 'Ċ' a newline); the piece is mapped back to its bytes;
//   "llama" SentencePiece: '▁' is a space and "<0xNN>" one byte.
// Other kinds, and code points outside the map (added tokens), keep the piece as stored. Bytes that are
// not valid UTF-8 (a character split across tokens) become "<0xNN>", so the text is always UTF-8.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/shard_set.h"

namespace gguf_reap {

class VocabText {
  public:
    // InputError when the model has no string array tokenizer.ggml.tokens.
    static VocabText of(const ShardSet& model);
    VocabText(std::vector<std::string> pieces, std::string tokenizer);

    size_t size() const { return pieces_.size(); }
    // The text of token `id`; "<token id>" for an id outside the vocabulary.
    std::string text(int32_t id) const;
    // The bytes token `id` stands for, as llama.cpp's detokenizer gives them (a UTF-8 character may be
    // split across tokens); null for an id outside the vocabulary.
    std::optional<std::string> bytes(int32_t id) const;

  private:
    std::vector<std::string> pieces_;
    std::string tokenizer_;
};

// `s` as a double-quoted string with \n, \t, \r, \\, \" and other control characters escaped: one line.
std::string quoted_text(const std::string& s);

}  // namespace gguf_reap
