#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "llm/sentencepiece_tokenizer.h"
#include "llm/utf8_stream.h"

namespace slm::llm {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kModelPath = std::string(SLM_SHARED_DIR) + "/models/stories260K/tokenizer.model";
const std::string kGoldenDir = std::string(SLM_SHARED_DIR) + "/golden/stories260K";

std::unique_ptr<SentencePieceTokenizer> LoadStories() {
  auto tok = SentencePieceTokenizer::FromFile(kModelPath);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

// The golden run: BOS followed by 256 greedy tokens.
std::vector<int32_t> GoldenIds() {
  auto text = ReadFileToString(kGoldenDir + "/greedy_t0_bos_256tok.ids.txt");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  std::istringstream in(text.ok() ? *text : "");
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

std::string GoldenText() {
  auto text = ReadFileToString(kGoldenDir + "/greedy_t0_bos_256tok.txt");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

// SentencePiece's own Decode: the independent reference for ours.
std::string ReferenceDecode(const std::vector<int32_t>& ids) {
  sentencepiece::SentencePieceProcessor sp;
  const auto status = sp.Load(kModelPath);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return sp.DecodeIds(ids);
}

// What a streaming runner prints: DecodeToken of each id after its predecessor.
std::string StreamRaw(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string out;
  int32_t prev = Tokenizer::kNoPreviousToken;
  for (const int32_t id : ids) {
    out += tok.DecodeToken(prev, id);
    prev = id;
  }
  return out;
}

// Same, through the UTF-8 stream decoder, as the runner prints it.
std::string StreamText(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  Utf8StreamDecoder utf8(Utf8StreamDecoder::Replacement::kPerByte);
  std::string out;
  int32_t prev = Tokenizer::kNoPreviousToken;
  for (const int32_t id : ids) {
    utf8.Push(tok.DecodeToken(prev, id), &out);
    prev = id;
  }
  utf8.Flush(&out);
  return out;
}

TEST(SentencePieceTokenizerTest, LoadsStoriesVocabularyAndSpecialIds) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->IdToPiece(403), "\xE2\x96\x81Once");
  EXPECT_EQ(tok->IdToPiece(13), "<0x0A>");
}

// HF's LlamaTokenizer (legacy) on "Once upon a time" gives [1, 403, 407, 261, 378] with BOS;
// the same ids open the golden generation after its BOS.
TEST(SentencePieceTokenizerTest, EncodesLikeHfLlamaTokenizerWithoutBos) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  auto ids = tok->Encode("Once upon a time");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_THAT(*ids, ElementsAre(403, 407, 261, 378));
  const auto golden = GoldenIds();
  ASSERT_GE(golden.size(), 5u);
  EXPECT_EQ(std::vector<int32_t>(golden.begin() + 1, golden.begin() + 5), *ids);
  EXPECT_EQ(tok->Decode(*ids), "Once upon a time");
}

TEST(SentencePieceTokenizerTest, EncodeOfEmptyTextIsEmpty) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  auto ids = tok->Encode("");
  ASSERT_TRUE(ids.ok());
  EXPECT_TRUE(ids->empty());
}

// The golden text file is Decode({BOS, 256 generated ids}) plus the '\n' its writer appends:
// BOS decodes to nothing and the first piece's dummy-prefix space is dropped ("▁Once" → "Once").
TEST(SentencePieceTokenizerTest, DecodesGoldenIdsToGoldenText) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  const auto ids = GoldenIds();
  ASSERT_EQ(ids.size(), 257u);
  ASSERT_EQ(ids[0], 1);
  EXPECT_EQ(tok->Decode(ids) + "\n", GoldenText());
  EXPECT_EQ(tok->Decode(ids), ReferenceDecode(ids));
  // Without BOS the text is the same: the first text piece still loses its leading space.
  EXPECT_EQ(tok->Decode(std::span(ids).subspan(1)) + "\n", GoldenText());
}

TEST(SentencePieceTokenizerTest, StreamedTokensConcatenateToDecode) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  const auto ids = GoldenIds();
  EXPECT_EQ(StreamRaw(*tok, ids), tok->Decode(ids));
  EXPECT_EQ(StreamText(*tok, ids), tok->Decode(ids));
  // Starting after the prompt, as the runner does: the first generated token follows BOS.
  EXPECT_EQ(tok->DecodeToken(1, 403), "Once");
  EXPECT_EQ(tok->DecodeToken(Tokenizer::kNoPreviousToken, 403), "Once");
  EXPECT_EQ(tok->DecodeToken(403, 407), " upon");
}

TEST(SentencePieceTokenizerTest, ByteFallbackPiecesDecodeToRawBytes) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->DecodeToken(403, 13), "\n");  // <0x0A>
  EXPECT_EQ(tok->DecodeToken(403, 229), "\xE2");  // <0xE2>: half a character, on purpose
}

