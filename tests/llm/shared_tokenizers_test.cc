// Every tokenizer in ../shared/tokenizers/, in every format it ships, against llama.cpp's test
// vectors (ids made by HF tokenizers' encode(text, add_special_tokens=False)).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "llm/tokenizer_factory.h"
#include "llm/utf8_stream.h"
#include "test_util.h"

namespace slm::llm {
namespace {

using slm::testing::TokenizersDir;

struct Vectors {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
};

// .inp: each text followed by "\n__ggml_vocab_test__\n"; .out: one line of ids per text.
Vectors ReadVectors(const std::string& name) {
  Vectors v;
  const std::string base = TokenizersDir() + name + "/ggml-vocab-" + name + ".gguf";
  auto inp = ReadFileToString(base + ".inp");
  auto out = ReadFileToString(base + ".out");
  EXPECT_TRUE(inp.ok() && out.ok()) << base;
  if (!inp.ok() || !out.ok()) return v;
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  while (pos < inp->size()) {
    const size_t hit = inp->find(sep, pos);
    if (hit == std::string::npos) break;
    v.texts.push_back(inp->substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  std::istringstream lines(*out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream nums(line);
    std::vector<int32_t> ids;
    for (int32_t id; nums >> id;) ids.push_back(id);
    v.ids.push_back(std::move(ids));
  }
  EXPECT_EQ(v.texts.size(), v.ids.size()) << base;
  return v;
}

struct Case {
  std::string vocab;  // folder and test-vector name
  std::string path;   // relative to the folder ("" = the folder itself)
  std::string kind;   // expected tokenizer kind
  bool lossless;      // decode(encode(text)) == text for every test text
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.vocab << "/" << c.path; }

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.vocab + "_" + (info.param.path.empty() ? "dir" : info.param.path);
  for (char& c : n) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class SharedTokenizerTest : public ::testing::TestWithParam<Case> {};

std::string Stream(const Tokenizer& tok, const std::vector<int32_t>& ids, Utf8StreamDecoder::Replacement r) {
  Utf8StreamDecoder utf8(r);
  std::string out;
  int32_t prev = Tokenizer::kNoPreviousToken;
  for (int32_t id : ids) {
    utf8.Push(tok.DecodeToken(prev, id), &out);
    prev = id;
  }
  utf8.Flush(&out);
  return out;
}

TEST_P(SharedTokenizerTest, ReproducesHuggingFaceIdsAndDecodesBack) {
  const Case& c = GetParam();
  const std::string path = TokenizersDir() + c.vocab + (c.path.empty() ? "" : "/" + c.path);
  auto bundle = LoadTokenizerBundle(path);
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  EXPECT_EQ(bundle->kind, c.kind);
  const Tokenizer& tok = *bundle->tokenizer;
  const Vectors v = ReadVectors(c.vocab);
  ASSERT_EQ(v.texts.size(), 46u);
  int matched = 0;
  for (size_t i = 0; i < v.texts.size(); ++i) {
    auto ids = tok.Encode(v.texts[i]);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, v.ids[i]) << c.vocab << " text " << i << ": '" << v.texts[i] << "'";
    matched += *ids == v.ids[i];
    const std::string decoded = tok.Decode(v.ids[i]);
    if (c.lossless) {
      EXPECT_EQ(decoded, v.texts[i]) << c.vocab << " text " << i;
    }
    // Streaming (DecodeToken through a UTF-8 stream decoder) gives the full decode.
    EXPECT_EQ(Stream(tok, v.ids[i], Utf8StreamDecoder::Replacement::kPerByte), decoded) << c.vocab << " text " << i;
  }
  RecordProperty("matched", matched);
}

INSTANTIATE_TEST_SUITE_P(
    AllFormats, SharedTokenizerTest,
    ::testing::Values(Case{"gpt-2", "tokenizer.json", "hf_tokenizer_json", true},
                      Case{"gpt-2", "vocab.json", "bpe_vocab_merges", true},
                      Case{"falcon", "", "hf_tokenizer_json", true},
                      Case{"mpt", "", "hf_tokenizer_json", true},
                      Case{"llama-spm", "tokenizer.json", "hf_tokenizer_json", true},
                      Case{"llama-spm", "tokenizer.model", "sentencepiece", true},
                      Case{"phi-3", "tokenizer.json", "hf_tokenizer_json", true},
                      Case{"phi-3", "tokenizer.model", "sentencepiece", true},
                      Case{"qwen2", "", "bpe_vocab_merges", true},
                      Case{"llama-bpe", "", "tiktoken", true},
                      Case{"llama-bpe", "original/tokenizer.model", "tiktoken", true}),
    CaseName);

}  // namespace
}  // namespace slm::llm
