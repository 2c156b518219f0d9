// Fuzzes the non-SentencePiece tokenizer loaders: HF tokenizer.json, tiktoken files,
// vocab.json + merges.txt, and the file container an artifact embeds them in; then encodes
// and decodes with whatever loads. The first input byte picks the loader.
#include <string>
#include <vector>

#include "llm/hf_tokenizer_json.h"
#include "llm/tiktoken_tokenizer.h"
#include "llm/tokenizer_factory.h"

namespace {

void Exercise(const slm::llm::Tokenizer& tok) {
  auto ids = tok.Encode("Hello world! caf\xc3\xa9 \xff 123 <|endoftext|>  \n\n");
  if (ids.ok()) (void)tok.Decode(*ids);
  std::vector<int32_t> all;
  for (int32_t i = -1; i <= tok.vocab_size() && i < 1024; ++i) all.push_back(i);
  (void)tok.Decode(all);
  int32_t prev = slm::llm::Tokenizer::kNoPreviousToken;
  for (int32_t id : all) {
    (void)tok.DecodeToken(prev, id);
    prev = id;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  slm::llm::TokenizerSideFiles side;
  slm::llm::SpecialTokenPolicy policy;
  switch (data[0] % 4) {
    case 0: {
      auto t = slm::llm::LoadHfTokenizerJson(bytes, "fuzz/tokenizer.json", side, &policy);
      if (t.ok()) Exercise(**t);
      break;
    }
    case 1: {
      auto t = slm::llm::LoadTiktokenTokenizer(bytes, "fuzz/tokenizer.model", side, &policy);
      if (t.ok()) Exercise(**t);
      break;
    }
    case 2: {  // vocab.json, a NUL byte, merges.txt
      const size_t nul = bytes.find('\0');
      const std::string_view vocab = bytes.substr(0, nul);
      const std::string_view merges = nul == std::string_view::npos ? std::string_view() : bytes.substr(nul + 1);
      auto t = slm::llm::LoadVocabMergesTokenizer(vocab, merges, "fuzz/vocab.json", side, &policy);
      if (t.ok()) Exercise(**t);
      break;
    }
    case 3: {  // the artifact's embedded form; the second byte picks the kind
      if (bytes.empty()) return 0;
      static const char* kKinds[] = {"hf_tokenizer_json", "tiktoken", "bpe_vocab_merges", "sentencepiece"};
      auto t = slm::llm::LoadEmbeddedTokenizer(kKinds[static_cast<uint8_t>(bytes[0]) % 4], bytes.substr(1),
                                               "fuzz (embedded tokenizer)");
      if (t.ok() && t->tokenizer) Exercise(*t->tokenizer);
      break;
    }
  }
  return 0;
}