TEST(SentencePieceTokenizerTest, NonAsciiTextRoundTripsThroughByteFallback) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  const std::string text = "H\xC3\xA9llo w\xC3\xB6rld \xE2\x9C\x93 \xE6\x97\xA5\xE6\x9C\xAC "
                           "\xF0\x9F\x99\x82\nend";  // "Héllo wörld ✓ 日本 🙂\nend"
  auto ids = tok->Encode(text);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  int byte_pieces = 0;
  for (const int32_t id : *ids) byte_pieces += tok->IdToPiece(id).starts_with("<0x");
  EXPECT_GT(byte_pieces, 4) << "the test text should need byte fallback in a 512-piece vocab";
  EXPECT_EQ(tok->Decode(*ids), text);
  EXPECT_EQ(ReferenceDecode(*ids), text);
  EXPECT_EQ(StreamRaw(*tok, *ids), text);
  EXPECT_EQ(StreamText(*tok, *ids), text);
}

// An invalid byte run: Decode replaces each byte with U+FFFD; the raw stream does not, and the
// per-byte UTF-8 stream decoder turns it into exactly Decode's text.
TEST(SentencePieceTokenizerTest, InvalidByteRunStreamsLikeDecode) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> ids = {1, 403, 229, 133, 68, 407};  // Once <E2> <82> <41='A'> upon
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(tok->Decode(ids), "Once" + fffd + fffd + "A upon");
  EXPECT_EQ(ReferenceDecode(ids), tok->Decode(ids));
  // A run cut short at the end of the sequence.
  const std::vector<int32_t> cut = {403, 243, 162};  // Once <F0> <9F>
  EXPECT_EQ(tok->Decode(cut), "Once" + fffd + fffd);
  EXPECT_EQ(ReferenceDecode(cut), tok->Decode(cut));
  EXPECT_EQ(StreamText(*tok, cut), tok->Decode(cut));
  EXPECT_EQ(StreamText(*tok, ids), tok->Decode(ids));
}

TEST(SentencePieceTokenizerTest, SpecialUnknownAndOutOfRangeIds) {
  auto tok = LoadStories();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->DecodeToken(403, 1), "");  // <s>
  EXPECT_EQ(tok->DecodeToken(403, 2), "");  // </s>
  // <unk> → " ⁇ ", even where the installed SentencePiece spells it " \342\201\207 ".
  EXPECT_EQ(tok->DecodeToken(403, 0), " \xE2\x81\x87 ");
  const std::vector<int32_t> unk = {0};
  EXPECT_EQ(tok->Decode(unk), " \xE2\x81\x87 ");
  EXPECT_EQ(tok->DecodeToken(403, 512), "");
  EXPECT_EQ(tok->DecodeToken(403, -5), "");
  const std::vector<int32_t> with_bad = {403, 9999, -1, 407};
  EXPECT_EQ(tok->Decode(with_bad), "Once upon");
  EXPECT_EQ(tok->IdToPiece(9999), "");
}

TEST(SentencePieceTokenizerTest, FromBytesMatchesFromFile) {
  auto bytes = ReadFileToString(kModelPath);
  ASSERT_TRUE(bytes.ok());
  auto tok = SentencePieceTokenizer::FromBytes(*bytes, "in-memory");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto ids = (*tok)->Encode("Once upon a time");
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(403, 407, 261, 378));
}

TEST(SentencePieceTokenizerTest, CorruptProtoIsAnErrorNamingTheSource) {
  for (const std::string& bytes : {std::string("definitely not a protobuf \xFF\xFF\xFF"),
                                   std::string()}) {
    auto tok = SentencePieceTokenizer::FromBytes(bytes, "broken/tokenizer.model");
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), ErrorCode::kParseError);
    EXPECT_THAT(tok.status().message(), HasSubstr("broken/tokenizer.model"));
  }
}

TEST(SentencePieceTokenizerTest, TruncatedModelIsAnErrorNotACrash) {
  auto bytes = ReadFileToString(kModelPath);
  ASSERT_TRUE(bytes.ok());
  for (const size_t keep : {size_t{1}, size_t{100}, bytes->size() / 2, bytes->size() - 1}) {
    auto tok = SentencePieceTokenizer::FromBytes(bytes->substr(0, keep), "cut.model");
    EXPECT_FALSE(tok.ok()) << "kept " << keep << " bytes";
  }
}

TEST(SentencePieceTokenizerTest, MissingFileIsNotFoundNamingThePath) {
  auto tok = SentencePieceTokenizer::FromFile("/nonexistent/dir/tokenizer.model");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(tok.status().message(), HasSubstr("/nonexistent/dir/tokenizer.model"));
}

}  // namespace
}  // namespace slm::llm
