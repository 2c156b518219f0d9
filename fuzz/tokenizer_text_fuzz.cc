// Fuzzes what a user types and what a model generates through the real stories260K tokenizer:
// arbitrary bytes as a prompt (non-UTF-8 included), arbitrary ids to decode, and the streaming
// UTF-8 decoder the runner prints through. The model path comes from SLM_FUZZ_SPM_MODEL
// (scripts/fuzz.sh sets it) or defaults to the shared stories260K tokenizer.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llm/sentencepiece_tokenizer.h"
#include "llm/utf8_stream.h"

namespace {

const slm::llm::SentencePieceTokenizer& Tok() {
  static const slm::llm::SentencePieceTokenizer* tok = [] {
    const char* env = std::getenv("SLM_FUZZ_SPM_MODEL");
    std::string path = env ? env : SLM_SHARED_DIR "/models/stories260K/tokenizer.model";
    auto t = slm::llm::SentencePieceTokenizer::FromFile(path);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      std::abort();
    }
    return std::move(t).value().release();
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& tok = Tok();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto ids = tok.Encode(text);
  if (ids.ok()) (void)tok.Decode(*ids);
  // The same bytes read as ids (any int32, in or out of the vocabulary).
  std::vector<int32_t> raw(size / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
  (void)tok.Decode(raw);
  slm::llm::Utf8StreamDecoder stream(slm::llm::Utf8StreamDecoder::Replacement::kPerByte);
  std::string out;
  int32_t prev = slm::llm::Tokenizer::kNoPreviousToken;
  for (int32_t id : raw) {
    stream.Push(tok.DecodeToken(prev, id), &out);
    prev = id;
  }
  stream.Push(text, &out);
  stream.Flush(&out);
  return 0;
}
