// tokenizer.json pipeline pieces on small hand-written tokenizers: added-token flags,
// Metaspace, unsupported features, the factory and the artifact container.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "llm/bpe_tokenizer.h"
#include "llm/hf_tokenizer_json.h"
#include "llm/tiktoken_tokenizer.h"
#include "llm/tokenizer_factory.h"
#include "model/compiler.h"
#include "test_util.h"

namespace slm::llm {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;
using slm::testing::TokenizersDir;

// A tiny byte-free BPE: characters a b c ▁ and x, merges a+b, ab+c.
json TinyTokenizer() {
  return json::parse(R"({
    "version": "1.0",
    "added_tokens": [
      {"id": 10, "content": "<s>", "special": true, "lstrip": false, "rstrip": false, "normalized": false, "single_word": false},
      {"id": 11, "content": "<L>", "special": false, "lstrip": true, "rstrip": false, "normalized": false, "single_word": false},
      {"id": 12, "content": "<R>", "special": false, "lstrip": false, "rstrip": true, "normalized": false, "single_word": false},
      {"id": 13, "content": "cab", "special": false, "lstrip": false, "rstrip": false, "normalized": false, "single_word": true}
    ],
    "normalizer": null,
    "pre_tokenizer": {"type": "WhitespaceSplit"},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [10], "tokens": ["<s>"]}}},
    "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": "x", "fuse_unk": true, "byte_fallback": false,
      "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "x": 5, " ": 6},
      "merges": ["a b", ["ab", "c"]]}
  })");
}

Result<std::unique_ptr<BpeTokenizer>> Load(const json& j, SpecialTokenPolicy* policy = nullptr) {
  return LoadHfTokenizerJson(j.dump(), "tiny/tokenizer.json", TokenizerSideFiles{}, policy);
}

std::vector<int32_t> Ids(const Tokenizer& t, std::string_view text) {
  auto ids = t.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(TokenizerJsonTest, MergesByRankAndFusesUnknownCharacters) {
  auto t = Load(TinyTokenizer());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_THAT(Ids(**t, "abc ab ba"), ElementsAre(4, 3, 1, 0));
  EXPECT_THAT(Ids(**t, "azzb"), ElementsAre(0, 5, 1));  // "zz" → one fused unk
}

TEST(TokenizerJsonTest, AddedTokensHonourLstripRstripAndSingleWord) {
  auto t = Load(TinyTokenizer());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // <L> swallows the spaces before it, <R> those after it.
  EXPECT_THAT(Ids(**t, "a  <L>b"), ElementsAre(0, 11, 1));
  EXPECT_THAT(Ids(**t, "a<R>  b"), ElementsAre(0, 12, 1));
  // "cab" is a single_word token: split out alone, not inside "abcab".
  EXPECT_THAT(Ids(**t, "a cab"), ElementsAre(0, 13));
  EXPECT_THAT(Ids(**t, "abcab"), ElementsAre(4, 3));
  EXPECT_THAT(Ids(**t, "<s>ab"), ElementsAre(10, 3));
}

TEST(TokenizerJsonTest, DecodeSkipsSpecialTokensAndStreamsTheSameText) {
  auto t = Load(TinyTokenizer());
  ASSERT_TRUE(t.ok());
  const std::vector<int32_t> ids = {10, 4, 6, 3, 11};
  EXPECT_EQ((*t)->Decode(ids), "abc ab<L>");
  std::string streamed;
  int32_t prev = Tokenizer::kNoPreviousToken;
  for (int32_t id : ids) streamed += (*t)->DecodeToken(prev, id), prev = id;
  EXPECT_EQ(streamed, "abc ab<L>");
}

TEST(TokenizerJsonTest, PostProcessorTemplateGivesTheBosPrefix) {
  SpecialTokenPolicy policy;
  auto t = Load(TinyTokenizer(), &policy);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(policy.prefix, ElementsAre(10));
  EXPECT_TRUE(policy.suffix.empty());
  EXPECT_EQ((*t)->bos_id(), 10);
}

TEST(TokenizerJsonTest, MetaspacePrependSchemeFirstPrefixesOnlyTheInputStart) {
  json j = TinyTokenizer();
  j["model"]["vocab"] = {{"\xE2\x96\x81", 0}, {"a", 1}, {"\xE2\x96\x81" "a", 2}, {"x", 3}};
  j["model"]["merges"] = json::array({"\xE2\x96\x81 a"});
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}, {"split", true}};
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}, {"split", true}};
  auto t = Load(j);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_THAT(Ids(**t, "a a"), ElementsAre(2, 2));
  EXPECT_THAT(Ids(**t, "<s>a"), ElementsAre(10, 1));  // not at the input start: no prefix
  EXPECT_EQ((*t)->Decode(std::vector<int32_t>{2, 2}), "a a");
}

