#include "llm/utf8_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace slm::llm {
namespace {

using Replacement = Utf8StreamDecoder::Replacement;

const std::string kFFFD = "\xEF\xBF\xBD";

// Feeds `chunks` one by one, then flushes; returns everything emitted.
std::string Stream(const std::vector<std::string>& chunks,
                   Replacement replacement = Replacement::kMaximalSubpart) {
  Utf8StreamDecoder decoder(replacement);
  std::string out;
  for (const auto& c : chunks) decoder.Push(c, &out);
  decoder.Flush(&out);
  return out;
}

TEST(Utf8StreamTest, AsciiPassesThroughImmediately) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push("Hello, "), "Hello, ");
  EXPECT_EQ(d.Push("world\n"), "world\n");
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.Flush(), "");
}

// Every split point of every multi-byte length: nothing is emitted until the character is
// complete, and then exactly the character.
TEST(Utf8StreamTest, SplitAtEveryByteBoundaryEmitsOnlyCompleteCharacters) {
  const std::vector<std::string> chars = {
      "\xC3\xA9",          // é  (2 bytes)
      "\xE2\x9C\x93",      // ✓  (3 bytes)
      "\xE6\x97\xA5",      // 日 (3 bytes)
      "\xF0\x9F\x99\x82",  // 🙂 (4 bytes)
      "\xF4\x8F\xBF\xBF",  // U+10FFFF, the largest code point
  };
  for (const auto& ch : chars) {
    for (size_t split = 1; split < ch.size(); ++split) {
      Utf8StreamDecoder d;
      EXPECT_EQ(d.Push("a" + ch.substr(0, split)), "a") << "split " << split;
      EXPECT_EQ(d.pending_bytes(), split);
      EXPECT_EQ(d.Push(ch.substr(split) + "b"), ch + "b") << "split " << split;
      EXPECT_EQ(d.pending_bytes(), 0u);
    }
    // One byte per chunk.
    Utf8StreamDecoder d;
    std::string out;
    for (const char c : ch) out += d.Push(std::string(1, c));
    EXPECT_EQ(out, ch);
  }
}

TEST(Utf8StreamTest, StrayContinuationAndNeverValidBytesAreReplaced) {
  EXPECT_EQ(Stream({"a\x80" "b"}), "a" + kFFFD + "b");
  EXPECT_EQ(Stream({"\xC0\xAF"}), kFFFD + kFFFD);  // C0: always overlong
  EXPECT_EQ(Stream({"\xFF" "x"}), kFFFD + "x");
  EXPECT_EQ(Stream({"\xF5\x80\x80\x80"}), kFFFD + kFFFD + kFFFD + kFFFD);
}

TEST(Utf8StreamTest, OverlongSurrogateAndOutOfRangeAreCaughtAtSecondByte) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push("\xE0\x80"), kFFFD + kFFFD);  // overlong 3-byte
  EXPECT_EQ(d.Push("\xED\xA0"), kFFFD + kFFFD);  // surrogate U+D800
  EXPECT_EQ(d.Push("\xF0\x80"), kFFFD + kFFFD);  // overlong 4-byte
  EXPECT_EQ(d.Push("\xF4\x90"), kFFFD + kFFFD);  // > U+10FFFF
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST(Utf8StreamTest, TruncatedSequenceIsNotHeldForever) {
  // "\xE2\x82" is a valid prefix of "€"; the 'A' ends it.
  EXPECT_EQ(Stream({"\xE2", "\x82", "A"}), kFFFD + "A");
  EXPECT_EQ(Stream({"\xE2", "\x82", "A"}, Replacement::kPerByte), kFFFD + kFFFD + "A");
  // The byte that ends the prefix may itself start a valid character.
  EXPECT_EQ(Stream({"\xE2\x82", "\xC3\xA9"}), kFFFD + "\xC3\xA9");
}

TEST(Utf8StreamTest, FlushReplacesIncompleteTailAndResets) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push("ok\xF0\x9F\x99"), "ok");
  EXPECT_EQ(d.Flush(), kFFFD);
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.Push("\xC3\xA9"), "\xC3\xA9");  // decodes normally after the flush

  Utf8StreamDecoder per_byte(Replacement::kPerByte);
  EXPECT_EQ(per_byte.Push("\xF0\x9F\x99"), "");
  EXPECT_EQ(per_byte.Flush(), kFFFD + kFFFD + kFFFD);
  EXPECT_EQ(per_byte.Flush(), "");
}

TEST(Utf8StreamTest, ResetDropsPendingBytes) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push("\xE2\x9C"), "");
  d.Reset();
  EXPECT_EQ(d.Push("x"), "x");
  EXPECT_EQ(d.Flush(), "");
}

TEST(Utf8StreamTest, ReplacementCharacterItselfPassesThrough) {
  EXPECT_EQ(Stream({kFFFD}), kFFFD);
}

}  // namespace
}  // namespace slm::llm
