// Tokenizer: the text <-> id interface the runner uses (SentencePiece, HF BPE, ...).
//
// Streaming contract: the runner prints each new token as DecodeToken(prev_id, id) and feeds
// the bytes through a Utf8StreamDecoder, because one character may span several tokens
// (byte-fallback pieces, byte-level BPE). For a sequence whose special tokens all come first
// (e.g. BOS + text), the concatenation of DecodeToken(ids[i-1], ids[i]) (with prev_id = -1 for
// i == 0) equals the bytes of Decode(ids) whenever they form valid UTF-8; see each
// implementation for what happens otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace slm::llm {

class Tokenizer {
 public:
  // prev_id value meaning "id is the first token of the sequence".
  static constexpr int32_t kNoPreviousToken = -1;

  virtual ~Tokenizer() = default;

  // Text → ids. Adds no BOS/EOS: the caller (chat template / IOManager) decides.
  virtual Result<std::vector<int32_t>> Encode(std::string_view text) const = 0;

  // Bytes that `id` contributes when appended after `prev_id` (kNoPreviousToken at the start).
  // May be an incomplete UTF-8 sequence; may be empty (special tokens). Ids outside
  // [0, vocab_size()) contribute nothing.
  virtual std::string DecodeToken(int32_t prev_id, int32_t id) const = 0;

  // ids → text, special tokens skipped. Ids outside [0, vocab_size()) are skipped.
  virtual std::string Decode(std::span<const int32_t> ids) const = 0;

  // The vocabulary entry of `id` as stored by the tokenizer (e.g. "▁the", "<0x0A>", "<s>"),
  // for debugging and traces. The default decodes the id on its own.
  virtual std::string IdToPiece(int32_t id) const {
    const int32_t one[1] = {id};
    return Decode(one);
  }

  virtual int32_t vocab_size() const = 0;
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
};

}  // namespace slm::llm
