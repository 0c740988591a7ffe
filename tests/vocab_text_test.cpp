// model/vocab_text: token text for people, decoded as llama.cpp's detokenizer does.
#include "model/vocab_text.h"

#include <gtest/gtest.h>

namespace gguf_reap {
namespace {

TEST(VocabText, ByteLevelPiecesBecomeTheirBytes) {
    // GPT-2's bytes_to_unicode: 'Ġ' (U+0120) is a space, 'Ċ' (U+010A) a newline, and "âĢĶ" the three
    // bytes of an em dash (e2 80 94).
    const VocabText v({"def", "Ġmain", "(", "Ċ", "âĢĶ", "âĢ"}, "gpt2");
    EXPECT_EQ(v.text(0), "def");
    EXPECT_EQ(v.text(1), " main");
    EXPECT_EQ(v.text(3), "\n");
    EXPECT_EQ(v.text(4), "\xe2\x80\x94");
    // Half a character (the rest is in the next token) is shown byte by byte, never as invalid UTF-8.
    EXPECT_EQ(v.text(5), "<0xE2><0x80>");
}

TEST(VocabText, SentencePiecePieces) {
    const VocabText v({"\xe2\x96\x81Hello", "<0x0A>", "wor", "<0xC3>"}, "llama");
    EXPECT_EQ(v.text(0), " Hello");
    EXPECT_EQ(v.text(1), "\n");
    EXPECT_EQ(v.text(2), "wor");
    EXPECT_EQ(v.text(3), "<0xC3>");
}

TEST(VocabText, OtherTokenizersAndIdsOutsideTheVocabulary) {
    const VocabText v({"Ġas-is", "<|endoftext|>"}, "bert");
    EXPECT_EQ(v.text(0), "Ġas-is");
    EXPECT_EQ(v.text(1), "<|endoftext|>");
    EXPECT_EQ(v.text(2), "<token 2>");
    EXPECT_EQ(v.text(-1), "<token -1>");
    // An added token in a byte-level vocabulary keeps its own text.
    EXPECT_EQ(VocabText({"<|im_end|>"}, "gpt2").text(0), "<|im_end|>");
}

TEST(VocabText, QuotedTextIsOneLine) {
    EXPECT_EQ(quoted_text("def main(\n\t\"x\\\"\x01"), "\"def main(\\n\\t\\\"x\\\\\\\"\\x01\"");
}

}  // namespace
}  // namespace gguf_reap
