// SentencePiece tokenizer (tokenizer.model of Llama-1/2, Mistral, Gemma, TinyStories ...).
//
// Encode is SentencePieceProcessor's. HF's LlamaTokenizer with legacy=true gives the same ids:
// SentencePiece itself adds the dummy-prefix space ("Once" → "▁Once").
//
// Decode follows SentencePieceProcessor::Decode (checked against it in the tests) but runs
// over tables built at load, shared with DecodeToken. Conventions, checked against the
// stories260K golden output, whose text file is Decode({BOS, generated...}) followed by one
// '\n' that the golden writer appends:
//  - control tokens (<s>, </s>, ...) decode to nothing;
//  - the first non-control token loses its leading "▁" when the model adds a dummy prefix, so
//    Decode({BOS, "▁Once", "▁upon"}) == Decode({"▁Once", "▁upon"}) == "Once upon";
//  - byte-fallback pieces "<0xAB>" are the raw byte 0xAB; Decode() replaces each byte of a run
//    that is not valid UTF-8 with U+FFFD, DecodeToken() returns the raw byte;
//  - <unk> decodes to the model's unk surface (" ⁇ " by default).
// Differences from SentencePiece: the normalizer's denormalization rules are not applied (no
// LLM tokenizer has them), and 0.1.97 also strips the next piece's space after a bare "▁" at
// the start (newer versions and HF's fast tokenizer do not; neither do we).
//
// Streaming (DecodeToken): the leading "▁" is dropped when prev_id is kNoPreviousToken, out of
// range, or a control token. When control tokens occur only at the start of the sequence
// (BOS + text, the runner's case), passing DecodeToken's outputs through
// Utf8StreamDecoder(Replacement::kPerByte) gives exactly Decode()'s text, invalid byte runs
// included; for valid UTF-8 the raw concatenation already does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "llm/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace slm::llm {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads a serialized ModelProto (the content of a tokenizer.model file). `source_name`
  // (usually the path) is named in errors: kParseError for a proto that does not load.
  static Result<std::unique_ptr<SentencePieceTokenizer>> FromBytes(
      std::string serialized_model_proto, const std::string& source_name);
  // Reads and loads `path`: kNotFound / kIoError when it cannot be read, else as FromBytes.
  static Result<std::unique_ptr<SentencePieceTokenizer>> FromFile(const std::string& path);

  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  Result<std::vector<int32_t>> Encode(std::string_view text) const override;
  std::string DecodeToken(int32_t prev_id, int32_t id) const override;
  std::string Decode(std::span<const int32_t> ids) const override;
  std::string IdToPiece(int32_t id) const override;
  int32_t vocab_size() const override;
  std::optional<int32_t> bos_id() const override;
  std::optional<int32_t> eos_id() const override;

 private:
  // What one id contributes to decoded text, precomputed at load so DecodeToken is a lookup.
  struct PieceSurface {
    std::string text;              // "▁" already replaced by ' '; raw byte for byte pieces
    bool is_control = false;       // decodes to nothing and marks a sequence start
    bool strippable_space = false; // text starts with the dummy-prefix space
  };

  SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> processor,
                         std::string source_name);
  void BuildSurfaces();
  bool IsSequenceStart(int32_t prev_id) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string source_name_;  // for error messages
  std::vector<PieceSurface> surfaces_;  // [vocab_size]
};

}  // namespace slm::llm
