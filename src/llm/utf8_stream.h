// Utf8StreamDecoder: turns a stream of byte chunks (token pieces) into text that is safe to
// print: only complete, valid UTF-8 characters come out.
//
// A multi-byte character may be split across tokens (byte-fallback pieces, byte-level BPE), so
// an incomplete but still possibly valid tail is held back until the next chunk. A byte that
// can never become part of a valid character (stray continuation byte, C0/C1/F5..FF, overlong
// form, surrogate, > U+10FFFF, a sequence cut short by a non-continuation byte) is emitted as
// U+FFFD instead of being held forever. Validity is strict UTF-8 (RFC 3629 / Unicode table 3-7).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace slm::llm {

class Utf8StreamDecoder {
 public:
  // How many U+FFFD an ill-formed sequence becomes.
  enum class Replacement {
    // One per maximal ill-formed subpart (Unicode's recommended practice; what Python's
    // errors="replace", Rust's from_utf8_lossy and HF tokenizers produce): "\xE2\x82A" → "\uFFFDA".
    kMaximalSubpart,
    // One per byte: what SentencePiece's Decode produces for byte-fallback runs, so streamed
    // text matches SentencePieceTokenizer::Decode exactly: "\xE2\x82A" → "\uFFFD\uFFFDA".
    kPerByte,
  };

  static constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

  explicit Utf8StreamDecoder(Replacement replacement = Replacement::kMaximalSubpart)
      : replacement_(replacement) {}

  // Appends the complete characters that `bytes` finishes to *out; keeps an incomplete tail.
  void Push(std::string_view bytes, std::string* out);
  std::string Push(std::string_view bytes) {
    std::string out;
    Push(bytes, &out);
    return out;
  }

  // End of stream: appends U+FFFD for a held-back incomplete tail (one, or one per byte for
  // kPerByte) to *out and resets the decoder.
  void Flush(std::string* out);
  std::string Flush() {
    std::string out;
    Flush(&out);
    return out;
  }

  // Drops any held-back bytes.
  void Reset() { pending_size_ = 0; }

  // Bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_size_; }

 private:
  void PushByte(uint8_t byte, std::string* out);
  void StartSequence(uint8_t byte, std::string* out);
  void EmitInvalidPending(std::string* out);

  Replacement replacement_;
  char pending_[4] = {};      // lead byte + continuation bytes seen so far
  size_t pending_size_ = 0;   // 0 = between characters
  size_t needed_ = 0;         // continuation bytes still missing
  uint8_t next_min_ = 0x80;   // allowed range of the next continuation byte
  uint8_t next_max_ = 0xBF;
};

}  // namespace slm::llm