TEST(TokenizerJsonTest, UnknownPreTokenizerIsUnsupportedNamingTypeAndFile) {
  json j = TinyTokenizer();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "UnicodeScripts"}}})}};
  auto t = Load(j);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kUnsupported);
  EXPECT_THAT(t.status().message(), AllOf(HasSubstr("UnicodeScripts"), HasSubstr("tiny/tokenizer.json"),
                                          HasSubstr("pre_tokenizer.pretokenizers[0]")));
}

TEST(TokenizerJsonTest, UnknownNormalizerModelAndDecoderAreUnsupported) {
  json j = TinyTokenizer();
  j["normalizer"] = {{"type", "Precompiled"}};
  auto t = Load(j);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kUnsupported);
  EXPECT_THAT(t.status().message(), HasSubstr("Precompiled"));

  j = TinyTokenizer();
  j["model"]["type"] = "WordPiece";
  t = Load(j);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), AllOf(HasSubstr("WordPiece"), HasSubstr("tiny/tokenizer.json")));

  j = TinyTokenizer();
  j["decoder"] = {{"type", "CTC"}};
  t = Load(j);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("CTC"));
}

TEST(TokenizerJsonTest, MergeNamingAMissingTokenIsAParseError) {
  json j = TinyTokenizer();
  j["model"]["merges"] = json::array({"a q"});
  auto t = Load(j);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kParseError);
  EXPECT_THAT(t.status().message(), HasSubstr("merge 0"));
}

TEST(TokenizerJsonTest, InvalidUtf8InputIsRejected) {
  auto t = LoadTokenizer(TokenizersDir() + "gpt-2/tokenizer.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto ids = (*t)->Encode("ab\xFF");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), ErrorCode::kInvalidArgument);
}

TEST(TokenizerJsonTest, ByteLevelStreamingHoldsSplitCharactersUntilComplete) {
  auto t = LoadTokenizer(TokenizersDir() + "gpt-2/tokenizer.json");
  ASSERT_TRUE(t.ok());
  auto ids = (*t)->Encode("🦙");  // several byte-level tokens for one character
  ASSERT_TRUE(ids.ok());
  ASSERT_GT(ids->size(), 1u);
  EXPECT_NE((*t)->DecodeToken(Tokenizer::kNoPreviousToken, (*ids)[0]), "🦙");
  EXPECT_EQ((*t)->Decode(*ids), "🦙");
}

TEST(TokenizerFactoryTest, AddSpecialFollowsEachTokenizersConfig) {
  auto llama3 = LoadTokenizerBundle(TokenizersDir() + "llama-bpe");
  ASSERT_TRUE(llama3.ok()) << llama3.status().ToString();
  EXPECT_THAT(llama3->add_special.prefix, ElementsAre(128000));
  EXPECT_EQ(llama3->tokenizer->eos_id(), 128001);
  auto llama2 = LoadTokenizerBundle(TokenizersDir() + "llama-spm/tokenizer.json");
  ASSERT_TRUE(llama2.ok());
  EXPECT_THAT(llama2->add_special.prefix, ElementsAre(1));
  auto phi3 = LoadTokenizerBundle(TokenizersDir() + "phi-3");
  ASSERT_TRUE(phi3.ok());
  EXPECT_TRUE(phi3->add_special.prefix.empty());  // add_bos_token: false
  auto qwen2 = LoadTokenizerBundle(TokenizersDir() + "qwen2");
  ASSERT_TRUE(qwen2.ok());
  EXPECT_TRUE(qwen2->add_special.prefix.empty());
  EXPECT_EQ(qwen2->tokenizer->eos_id(), 151643);
}

TEST(TokenizerFactoryTest, DirectoryPrefersTokenizerJson) {
  auto gpt2 = LoadTokenizerBundle(TokenizersDir() + "gpt-2");
  ASSERT_TRUE(gpt2.ok());
  EXPECT_EQ(gpt2->kind, "hf_tokenizer_json");
  EXPECT_TRUE(LooksLikeTiktoken("IQ== 0\nIg== 1\n"));
  EXPECT_FALSE(LooksLikeTiktoken("\x0a\x0e\x0a\x05<unk>"));
}

TEST(TokenizerFactoryTest, PackedCheckpointTokenizersLoadBackWithTheSameIds) {
  const std::string text = "Hello world, 1234 <|im_end|> ünïcode 🦙";
  for (const char* name : {"qwen2", "llama-bpe", "phi-3", "falcon"}) {
    auto packed = PackCheckpointTokenizer(TokenizersDir() + name);
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    ASSERT_TRUE(packed->has_value()) << name;
    auto direct = LoadTokenizer(TokenizersDir() + name);
    auto embedded = LoadEmbeddedTokenizer((*packed)->kind, (*packed)->bytes, "test");
    ASSERT_TRUE(direct.ok() && embedded.ok()) << name;
    EXPECT_EQ(*(*direct)->Encode(text), *embedded->tokenizer->Encode(text)) << name;
  }
  auto qwen2 = PackCheckpointTokenizer(TokenizersDir() + "qwen2");
  EXPECT_EQ((*qwen2)->kind, "bpe_vocab_merges");
  EXPECT_FALSE((*qwen2)->adds_bos);
  auto llama3 = PackCheckpointTokenizer(TokenizersDir() + "llama-bpe");
  EXPECT_EQ((*llama3)->kind, "tiktoken");
  EXPECT_TRUE((*llama3)->adds_bos);
}

TEST(TokenizerFactoryTest, ContainerRoundTripsAndRejectsTruncation) {
  const std::string packed = PackTokenizerFiles({{"vocab.json", "{}"}, {"merges.txt", "a b\n"}});
  auto files = UnpackTokenizerFiles(packed, "x.slm");
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[1].second, "a b\n");
  auto bad = UnpackTokenizerFiles(packed.substr(0, packed.size() - 2), "x.slm");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kParseError);
  EXPECT_THAT(bad.status().message(), HasSubstr("x.slm"));
  auto kind = LoadEmbeddedTokenizer("wordpiece", "abc", "x.slm");
  ASSERT_FALSE(kind.ok());
  EXPECT_EQ(kind.status().code(), ErrorCode::kUnsupported);
}

