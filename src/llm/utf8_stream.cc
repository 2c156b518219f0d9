#include "llm/utf8_stream.h"

namespace slm::llm {

void Utf8StreamDecoder::Push(std::string_view bytes, std::string* out) {
  for (const char c : bytes) PushByte(static_cast<uint8_t>(c), out);
}

void Utf8StreamDecoder::Flush(std::string* out) {
  if (pending_size_ > 0) EmitInvalidPending(out);
}

void Utf8StreamDecoder::PushByte(uint8_t byte, std::string* out) {
  if (pending_size_ == 0) {
    StartSequence(byte, out);
    return;
  }
  if (byte < next_min_ || byte > next_max_) {
    // The held-back prefix can no longer complete. `byte` was not part of it, so it may start
    // a new character.
    EmitInvalidPending(out);
    StartSequence(byte, out);
    return;
  }
  pending_[pending_size_++] = static_cast<char>(byte);
  next_min_ = 0x80;
  next_max_ = 0xBF;
  if (--needed_ == 0) {
    out->append(pending_, pending_size_);
    pending_size_ = 0;
  }
}

// Well-formed sequences (Unicode table 3-7). The second byte's range is narrowed for E0/ED/F0/F4
// so that overlong forms, surrogates and code points above U+10FFFF are caught at that byte
// rather than after the whole sequence has been held back.
void Utf8StreamDecoder::StartSequence(uint8_t byte, std::string* out) {
  if (byte < 0x80) {
    out->push_back(static_cast<char>(byte));
    return;
  }
  next_min_ = 0x80;
  next_max_ = 0xBF;
  if (byte >= 0xC2 && byte <= 0xDF) {
    needed_ = 1;
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    needed_ = 2;
    if (byte == 0xE0) next_min_ = 0xA0;  // below: overlong
    if (byte == 0xED) next_max_ = 0x9F;  // above: UTF-16 surrogates
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    needed_ = 3;
    if (byte == 0xF0) next_min_ = 0x90;  // below: overlong
    if (byte == 0xF4) next_max_ = 0x8F;  // above: > U+10FFFF
  } else {
    // 80..BF (stray continuation), C0/C1 (always overlong), F5..FF (never valid).
    out->append(kReplacementChar);
    return;
  }
  pending_[0] = static_cast<char>(byte);
  pending_size_ = 1;
}

void Utf8StreamDecoder::EmitInvalidPending(std::string* out) {
  // The held-back bytes are a lead byte and continuation bytes; on their own the continuation
  // bytes are stray, so per-byte replacement is simply one U+FFFD per held byte.
  const size_t count = replacement_ == Replacement::kPerByte ? pending_size_ : 1;
  for (size_t i = 0; i < count; ++i) out->append(kReplacementChar);
  pending_size_ = 0;
}

}  // namespace slm::llm
