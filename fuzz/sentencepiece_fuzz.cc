// Fuzzes SentencePiece model loading through our wrapper (the tokenizer.model of a checkpoint
// and the tokenizer embedded in an artifact), then encodes and decodes with what loads.
#include <string>
#include <vector>

#include "llm/sentencepiece_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tok = slm::llm::SentencePieceTokenizer::FromBytes(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz/tokenizer.model");
  if (!tok.ok()) return 0;
  auto ids = (*tok)->Encode("Once upon a time \xff\xfe caf\xc3\xa9 \xe2\x96\x81");
  std::vector<int32_t> all;
  const int32_t n = (*tok)->vocab_size();
  for (int32_t i = -1; i <= n && i < 2048; ++i) all.push_back(i);
  (void)(*tok)->Decode(all);
  int32_t prev = slm::llm::Tokenizer::kNoPreviousToken;
  for (int32_t id : all) {
    (void)(*tok)->DecodeToken(prev, id);
    (void)(*tok)->IdToPiece(id);
    prev = id;
  }
  if (ids.ok()) (void)(*tok)->Decode(*ids);
  return 0;
}