// stories260K's weights with Llama 3's tiktoken files beside them: the artifact carries the
// tiktoken tokenizer (and its tokenizer_config.json), so the .slm alone tokenizes like the
// checkpoint directory, and its add_bos follows Llama 3's template.
TEST(TokenizerFactoryTest, CompiledArtifactEmbedsTheCheckpointsTiktokenTokenizer) {
  namespace fs = std::filesystem;
  const std::string dir = slm::testing::MakeTempDir("tok-ckpt");
  const fs::path stories = std::string(SLM_SHARED_DIR) + "/models/stories260K";
  fs::create_symlink(stories / "config.json", fs::path(dir) / "config.json");
  fs::create_symlink(stories / "model.safetensors", fs::path(dir) / "model.safetensors");
  fs::create_directory(fs::path(dir) / "original");
  fs::create_symlink(TokenizersDir() + "llama-bpe/original/tokenizer.model", fs::path(dir) / "original" / "tokenizer.model");
  fs::create_symlink(TokenizersDir() + "llama-bpe/tokenizer_config.json", fs::path(dir) / "tokenizer_config.json");
  const std::string artifact = dir + "/model.slm";
  model::CompileOptions options;
  options.max_context_len = 64;
  auto report = model::CompileCheckpoint(dir, artifact, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto from_dir = LoadTokenizerBundle(dir);
  auto from_slm = LoadTokenizerBundle(artifact);
  ASSERT_TRUE(from_dir.ok() && from_slm.ok()) << from_slm.status().ToString();
  EXPECT_EQ(from_slm->kind, "tiktoken");
  const std::string text = "Hello, y'all! 🦙 <|eot_id|>";
  EXPECT_EQ(*from_dir->tokenizer->Encode(text), *from_slm->tokenizer->Encode(text));
  EXPECT_EQ(from_slm->tokenizer->eos_id(), 128001);
}

}  // namespace
}  // namespace slm::llm

// Found by tokenizer_json_fuzz: a rank of 274119883 on a one-line file made the loader size its id
// table by that number (8.7 GB). Ranks must stay within the file's token count (with slack).
namespace slm::llm {
namespace {
TEST(TiktokenLoaderTest, RankFarBeyondTheTokenCountIsRefusedBeforeAllocating) {
  TokenizerSideFiles side;
  SpecialTokenPolicy policy;
  auto t = LoadTiktokenTokenizer("IQ== 0\nMTEx 274119883\n", "x/tokenizer.model", side, &policy);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("x/tokenizer.model: largest rank is 274119883 for 2 tokens"), std::string::npos)
      << t.status().message();
  EXPECT_TRUE(LoadTiktokenTokenizer("IQ== 0\nIg== 1\n", "x/tokenizer.model", side, &policy).ok());
}
}  // namespace
}  // namespace slm::llm
